"""Notifications from the queue: targets (`--notify`), signed webhooks, chat services through Apprise,
and the loop that delivers the outbox."""
