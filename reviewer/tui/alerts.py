"""What the terminal is sent when a proposal starts waiting: the bell, the pending count in the window
title (OSC 2) and, where the terminal has one, a desktop notification (OSC 9 or OSC 777). All three
are plain bytes on the terminal's output, so they travel over SSH.

`PendingWatch` decides when: for each revision that turns pending once, and for the backlog the first
poll finds, one ring in all. Text an agent wrote reaches an escape sequence only with every control
character removed, so a title cannot end the sequence and start one of its own.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping
from typing import Final

from reviewer.queue.terminal_alerts import DesktopProtocol, TerminalAlerts
from reviewer.tui.model.sources import shown

BEL: Final = "\x07"
OSC: Final = "\x1b]"
MAX_NOTIFICATION_CHARS: Final = 120


def desktop_protocol(
    alerts: TerminalAlerts, environ: Mapping[str, str] | None = None
) -> DesktopProtocol | None:
    """The notification protocol of the terminal the app runs in, as far as its environment tells.

    OSC 9: iTerm2 (also as `LC_TERMINAL`, which ssh forwards), WezTerm, Ghostty, Windows Terminal,
    ConEmu. OSC 777: VTE terminals (GNOME Terminal, Tilix), rxvt-unicode, foot. Others get none.
    """
    if alerts.desktop is False:
        return None
    if alerts.desktop is not True:
        return alerts.desktop
    environ = os.environ if environ is None else environ
    program = environ.get("TERM_PROGRAM", "")
    term = environ.get("TERM", "")
    if (
        program in ("iTerm.app", "WezTerm", "ghostty")
        or environ.get("LC_TERMINAL") == "iTerm2"
        or "WT_SESSION" in environ
        or "ConEmuANSI" in environ
    ):
        return "osc9"
    if "VTE_VERSION" in environ or term.startswith("rxvt") or term.startswith("foot"):
        return "osc777"
    return None


def inert(text: str) -> str:
    """Text safe inside an escape sequence: hidden characters shown, controls (ESC, BEL, C1) dropped."""
    visible = shown(text, MAX_NOTIFICATION_CHARS)
    return "".join(
        character for character in visible if not unicodedata.category(character).startswith("C")
    ).replace(";", ",")


SAVE_TITLE: Final = "\x1b[22;2t"
"""xterm's title stack: the window's own title is pushed before the first change, and popped
(`RESTORE_TITLE`) when the app ends, as vim does."""
RESTORE_TITLE: Final = "\x1b[23;2t"


def window_title(pending: int) -> str:
    return f"{OSC}2;reviewer: {pending} pending{BEL}"


def desktop_notification(protocol: DesktopProtocol, heading: str, text: str) -> str:
    if protocol == "osc9":
        return f"{OSC}9;{inert(heading)}: {inert(text)}{BEL}"
    return f"{OSC}777;notify;{inert(heading)};{inert(text)}{BEL}"


class PendingWatch:
    """Which proposals wait now, and which arrivals deserve an alert."""

    def __init__(self) -> None:
        self.pending: dict[str, int] = {}
        self.first_poll_done = False
        self._rang_for_backlog = False

    def observe(self, proposal_id: str, revision: int, state: str) -> bool:
        """Record a proposal's latest state; True when this revision just turned pending and an
        alert is due (only the first of the first poll's backlog)."""
        was = self.pending.get(proposal_id)
        if state != "pending":
            self.pending.pop(proposal_id, None)
            return False
        self.pending[proposal_id] = revision
        if was == revision:
            return False
        if self.first_poll_done:
            return True
        ring, self._rang_for_backlog = not self._rang_for_backlog, True
        return ring


def alert_bytes(
    alerts: TerminalAlerts,
    protocol: DesktopProtocol | None,
    pending: int,
    ring: bool,
    title: str | None,
) -> str:
    """What to write for a change: the bell if `ring`, the title whenever asked, and a desktop
    notification naming `title` (None for the first poll's backlog, which only rings)."""
    written = []
    if ring and alerts.bell:
        written.append(BEL)
    if alerts.title:
        written.append(window_title(pending))
    if ring and protocol is not None and title is not None:
        written.append(desktop_notification(protocol, f"reviewer: {pending} pending", title))
    return "".join(written)
