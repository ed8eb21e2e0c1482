"""The queue's client side: its messages, the HTTP client, the config, deciding, approve and reject."""
