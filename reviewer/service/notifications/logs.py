"""No `--notify` URL reaches a log line: a chat service's secret lives in its URL's path or host, a
webhook's often in its path or query, and libraries (httpx logs every request's URL at INFO, Apprise
its own) log them as they please. Each record, whichever logger made it, has the URLs replaced by the
targets' names and their secret parts redacted before any handler sees it."""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from reviewer.redaction import redact
from reviewer.service.notifications.sender import WEBHOOK_SCHEMES, target_name

_SEPARATORS: Final = re.compile(r"[/?&=#;:@,]+")


def token_like(piece: str) -> bool:
    """A piece of a URL worth hiding wherever it appears (a library may log a token alone): long, or
    not a word (`T0123ABCD`, `8f2c...`). `reviewer` or `hooks` would blank ordinary words of every
    line, and a piece with a dot is a host name or address, hidden within its URL only."""
    if "." in piece or len(piece) < 8:
        return False
    return len(piece) >= 20 or any(character.isdigit() for character in piece)


def secret_parts(url: str) -> list[str]:
    """What of a `--notify` URL no log may show beyond the URL itself: its token-like pieces and, for
    an Apprise URL, all but its scheme (its host is often a token: `pagerduty://KEY@API_KEY`)."""
    parts = urlsplit(url)
    apprise = parts.scheme.lower() not in WEBHOOK_SCHEMES
    kept = f"{parts.scheme}://" + ("" if apprise else parts.netloc)
    rest = url[len(kept) :] if url.startswith(kept) else url
    pieces = {piece for piece in _SEPARATORS.split(rest) if token_like(piece)}
    pieces |= {unquote(piece) for piece in pieces}
    if apprise:
        pieces.add(rest)
    return sorted(pieces - {""}, key=len, reverse=True)


def hide(text: str, names: Mapping[str, str], secrets: list[str]) -> str:
    """Whole URLs as their targets' names first (a token one URL shares with another must not break the
    other's match), then the secret parts left anywhere."""
    for url, name in names.items():
        text = text.replace(url, name)
    return redact(text, secrets)


def hide_urls_in_logs(urls: Iterable[str]) -> None:
    """From now on, every log record of this process shows none of `urls`' secret parts."""
    chosen = list(urls)
    names = {url: target_name(url) for url in chosen}
    secrets = [part for url in chosen for part in secret_parts(url)]
    if not names:
        return
    previous = logging.getLogRecordFactory()

    def hiding(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: the handler reports it, with nothing formatted here
            return record
        shown = hide(message, names, secrets)
        if shown != message:
            record.msg, record.args = shown, None
        if record.exc_info and record.exc_info[0] is not None:
            formatted = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            record.exc_text = hide(formatted, names, secrets)
        return record

    logging.setLogRecordFactory(hiding)
