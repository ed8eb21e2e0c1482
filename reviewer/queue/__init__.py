"""The queue's client side: its messages, the HTTP client, the config, ids, deciding, approve and
reject, submitting proposal files."""
