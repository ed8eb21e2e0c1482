"""Triage in a phone's SSH app (50x20) and on a wide terminal (200x50): the chrome keeps the revision
and the state whatever the id's length, a plan row keeps its method and the end of its path, and a
revision the agent superseded after a request for changes never reads as pending."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reviewer.tui.screens.review import ReviewScreen
from tests.queue_harness import body
from tests.tui.helpers import SAMPLES
from tests.tui.live.fake_queue import FakeQueue
from tests.tui.live.helpers import shown_text, until
from tests.tui.live.test_snapshots import live_app, opened

SIZES = [pytest.param((50, 20), id="50x20"), pytest.param((200, 50), id="200x50")]
LONG_ID = "scale-shop-for-the-weekend-and-remove-the-pr-1182-preview-4f741731"
"""An id as agents wrote them before ids were short: 66 characters, the title's words."""


def kubernetes_under_a_long_id() -> FakeQueue:
    plan = json.loads((SAMPLES / "k8s-shop-scale-down.server.json").read_bytes())
    fake = FakeQueue()
    fake.add(LONG_ID, plan=body({**plan, "proposal_id": LONG_ID}), proposed_by="infra-agent")
    return fake


@pytest.mark.parametrize("size", SIZES)
def test_header_and_rows(snap_compare, size: tuple[int, int]) -> None:
    """The Kubernetes sample under a 66-character id. At 50x20 the chrome reads "scale-shop-for-the-…
    │ rev 1/1 │ pending" (the id's start, which `reviewer show` takes), and each plan row keeps its
    method and the end of its path: "PATCH …/checkout/scale", "PATCH …ents/cart/scale", six rows
    told apart where the old rows read "scale_depl… update" six times. At 200x50 the whole id, the
    tool column, each path whole ("PATCH /apis/apps/v1/namespaces/shop/deployments/checkout/scale")
    and the arguments beside it ("namespace=shop, name=checkout, replicas=4")."""
    assert snap_compare(
        live_app(kubernetes_under_a_long_id().transport()), terminal_size=size, run_before=opened(1, LONG_ID)
    )


def changes_then_replan() -> tuple[FakeQueue, str]:
    """The merge sample waiting; the agent answers a request for changes with revision 2 at once."""
    first = json.loads((SAMPLES / "deskline-merge.server.json").read_bytes())
    second = {
        **first,
        "revision": 2,
        "calls": [call for call in first["calls"] if call["tool"] != "delete_ticket"],
    }
    fake = FakeQueue()
    fake.add(first["proposal_id"], plan=body(first))
    fake.replan_after_decision[first["proposal_id"]] = body(second)
    return fake, first["proposal_id"]


def asked_for_changes_then_approve(proposal_id: str):  # type: ignore[no-untyped-def]
    """Open revision 1, `c` with a reason, wait for revision 2 to arrive, then press `a` on the open
    revision 1."""

    async def run_before(pilot: Any) -> None:
        app = pilot.app
        await opened(1, proposal_id)(pilot)
        await pilot.press("c")
        await pilot.pause()
        await pilot.press(*"keep t3", "enter")
        item = app.items[proposal_id]
        await until(pilot, lambda: item.latest_revision == 2, "revision 2")
        await until(pilot, lambda: "superseded" in shown_text(app, "#chrome"), "the chrome")
        app.clear_notifications()  # the decision's toast: the picture shows what `a` does
        await pilot.press("a")
        await pilot.pause()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES)
def test_a_superseded_revision_is_never_pending(snap_compare, size: tuple[int, int]) -> None:
    """After `c` on revision 1 and the agent's revision 2, the screen still open on revision 1 reads
    "rev 1/2 │ superseded by rev 2, changes requested" in the chrome (grey, never "pending"; at 50
    columns "superseded by…" at least), and `a` sends nothing: the banner under the panes and a toast
    say "revision 1 is superseded by revision 2: nothing is sent (escape, then enter opens the
    latest)"; no confirmation opens."""
    fake, proposal_id = changes_then_replan()
    assert snap_compare(
        live_app(fake.transport()), terminal_size=size, run_before=asked_for_changes_then_approve(proposal_id)
    )


def test_a_superseded_revision_offers_no_approval() -> None:
    """The same, read from the model: the chrome's state, and no decision request reaches the queue."""
    import asyncio

    fake, proposal_id = changes_then_replan()

    async def scenario() -> None:
        app = live_app(fake.transport())
        async with app.run_test(size=(50, 20)) as pilot:
            await asked_for_changes_then_approve(proposal_id)(pilot)
            screen = app.screen
            assert isinstance(screen, ReviewScreen) and screen.revision == 1
            chrome = shown_text(app, "#chrome")
            assert "superseded by rev 2, changes requested" in chrome and "pending" not in chrome
            assert "superseded by revision 2: nothing is sent" in shown_text(app, "#decision")
            assert fake.proposals[proposal_id].state == "pending"  # revision 2 waits, undecided

    asyncio.run(scenario())
