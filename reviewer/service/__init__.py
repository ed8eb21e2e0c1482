"""The queue service: HTTP routes (app), the SQLite store, tokens (auth) and its commands (cli)."""
