"""Chat and paging services through Apprise (the `notify` extra): the same events as a short text.

Apprise is imported only here. Everything an agent wrote is made inert before Apprise sees it, for
every service alike (Slack's mrkdwn, Discord's and Teams' Markdown, Telegram's HTML, email): the
text goes as plain text (which Apprise escapes where a service reads HTML or mrkdwn), and an
invisible word joiner follows each character any of them reads as markup (`@` `#` `<` `>` `[` `]`
`(` `)` `*` `_` `~` `` ` `` `|` `:` `!` `\\`) and each dot inside a word. So `@here` and `<@123>` are
no mention, `<#42>` no channel, `[click](evil.example)`, `evil.example` and `http://x` no link;
a reader sees the same characters (emphasis may still show: it is cosmetic).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final
from urllib.parse import urlsplit

from reviewer.plan.hosts import is_loopback
from reviewer.service.notifications.sender import DeliveryFailed, NotifyRefused, target_name
from reviewer.service.store import Delivery

WORD_JOINER: Final = "\u2060"
PLAIN_HTTP_SCHEMES: Final = frozenset({"json", "xml", "form", "ntfy"})
"""Apprise's URLs that post over plain http to the host they name (each has an `...s://` form)."""


_MARKUP: Final = re.compile(r"[@#<>\[\]()*_~`|:!\\]|\.(?=\w)")
"""What a chat service may read as a mention, a channel, a link or other markup."""


def inert(text: str) -> str:
    """Agent-written text that no chat service turns into a mention, a channel, a link or markup."""
    return _MARKUP.sub(lambda found: found[0] + WORD_JOINER, text)


def chat_text(document: dict[str, Any]) -> tuple[str, str]:
    """The title and body a chat line or page shows for an event document."""
    event = document.get("event")
    title = inert(str(document.get("title") or document.get("proposal_id")))
    opener = f"Open it: {document['open']}"
    if event in ("proposal.waiting", "proposal.reminder", "proposal.escalated"):
        waited = int(document.get("waited_seconds") or 0)
        heading = {
            "proposal.waiting": "Waiting for review",
            "proposal.reminder": f"Still waiting ({waited // 60} min)",
            "proposal.escalated": f"Escalated, step {document.get('step')} of {document.get('of')} "
            f"({waited // 60} min waiting)",
        }[event]
        where = " ".join(
            inert(str(part)) for part in (document.get("api"), document.get("environment")) if part
        )
        lines = [
            f"{inert(str(document.get('agent')))} proposes {document.get('calls')} calls"
            + (f" to {where}" if where else ""),
            f"revision {document['revision']}, plan {str(document.get('plan_sha256'))[:12]}",
        ]
        if document.get("summary"):  # what it does, its money and its alarms, in one line
            lines.insert(1, inert(str(document["summary"])))
    elif event == "proposal.decided":
        verdict = "Approved" if document.get("decision") == "approve" else "Rejected"
        heading = f"{verdict} by {inert(str(document.get('decided_by')))}"
        lines = [f"reason: {inert(str(document['reason']))}"] if document.get("reason") else []
    elif event == "run.ended":
        heading = f"Run {document.get('ended') or 'reported'}"
        lines = [f"{document.get('calls_sent')} calls sent, {document.get('calls_kept')} kept"]
    else:
        heading = "Run outcome unknown"
        lines = [
            f"the claim by {inert(str(document.get('claimed_by')))} ran out of its lease without a report; "
            "it may have written"
        ]
    return f"{heading}: {title}", "\n".join([*lines, opener])


class ChatSender:
    """One Apprise URL (`slack://`, `msteams://`, `pagerduty://`, `ntfy://`, `mailto://`, `json://` ...)."""

    def __init__(self, url: str, *, events: frozenset[str] | None = None) -> None:
        self.events = events
        try:
            import apprise
        except ImportError:
            raise NotifyRefused(
                f"--notify {urlsplit(url).scheme}://... needs Apprise: pip install 'reviewer-gate[notify]'"
            ) from None
        self.name = target_name(url)
        # The operator decides where a notification goes, never a receiver's redirect.
        asset = apprise.AppriseAsset(http_redirects=False)
        plugin = apprise.Apprise.instantiate(url, asset=asset)
        if plugin is None:
            raise NotifyRefused(f"--notify {self.name}: not a URL Apprise reads (see its list of services)")
        host = getattr(plugin, "host", None)
        plain = (
            urlsplit(url).scheme.lower() in PLAIN_HTTP_SCHEMES and getattr(plugin, "secure", True) is False
        )
        if plain and host and not is_loopback(str(host)):
            raise NotifyRefused(
                f"--notify {self.name} is plain http to another host: use the secure form of the URL"
            )
        self._apprise = apprise.Apprise(asset=asset)
        self._apprise.add(plugin)
        self._text_format = apprise.NotifyFormat.TEXT

    def send(self, delivery: Delivery) -> None:
        title, body = chat_text(json.loads(delivery.body))
        if not self._apprise.notify(body=body, title=title, body_format=self._text_format):
            raise DeliveryFailed("Apprise could not deliver it (its log says why)")
