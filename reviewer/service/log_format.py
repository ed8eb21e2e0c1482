"""How `serve` writes its log: text lines (the default) or `--log-format json`, one object a line.

A JSON line carries the time, level, logger and message, and the id of the request being served
(`request_log.REQUEST_ID`) when there is one; an access line carries its fields too (method, path,
status, caller, milliseconds). Messages are the same either way: no token, secret or webhook path
is written into one (`auth.redact_tokens`, `notifications.targets.target_name`).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Final

from reviewer.plan.sanitize import safe_text
from reviewer.service.request_log import LINE, REQUEST_ID, access_log

FORMATS: Final = ("text", "json")
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
ACCESS_FIELDS: Final = ("method", "path", "status", "caller", "ms")
"""What `request_log.LINE` formats, by name."""


class TextLines(logging.Formatter):
    """One line a record, as `TEXT_FORMAT` says: every control, bidi or invisible character of the
    message (a URL path, a header, anything a client sent) shown as a visible escape, as the JSON
    format's encoding does, so nobody can forge a line or send a terminal escape codes through it.
    A traceback keeps its line breaks and nothing else."""

    def format(self, record: logging.LogRecord) -> str:
        escaped = logging.makeLogRecord(
            {**record.__dict__, "msg": safe_text(record.getMessage()), "args": None, "exc_text": None}
        )
        return super().format(escaped)

    def formatException(self, ei: Any) -> str:
        return safe_text(super().formatException(ei), multiline=True)


class JsonLines(logging.Formatter):
    """One JSON object a line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = REQUEST_ID.get()
        if request_id is not None:
            line["request_id"] = request_id
        if record.name == access_log.name and record.msg == LINE and isinstance(record.args, tuple):
            line.update(zip(ACCESS_FIELDS, record.args, strict=True))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging(kind: str) -> None:
    """The root logger at INFO on stderr, as text or JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if kind == "json" else TextLines(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
