"""Snapshots at a phone's SSH sizes, 50x20 (portrait) and 60x30 (landscape), of a live queue holding
the Kubernetes sample: the queue, its review, and both decision dialogs with a quorum and a key."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tui.helpers import SAMPLES
from tests.tui.live.fake_queue import FakeQueue
from tests.tui.live.test_snapshots import FixedKeySigner, live_app, loaded, opened

PHONE_SIZES = [pytest.param((50, 20), id="50x20"), pytest.param((60, 30), id="60x30")]
KUBERNETES = "k8s-shop-scale-down-1019"


def phone_app(**options: Any):  # type: ignore[no-untyped-def]
    """The Kubernetes sample waiting with bob's approval of 2 needed, newest of three; a fixed key."""
    fake = FakeQueue()
    fake.add("deskline-merge-0042", title="Merge t1 and t2, delete t3")
    fake.add("refund-0007", title="Refund order 7", calls=1)
    fake.add(
        KUBERNETES,
        plan=(SAMPLES / "k8s-shop-scale-down.server.json").read_bytes(),
        proposed_by="infra-agent",
        approvals=["bob"],
        approvals_required=2,
    )
    return live_app(fake.transport(), signer=FixedKeySigner(), **options)


def reviewed(*keys: str):  # type: ignore[no-untyped-def]
    """Open the Kubernetes sample once its figures are in, then press `keys`."""
    return opened(3, KUBERNETES, *keys)


@pytest.mark.parametrize("size", PHONE_SIZES)
def test_queue_at_phone_size(snap_compare, size: tuple[int, int]) -> None:
    """The live queue in a phone's SSH app: three rows with their marks (• new) and danger (a red
    "!!! delete" on the Kubernetes plan), the title cut, env whole; at 60 columns the state too, at
    50 the state and the c/u/d counts give way: the line under the table leads with the worst alarm
    whole, then says "9 calls, 0 create, 6 update, 3 delete" and "queue: pending"; the chrome keeps
    who is signed in; the footer's keys, `?` in sight."""
    assert snap_compare(phone_app(), terminal_size=size, run_before=loaded(3))


@pytest.mark.parametrize("size", PHONE_SIZES)
def test_kubernetes_review_at_phone_size(snap_compare, size: tuple[int, int]) -> None:
    """The Kubernetes sample: the chrome keeps "k8s-shop-scale-down-1019 │ rev 1/1 │ pending" (the
    digest shortened after it); the claim reads "runs on production · https://k8s-prod-eu1…"; the
    alarms on one line ending "(e: all)" at 50x20, in full at 60x30; at least three plan rows, each
    its method and the end of its path ("PATCH …/checkout/scale", "DELETE …"); one pane under the plan
    at 50 columns (p shows the next); `?` first in the footer."""
    assert snap_compare(phone_app(), terminal_size=size, run_before=reviewed())


@pytest.mark.parametrize("size", PHONE_SIZES)
def test_approve_dialog_at_phone_size(snap_compare, size: tuple[int, int]) -> None:
    """`a`: the dialog fills the screen and its body scrolls (pgdn) while "y  yes, send it  n  no"
    stays on its last line; at 60x30 the whole body fits: digest in full, "runs on production ·",
    "1 of 2 approvals (bob) so far; yours makes 2" and "signed with ssh-ed25519 SHA256:…"."""
    assert snap_compare(phone_app(), terminal_size=size, run_before=reviewed("a"))


@pytest.mark.parametrize("size", PHONE_SIZES)
def test_approve_dialog_scrolled_at_phone_size(snap_compare, size: tuple[int, int]) -> None:
    """`a` then `pagedown`: the body's end is in sight, the approvals count and the signature line
    above the keys, which have not moved."""
    assert snap_compare(phone_app(), terminal_size=size, run_before=reviewed("a", "pagedown", "pagedown"))


@pytest.mark.parametrize("size", PHONE_SIZES)
def test_reject_dialog_at_phone_size(snap_compare, size: tuple[int, int]) -> None:
    """`x`: the reason field (focused) and "enter  send the rejection  escape  back" at the dialog's
    foot; the body above them scrolls."""
    assert snap_compare(phone_app(), terminal_size=size, run_before=reviewed("x"))


def test_kubernetes_review_at_50x20_in_16_colours(snap_compare) -> None:
    """In a 16-colour terminal: the folded alarm line still reads "(e: all)", the cursor row marked ▶,
    "validated" bright green on black, the environment bright yellow before the base URL."""
    app = phone_app(color_system="standard")
    assert snap_compare(app, terminal_size=(50, 20), run_before=reviewed())


def test_approve_dialog_at_50x20_without_colour(snap_compare, monkeypatch: pytest.MonkeyPatch) -> None:
    """NO_COLOR: the dialog's alarms reversed, and "y  yes, send it      n  no" on its last line."""
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(phone_app(), terminal_size=(50, 20), run_before=reviewed("a", "pagedown"))


@pytest.mark.parametrize("size", PHONE_SIZES)
def test_request_changes_dialog_at_phone_size(snap_compare, size: tuple[int, int]) -> None:
    """`c`: the same dialog as `x`, titled "Request changes": the field "what to change (required)"
    (focused) and "enter  ask for these changes  escape  back" at its foot, the body above scrolling."""
    assert snap_compare(phone_app(), terminal_size=size, run_before=reviewed("c"))
