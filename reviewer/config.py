"""Where reviewer keeps its files: the platform data dir and the queue service's default database."""

from __future__ import annotations

from pathlib import Path

import platformdirs

APP_NAME = "reviewer"


def data_dir() -> Path:
    """The per-user data directory (e.g. ~/.local/share/reviewer); not created here."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def default_db_path() -> Path:
    """The queue service's SQLite file when `--db` is not given."""
    return data_dir() / "queue.sqlite3"
