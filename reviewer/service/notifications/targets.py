"""`--notify URL` to a sender: a webhook for `http(s)://`, Apprise for any other scheme it reads; the
shared secret from `--notify-secret-file`.

A URL is checked before `serve` opens anything, so a typo is one line naming it, not a queue whose
pages go nowhere. Plain `http://` goes only to a loopback address, as the client's rule for the queue
itself: a notification names proposals and carries a signature worth replaying. A target is known in
the outbox by its name, which never holds the URL's path or query (a chat service's secret lives there).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from reviewer.plan.hosts import is_loopback
from reviewer.policy.escalation import MAX_STEPS
from reviewer.service.notifications.sender import WEBHOOK_SCHEMES, NotifyRefused, Sender, target_name
from reviewer.service.store import DEFAULT_KEEP_DELIVERIES, Notifying
from reviewer.service.store.events import EVENT_NAMES

MAX_SECRET_BYTES: Final = 4096
_EVENT: Final = r"(?:proposal|run)\.[a-z_]+(?::[0-9]+)?"
_EVENTS_PREFIX: Final = re.compile(rf"({_EVENT}(?:,{_EVENT})*)=(.+)", re.S)
"""`run.unknown,proposal.reminder=URL`: a target that gets only those events (a pager, say);
`proposal.escalated:2=URL` only the second step of each escalation."""
STEPPED_EVENTS: Final = ("proposal.escalated",)
"""The events a filter may name one step of (`EVENT:STEP`)."""


def check_webhook_url(url: str) -> str:
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise NotifyRefused(f"--notify {url!r}: the port is not a number") from None
    if not parts.hostname:
        raise NotifyRefused(f"--notify {url!r} names no host; give one like https://hooks.example/reviewer")
    if parts.username or parts.password:
        raise NotifyRefused(
            f"--notify {target_name(url)}: a user or password in the URL is not sent; remove it"
        )
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise NotifyRefused(
            f"--notify {target_name(url)} is plain http to another host: use https://, or a loopback address"
        )
    return url


def read_secret(path: Path | None) -> bytes:
    """The shared secret that signs webhooks: the file's bytes without surrounding white space,
    readable by this user only (as the token file)."""
    if path is None:
        raise NotifyRefused(
            "--notify with a webhook needs --notify-secret-file FILE: the secret that signs each delivery"
        )
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as error:
        raise NotifyRefused(f"--notify-secret-file {path}: {error.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise NotifyRefused(f"--notify-secret-file {path} is not a plain file")
        if status.st_mode & 0o077:
            raise NotifyRefused(
                f"--notify-secret-file {path} can be read by other users "
                f"(mode {stat.S_IMODE(status.st_mode):04o}); run `chmod 600 {path}`"
            )
        secret = handle.read(MAX_SECRET_BYTES + 1).strip()
    if not secret or len(secret) > MAX_SECRET_BYTES:
        raise NotifyRefused(f"--notify-secret-file {path} holds no secret (or more than 4 KB)")
    return secret


def notifying(
    chosen: Sequence[Sender],
    *,
    remind_after: float | None = None,
    keep_deliveries: float | None = None,
) -> Notifying:
    """What the store writes for these senders: a row per event for each, and for a sender given
    `EVENTS=URL` only those events; finished deliveries kept `keep_deliveries` seconds (a week)."""
    return Notifying(
        targets=tuple(sender.name for sender in chosen),
        only={sender.name: sender.events for sender in chosen if sender.events is not None},
        remind_after=remind_after,
        keep_deliveries=DEFAULT_KEEP_DELIVERIES if keep_deliveries is None else keep_deliveries,
    )


def describe(sender: Sender) -> str:
    """The start-up line's words for a target: its name and the events it gets."""
    chosen = "every event" if sender.events is None else "only " + ", ".join(sorted(sender.events))
    return f"{sender.name}: {chosen}"


def split_events(value: str) -> tuple[frozenset[str] | None, str]:
    """`EVENT,EVENT=URL` to the events and the URL; a plain URL gets every event."""
    match = _EVENTS_PREFIX.fullmatch(value)
    if match is None:
        return None, value
    chosen = frozenset(match[1].split(","))
    for name in sorted(chosen):
        event, _, step = name.partition(":")
        if event not in EVENT_NAMES:
            raise NotifyRefused(f"--notify: no event {event!r}; the events are {', '.join(EVENT_NAMES)}")
        if step and event not in STEPPED_EVENTS:
            raise NotifyRefused(f"--notify: {name!r}: only {', '.join(STEPPED_EVENTS)} has steps")
        if step and not 1 <= int(step) <= MAX_STEPS:
            raise NotifyRefused(f"--notify: {name!r}: escalation steps are numbered 1 to {MAX_STEPS}")
    return chosen, match[2]


def senders(values: list[str], secret_file: Path | None, *, attempt_timeout: float) -> list[Sender]:
    """One sender per `--notify [EVENTS=]URL`, all checked before any is used."""
    from reviewer.service.notifications.webhook import WebhookSender

    made: list[Sender] = []
    split = [split_events(value) for value in values]
    webhooks = [url for _, url in split if urlsplit(url).scheme.lower() in WEBHOOK_SCHEMES]
    secret = read_secret(secret_file) if webhooks else b""
    for chosen, url in split:
        scheme = urlsplit(url).scheme.lower()
        if scheme in WEBHOOK_SCHEMES:
            made.append(WebhookSender(check_webhook_url(url), secret, timeout=attempt_timeout, events=chosen))
        elif scheme:
            from reviewer.service.notifications.chat import ChatSender

            made.append(ChatSender(url, events=chosen))
        else:
            raise NotifyRefused(
                f"--notify {url!r} is not a URL: give https://... or an Apprise URL (slack://...)"
            )
    names = [sender.name for sender in made]
    if len(set(names)) != len(names):
        raise NotifyRefused("--notify names the same URL twice")
    return made
