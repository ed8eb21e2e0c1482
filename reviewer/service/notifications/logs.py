"""No `--notify` URL reaches a log line: a chat service's secret lives in its URL's path or host, a
webhook's often in its path or query, and libraries (httpx logs every request's URL at INFO, Apprise
its own) log them as they please. Each record, whichever logger made it, has the URLs replaced by the
targets' names and their secret parts by `***` before any handler sees it."""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from reviewer.service.notifications.targets import WEBHOOK_SCHEMES, target_name

MIN_PIECE_CHARS: Final = 6
"""A piece of a URL's secret part this long is hidden wherever it appears (a library may log a
token alone); shorter ones (`hook`, `v1`) say nothing and would blank ordinary words, and a piece
with a dot is a host name or address (`json://10.0.0.5/...`), hidden only within the whole URL."""
_SEPARATORS: Final = re.compile(r"[/?&=#;:@,]+")


def secret_parts(url: str) -> list[str]:
    """What of a `--notify` URL no log may show: for a webhook all but its scheme and host, for an
    Apprise URL all but its scheme (its host is often a token: `pagerduty://KEY@API_KEY`)."""
    parts = urlsplit(url)
    kept = f"{parts.scheme}://" + (parts.netloc if parts.scheme.lower() in WEBHOOK_SCHEMES else "")
    rest = url[len(kept) :] if url.startswith(kept) else url
    pieces = {
        piece for piece in _SEPARATORS.split(rest) if len(piece) >= MIN_PIECE_CHARS and "." not in piece
    }
    pieces |= {unquote(piece) for piece in pieces}
    return sorted({rest, *pieces} - {"", "/"}, key=len, reverse=True)


def hide(text: str, replacements: list[tuple[str, str]]) -> str:
    for secret, shown in replacements:
        text = text.replace(secret, shown)
    return text


def hide_urls_in_logs(urls: Iterable[str]) -> None:
    """From now on, every log record of this process shows none of `urls`' secret parts."""
    replacements: list[tuple[str, str]] = []
    for url in urls:
        replacements.append((url, target_name(url)))
        replacements.extend((part, "***") for part in secret_parts(url))
    if not replacements:
        return
    previous = logging.getLogRecordFactory()

    def hiding(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: the handler reports it, with nothing formatted here
            return record
        shown = hide(message, replacements)
        if shown != message:
            record.msg, record.args = shown, None
        if record.exc_info and record.exc_info[0] is not None:
            formatted = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            record.exc_text = hide(formatted, replacements)
        return record

    logging.setLogRecordFactory(hiding)
