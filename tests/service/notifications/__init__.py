"""Tests of the queue's notifications: the outbox, the delivery loop, webhooks, Apprise, `serve --notify`."""
