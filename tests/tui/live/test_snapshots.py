"""Snapshots of the live screens: a queue served by httpx.MockTransport from fixed answers, a fixed clock."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import httpx
import pytest

from reviewer.queue.config import Secret
from reviewer.queue.messages import TrailEvent
from reviewer.signing.sshsig import PublicKey, Signer
from reviewer.tui.app import ReviewerApp
from reviewer.tui.model.queue_source import QueueSource
from reviewer.tui.widgets.plan_view import PlanView
from tests.queue_harness import body
from tests.tui.helpers import SAMPLES
from tests.tui.live.fake_queue import AT, FakeQueue, replanned
from tests.tui.live.helpers import decide_from_keyboard, open_proposal, shown_text, status, until

SIZE = (100, 30)


SIGNING_KEY = PublicKey.from_openssh(
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKOo3CXFww9m2YH8gmFdMmr4oUoQCk01thLGf9Skcp61 alice@laptop"
)


class FixedKeySigner:
    """Stands for the reviewer's key file in a picture: a fixed key, so the fingerprint never varies
    (the real signing is tested against ssh-keygen in tests/signing)."""

    public_key = SIGNING_KEY

    def sign_blob(self, data: bytes) -> bytes:
        raise AssertionError("a snapshot signs nothing")


def live_app(
    transport: httpx.AsyncBaseTransport, signer: Signer | None = None, **options: Any
) -> ReviewerApp:
    """Fixed clocks (status figures and ages never move), long poll and retry delays (nothing changes
    mid-picture); `options` go to the app (a colour system)."""
    return ReviewerApp(
        QueueSource(
            "http://queue.test",
            Secret("snapshot-token"),
            transport=transport,
            clock=lambda: 1000.0,
            now=lambda: AT + timedelta(minutes=12),
            poll_interval=60,
            retry_base=30,
            max_backoff=30,
            jitter=0,
            signer=signer,
        ),
        **options,
    )


def loaded(count: int, *keys_after: str, open_id: str | None = None):  # type: ignore[no-untyped-def]
    async def run_before(pilot: Any) -> None:
        app = pilot.app
        await until(pilot, lambda: len(app.queue_screen.items) >= count and "answered" in status(app), "rows")
        if open_id:
            await open_proposal(pilot, app, open_id)
            await decide_from_keyboard(pilot, *keys_after)
            await until(pilot, lambda: bool(app.screen.query_one("#decision").display), "the answer")
        await pilot.pause()

    return run_before


def opened(count: int, proposal_id: str, *keys: str):  # type: ignore[no-untyped-def]
    """Once `count` rows are in, open `proposal_id`, wait for its figures, then press `keys`."""

    async def run_before(pilot: Any) -> None:
        await loaded(count)(pilot)
        await open_proposal(pilot, pilot.app, proposal_id)
        screen = pilot.app.screen
        await until(pilot, lambda: "computing" not in str(screen.query_one("#ratios").render()), "panes")
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        await pilot.pause()

    return run_before


def test_connected(snap_compare) -> None:
    """The live queue, served by MockTransport from fixed answers: three rows, newest first; ▶ on the
    cursor's row, underlined; "•" marks the two pending proposals nobody opened; the danger column
    grades each by its worst alarm; the one alice
    proposed shows "you" (reversed) as proposer; env "staging" on each; the pending ones waited
    "12m" (fixed clock); the refund shows state "approved" in green. The detail under the table
    gives the queue's state, proposer and trail. The chrome reads "alice (reviewer) │ 3 proposals │
    2 pending │ 2 new"; the status line "signed in as alice (reviewer) · queue answered 0 s ago"
    (fixed clock)."""
    fake = FakeQueue()
    fake.add("deskline-merge-0042", title="Merge t1 and t2, delete t3")
    fake.add("refund-0007", title="Refund order 7", calls=1, state="approved", decided_by="bob")
    fake.add("alice-own-0001", title="A plan alice submitted", proposed_by="alice")
    assert snap_compare(live_app(fake.transport()), terminal_size=SIZE, run_before=loaded(3))


def test_unreachable(snap_compare) -> None:
    """A queue that refuses every connection (MockTransport raising ConnectError): an empty list (its
    header from danger to age), the
    chrome says "live" (nobody signed in yet), the status line says "queue unreachable, retrying in 30 s"
    in yellow with the queue's URL, the first backoff step under a fixed clock."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async def run_before(pilot: Any) -> None:
        await until(pilot, lambda: "unreachable" in status(pilot.app), "the status")
        await pilot.pause()

    app = live_app(httpx.MockTransport(refuse))
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_decided(snap_compare) -> None:
    """After `enter`, `a`, `y` on a pending proposal (MockTransport, fixed answers): the review screen's
    banner says "approved by alice: revision 1"; the chrome reads
    "alice │ deskline-merge-0042 │ rev 1 of 1 │ sha256 b53ab57e4507… │ approved by alice" (green; the
    proposer follows, cut at 100 columns); a "Decision" toast repeats the answer."""
    fake = FakeQueue()
    fake.add("deskline-merge-0042", title="Merge t1 and t2, delete t3")
    app = live_app(fake.transport())
    assert snap_compare(
        app, terminal_size=SIZE, run_before=loaded(1, "a", "y", open_id="deskline-merge-0042")
    )


def test_stale(snap_compare) -> None:
    """The agent re-planned between open and approve (MockTransport answers 412, then serves revision 2):
    the app has opened revision 2 in place of 1: the chrome reads "rev 2/2", the new digest and
    "pending", the plan has 4 rows, the red banner says "the agent re-planned: revision 2 is waiting",
    and a notification says what drifted from revision 1 ("1 added, 3 changed")."""
    fake = FakeQueue()
    fake.add("deskline-merge-0042", title="Merge t1 and t2, delete t3")
    fake.replan_on_decision["deskline-merge-0042"] = replanned("deskline-merge-0042")
    app = live_app(fake.transport())

    async def run_before(pilot: Any) -> None:
        await loaded(1, "a", "y", open_id="deskline-merge-0042")(pilot)
        await until(pilot, lambda: getattr(pilot.app.screen, "revision", 0) == 2, "revision 2 opened")
        screen = pilot.app.screen
        await until(pilot, lambda: "re-planned" in str(screen.query_one("#decision").render()), "the banner")
        await until(pilot, lambda: "computing" not in str(screen.query_one("#ratios").render()), "the panes")
        await until(pilot, lambda: screen.drift_announced, "the drift notice")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_approve_dialog_with_a_quorum_and_a_signing_key(snap_compare) -> None:
    """`a` on a proposal whose policy needs 2 approvals and has bob's: the dialog says "1 of 2
    approvals (bob) so far; yours makes 2", that this is the queue's count and an executor checking
    signatures may need more, and "signed with ssh-ed25519 SHA256:… from its key file"; y / n."""
    fake = FakeQueue()
    fake.add("k8s-prune-0007", title="Prune preview namespaces", approvals=["bob"], approvals_required=2)
    app = live_app(fake.transport(), signer=FixedKeySigner())

    async def run_before(pilot: Any) -> None:
        await loaded(1)(pilot)
        await open_proposal(pilot, pilot.app, "k8s-prune-0007")
        await until(
            pilot, lambda: "computing" not in str(pilot.app.screen.query_one("#ratios").render()), "panes"
        )
        await pilot.press("a")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_r_polls_at_once_while_the_queue_is_down() -> None:
    """With a 30 s back-off, r sends the next poll now instead of waiting it out."""
    requests: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        requests.append(request.url.path)
        raise httpx.ConnectError("connection refused", request=request)

    async def scenario() -> None:
        app = live_app(httpx.MockTransport(refuse))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "unreachable" in status(pilot.app), "the status")
            assert "(r: now)" in status(app)
            sent = len(requests)
            await pilot.press("r")
            await until(pilot, lambda: len(requests) > sent, "the poll r asked for")

    asyncio.run(scenario())


LONG_REQUEST = (
    "keep t3 open: the customer replied on it this morning, and the two others are the same "
    "printer, so merge only t1 and t2 and leave a note on t3 instead"
)


def changes_asked_then_replanned(reason: str = "keep t3 open") -> FakeQueue:
    """The merge sample as revision 1, alice's request (`reason`) on it in the trail, and the
    agent's revision 2: the same plan without the delete of t3."""
    first = json.loads((SAMPLES / "deskline-merge.server.json").read_bytes())
    second = {
        **first,
        "revision": 2,
        "calls": [call for call in first["calls"] if call["tool"] != "delete_ticket"],
    }
    second["dry_run"] = {**first["dry_run"], "write_requests": len(second["calls"])}
    fake = FakeQueue()
    fake.add(first["proposal_id"], plan=body(first))
    entry = fake.proposals[first["proposal_id"]]
    entry.history.append(
        TrailEvent(
            seq=10,
            at=AT,
            actor="alice",
            event="changes_requested",
            revision=1,
            plan_sha256=entry.digest(1),
            reason=reason,
        )
    )
    entry.plans.append(body(second))
    return fake


def drift_of_revision_2(proposal_id: str, *keys: str):  # type: ignore[no-untyped-def]
    """Open `proposal_id`, press d, wait for the drift, then press `keys`."""

    async def run_before(pilot: Any) -> None:
        await loaded(1)(pilot)
        await open_proposal(pilot, pilot.app, proposal_id)
        await pilot.press("d")
        await until(pilot, lambda: "removed" in shown_text(pilot.app, "#drift-summary"), "the drift")
        for key in keys:
            await pilot.press(key)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", [(100, 30), (80, 24)], ids=["100x30", "80x24"])
def test_drift_answering_changes_requested(snap_compare, size) -> None:
    """d on revision 2 of the merge, which answers alice's request on revision 1: the summary says "1
    removed" and under it "rev 1: changes requested by alice: keep t3 open"; the plan's rows are
    revision 2's three calls, with revision 1's delete_ticket t3 put back in red where it stood,
    marked removed."""
    fake = changes_asked_then_replanned()
    run_before = drift_of_revision_2(next(iter(fake.proposals)))
    assert snap_compare(live_app(fake.transport()), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("keys", [(), ("r",)], ids=["folded", "unfolded"])
def test_drift_answering_a_long_request_at_phone_size(snap_compare, keys) -> None:
    """The same drift at 50x20 with a request of three lines. Folded: "rev 1: changes requested by
    alice: keep t3 open: the cu…" on one line with an ellipsis, then the plan with its four rows, the
    removed `- 4 DELETE /v1/tickets/t3` in red among them, the selected call's pane under it,
    "r Whole request" in the footer before b and t. Unfolded (r): the whole request, its wrapped lines
    starting under "changes", not under "rev"."""
    fake = changes_asked_then_replanned(LONG_REQUEST)
    run_before = drift_of_revision_2(next(iter(fake.proposals)), *keys)
    assert snap_compare(live_app(fake.transport()), terminal_size=(50, 20), run_before=run_before)


def test_a_long_request_leaves_the_removed_row_in_sight_at_phone_size() -> None:
    """At 50x20 the folded request takes one line: every row of the drift, the removed one too, is
    inside the plan's visible lines, and `r` is offered (at 80x24 it is not: nothing is folded)."""
    fake = changes_asked_then_replanned(LONG_REQUEST)

    async def scenario() -> None:
        app = live_app(fake.transport())
        async with app.run_test(size=(50, 20)) as pilot:
            await drift_of_revision_2(next(iter(fake.proposals)))(pilot)
            plan = app.screen.query_one(PlanView)
            assert plan.rows.mark(len(plan.rows) - 1) == "removed"
            assert plan.visible_rows >= len(plan.rows) == 4
            assert "r" in app.screen.active_bindings
            await pilot.resize_terminal(80, 24)
            await pilot.pause()
            assert "r" not in app.screen.active_bindings

    asyncio.run(scenario())
