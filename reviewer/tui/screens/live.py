"""The queue and review screens fed by the live queue: its own state, proposer and trail in the chrome."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.widgets import Static

from reviewer.sanitize import clip, safe_text
from reviewer.sources import QueueItem
from reviewer.tui.live_source import LiveItem, local_refusal, shown
from reviewer.tui.screens.queue import QueueScreen, describe, queue_row
from reviewer.tui.screens.review import ReviewScreen
from reviewer.tui.widgets.cells import cell
from reviewer.tui.widgets.chrome import Chrome

LIVE_COLUMNS = (
    (" ", "mark", 3),
    ("proposal", "title", 25),
    ("proposed by", "proposer", 13),
    ("rev", "rev", 6),
    ("calls", "calls", 6),
    ("c/u/d", "effects", 9),
    ("dry run", "via", 9),
    ("state", "state", 9),
)
"""The demo's columns, with the queue's record of who proposed it instead of the agent's own name."""

STATE_STYLES = {
    "pending": "bold",
    "approved": "ok",
    "claimed": "bold",
    "unknown": "danger",
    "rejected": "danger",
    "expired": "muted",
    "executed": "info",
}
"""By `LiveItem.state_label`; `unknown` (a run that may have written and never reported) is the loudest."""


def replan_notice(revision: int) -> str:
    return f"the agent re-planned: revision {revision} is waiting"


class LiveQueueScreen(QueueScreen):
    """The queue as the service lists it: new proposals marked until opened, yours marked "you"."""

    COLUMNS: ClassVar[tuple[tuple[str, str, int], ...]] = LIVE_COLUMNS

    def __init__(self) -> None:
        super().__init__("live")
        self.who = "live"
        """Who is signed in, once the queue said so; the chrome's first part."""

    def on_screen_resume(self) -> None:
        """Back from a review: the proposals opened meanwhile lose their "new" mark."""
        for item in list(self.items.values()):
            self.show_item(item)

    def refresh_chrome(self) -> None:
        items = [item for item in self.items.values() if isinstance(item, LiveItem)]
        pending = sum(item.state == "pending" for item in items)
        new = sum(item.is_new for item in items)
        count = len(self.items)
        self.query_one(Chrome).show(
            self.who,
            f"{count} proposal{'s' if count != 1 else ''}",
            f"{pending} pending",
            (f"{new} new", "bold") if new else f"{new} new",
        )

    def row_cells(self, item: QueueItem) -> tuple[Text, ...]:
        base = queue_row(item)
        if not isinstance(item, LiveItem):
            return base
        mark = Text("•" if item.is_new else " ", "bold")
        mark.append_text(base[0])
        if item.local_digests and "!" not in base[0].plain:
            mark.append("!", "danger")
        proposer = Text("you", "bold reverse") if item.mine else cell(item.proposed_by, 13)
        state = Text(item.state_label, STATE_STYLES.get(item.state_label, ""))
        return (mark, base[1], proposer, *base[3:7], state)

    def describe_item(self, item: QueueItem) -> Text:
        text = describe(item)
        if not isinstance(item, LiveItem):
            return text
        if item.local_digests:
            text.append("! the fetched plan does not hash to the queue's digest: do not approve\n", "danger")
        text.append("queue: ", "muted")
        text.append(item.state_words(), STATE_STYLES.get(item.state_label, ""))
        text.append(f" · proposed by {shown(item.proposed_by)}")
        if item.mine:
            text.append(" (you: another reviewer must approve)", "bold")
        if item.reason:
            text.append(f" · reason: {safe_text(clip(item.reason, 80))}")
        signatures = item.signature_words()
        if signatures:
            text.append("\nsigned: ", "muted")
            for index, (words, verified) in enumerate(signatures):
                text.append(" · " if index else "")
                text.append(words, "ok" if verified else "danger")
        trail = ", ".join(
            f"{event.event} r{event.revision} ({shown(event.actor, 20)})" for event in item.history[-4:]
        )
        if trail:
            text.append(f"\ntrail: {trail}", "muted")
        return text


class LiveReviewScreen(ReviewScreen):
    """The review screen with the queue's record in the chrome, and approvals the app refuses locally."""

    def __init__(self, item: QueueItem, *, who: str, notice: str | None = None) -> None:
        super().__init__(item, mode="live")
        self.who = who
        self.notice = notice

    def on_mount(self) -> None:
        # ReviewScreen.on_mount runs after this one (Textual walks the MRO): refresh after both.
        self.call_after_refresh(self.refresh_live)

    def refresh_live(self) -> None:
        """The chrome from the queue's record; alarms the fetched plan raised against that record."""
        if not self.query(Chrome):
            return  # pushed but not composed yet, or already being dismissed: on_mount refreshes it
        item = self.item
        parts = self.chrome_parts()
        if isinstance(item, LiveItem):
            parts.append((item.state_words(), STATE_STYLES.get(item.state_label, "")))
            parts.append(("by you", "bold reverse") if item.mine else f"by {item.proposed_by}")
            self._show_digest_alarm(item)
        self.query_one(Chrome).show(self.who, *parts)
        if self.notice:
            self.show_decision(self.notice, error=True)
            self.notice = None
        elif self.revision < item.latest_revision:
            self.show_decision(
                f"{replan_notice(item.latest_revision)} (escape, then enter opens it)", error=True
            )

    def _show_digest_alarm(self, item: LiveItem) -> None:
        local = item.local_digests.get(self.revision)
        if local is None:
            return
        banner = self.query_one("#alarms", Static)
        text = Text(
            f"DIGEST MISMATCH: the queue says {item.digests.get(self.revision, '')[:12]}…, "
            f"the plan fetched hashes to {local[:12]}…: do not approve",
            "bold",
        )
        if self.analysis.alarms:
            text.append("  ·  " + "  ·  ".join(self.analysis.alarms))
        banner.update(text)
        banner.display = True

    def action_approve(self) -> None:
        refused = local_refusal(self.item, self.revision, "approve")
        if refused:
            self.show_decision(refused, error=True)
            self.notify(refused, title="Not approved", severity="warning")
            return
        super().action_approve()
