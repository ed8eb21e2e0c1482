"""`reviewer review ID` opens that proposal, and a newly pending proposal reaches the terminal as bytes:
the bell, the pending count in the window title (OSC 2), and a desktop notification (OSC 9 / 777).

The queue is an `httpx.MockTransport` (fixed answers, proposals added while the app runs); the bytes
are what the app's driver is given to write to the terminal.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from textual.drivers.headless_driver import HeadlessDriver

from reviewer.queue.config import BadConfigFile, Secret, TerminalAlerts, configured_alerts
from reviewer.tui.alerts import PendingWatch, desktop_notification, desktop_protocol
from reviewer.tui.app import ReviewerApp
from reviewer.tui.model.queue_source import QueueSource
from tests.tui.live.fake_queue import FakeQueue
from tests.tui.live.helpers import status, until

SIZE = (100, 30)


def app_on(fake: FakeQueue, **options: Any) -> ReviewerApp:
    source = QueueSource(
        "http://queue.test",
        Secret("alerts-token"),
        transport=fake.transport(),
        clock=lambda: 1000.0,
        poll_interval=60,
        retry_base=30,
        max_backoff=30,
        jitter=0,
    )
    return ReviewerApp(source, **options)


def test_review_with_an_id_opens_that_proposal(snap_compare) -> None:
    """`reviewer review refund-0007`: the app opens straight on refund-0007's review screen, not on the
    list where two newer proposals come first: the chrome reads "refund-0007 │ rev 1/1 │ pending │
    sha256 …", the claim "Refund order 7", and the plan table holds its one call, update_ticket,
    validated, selected in the detail pane."""
    fake = FakeQueue()
    fake.add("refund-0007", title="Refund order 7", calls=1)
    fake.add("deskline-merge-0042", title="Merge t1 and t2, delete t3")
    fake.add("other-0001", title="Another plan")

    async def run_before(pilot: Any) -> None:
        app = pilot.app
        await until(pilot, lambda: "refund-0007" in app.items, "the proposal")
        await until(
            pilot, lambda: getattr(app.screen, "item", None) is app.items["refund-0007"], "its review"
        )
        await until(pilot, lambda: 1 in app.items["refund-0007"].verified, "the plan checked")
        await pilot.pause()

    assert snap_compare(app_on(fake, open_first="refund-0007"), terminal_size=SIZE, run_before=run_before)


class Terminal(list[str]):
    """What the app writes to its terminal (the headless driver writes nowhere), without Textual's
    own pointer-shape sequence (OSC 22), so what is left is the alerts'."""

    def text(self) -> str:
        return re.sub("\x1b\\]22;[^\x07]*\x07", "", "".join(self))


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Terminal:
    written = Terminal()
    monkeypatch.setattr(HeadlessDriver, "write", lambda self, data: written.append(data))
    return written


def run_app(app: ReviewerApp, scenario: Any) -> None:
    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "answered" in status(app), "the first poll")
            await scenario(pilot)

    asyncio.run(main())


def test_a_new_pending_proposal_rings_retitles_and_notifies_with_its_title_made_inert(
    terminal: Terminal,
) -> None:
    fake = FakeQueue()
    app = app_on(fake, alerts=TerminalAlerts(desktop="osc9"))

    async def scenario(pilot: Any) -> None:
        assert terminal.text() == ""  # an empty queue: nothing to tell
        fake.add("deskline-merge-0042", title="Merge \x1b]2;pwned\x07 tickets")
        app.poll_now()
        await until(pilot, lambda: "\x07" in terminal.text(), "the bell")
        await until(pilot, lambda: "]9;" in terminal.text(), "the desktop notification")

    run_app(app, scenario)
    written = terminal.text()
    assert written.startswith("\x1b[22;2t\x07\x1b]2;reviewer: 1 pending\x07\x1b]9;")
    assert written.endswith("\x1b[23;2t"), "the window's own title is restored at the end"
    assert "\x1b]2;reviewer: 1 pending\x07" in written
    notification = written[written.index("\x1b]9;") :]
    notification = notification[: notification.index("\x07") + 1]
    assert notification.startswith("\x1b]9;reviewer: 1 pending: Merge ")
    assert "pwned" in notification and notification.count("\x1b") == 1 and notification.count("\x07") == 1
    assert "\x1b]2;pwned" not in written


def test_the_first_polls_backlog_rings_once(terminal: Terminal) -> None:
    fake = FakeQueue()
    for number in range(5):
        fake.add(f"backlog-{number}")
    app = app_on(fake, alerts=TerminalAlerts(desktop="osc777"))

    async def scenario(pilot: Any) -> None:
        await until(pilot, lambda: "reviewer: 5 pending" in terminal.text(), "the title")

    run_app(app, scenario)
    written = terminal.text()
    bells = written.count("\x07") - written.count("\x1b]2;")
    assert bells == 1 and "]777;" not in written


def test_each_alert_can_be_turned_off(terminal: Terminal) -> None:
    fake = FakeQueue()
    app = app_on(fake, alerts=TerminalAlerts(bell=False, title=False, desktop=False))

    async def scenario(pilot: Any) -> None:
        fake.add("quiet-0001")
        app.poll_now()
        # The watch sees the proposal in the same call that would write the alerts: once it holds
        # the proposal, whatever the app was going to write for it is written.
        await until(pilot, lambda: "quiet-0001" in app.pending_watch.pending, "the alerts' turn")

    run_app(app, scenario)
    assert terminal.text() == ""


def test_the_watch_alerts_once_per_revision_and_counts_what_waits() -> None:
    watch = PendingWatch()
    assert watch.observe("a", 1, "pending") and not watch.observe("b", 1, "pending")  # first poll: one
    watch.first_poll_done = True
    assert not watch.observe("a", 1, "pending")
    assert watch.observe("a", 2, "pending"), "a new revision waits again"
    assert not watch.observe("b", 1, "approved") and len(watch.pending) == 1


def test_the_desktop_protocol_comes_from_the_terminal_or_the_config() -> None:
    on = TerminalAlerts()
    assert desktop_protocol(on, {"TERM_PROGRAM": "iTerm.app"}) == "osc9"
    assert desktop_protocol(on, {"LC_TERMINAL": "iTerm2"}) == "osc9"
    assert desktop_protocol(on, {"VTE_VERSION": "7600"}) == "osc777"
    assert desktop_protocol(on, {"TERM": "xterm-256color"}) is None
    assert desktop_protocol(TerminalAlerts(desktop="osc777"), {}) == "osc777"
    assert desktop_protocol(TerminalAlerts(desktop=False), {"TERM_PROGRAM": "iTerm.app"}) is None
    assert desktop_notification("osc777", "h;x", "t") == "\x1b]777;notify;h,x;t\x07"


def test_alerts_are_read_from_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert configured_alerts(path) == TerminalAlerts()
    path.write_text('queue = "http://127.0.0.1:8470"\n[alerts]\nbell = false\ndesktop = "osc9"\n')
    assert configured_alerts(path) == TerminalAlerts(bell=False, title=True, desktop="osc9")
    path.write_text("[alerts]\nbel = false\n")
    with pytest.raises(BadConfigFile, match="no setting 'bel'"):
        configured_alerts(path)
    path.write_text('[alerts]\ndesktop = "loud"\n')
    with pytest.raises(BadConfigFile, match="desktop must be"):
        configured_alerts(path)
