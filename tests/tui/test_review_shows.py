"""What the screens must show and never cut: counts, the `!` of a delete, the outlier's own row, where
the plan runs, and a failed worker in words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from reviewer.tui.app import ReviewerApp
from reviewer.tui.screens.dialogs import ConfirmScreen
from reviewer.tui.screens.queue import compact
from reviewer.tui.widgets.plan_view import PlanView
from tests.builders import proposal_document
from tests.tui.helpers import open_review, wait_until_loaded

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("count", "shown"),
    [(0, "0"), (999, "999"), (1_000, "1k"), (1_234, "1.2k"), (100_000, "100k"), (99_999, "100k"),
     (999_999, "1M"), (1_500_000, "1.5M")],
)  # fmt: skip
def test_a_count_is_compacted_never_cut(count: int, shown: str) -> None:
    assert compact(count) == shown


def bulk_plan(folder: Path, creates: int, updates: int, deletes: int, unknown: int = 0) -> None:
    """A server plan of that many creates, updates, deletes and calls of unknown effect, all validated."""
    effects = ["create"] * creates + ["update"] * updates + ["delete"] * deletes + ["other"] * unknown
    calls = [
        {"seq": seq, "tool": f"{effect}_ticket", "effect": effect, "args": {"id": f"t{seq}"},
         "outcome": {"status": "ok", "http_status": 200}}
        for seq, effect in enumerate(effects, start=1)
    ]  # fmt: skip
    target = {"api": "deskline", "base_url": "https://deskline.example", "environment": "prod"}
    proven = {
        "via": "server",
        "write_requests": len(calls),
        "writes_kept": 0,
    }  # its audit log showed none kept
    document = proposal_document(calls, proposal_id="bulk", title="bulk", target=target, dry_run=proven)
    (folder / "bulk.json").write_text(json.dumps(document))


def queue_cells(app: ReviewerApp) -> list[str]:
    table = app.screen.query_one("#queue", DataTable)
    return [str(cell) for cell in table.get_row_at(0)]


async def test_a_thousand_of_each_effect_fit_whole_and_a_delete_gets_its_mark(tmp_path: Path) -> None:
    bulk_plan(tmp_path, 1_000, 1_000, 1_000)
    app = ReviewerApp(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        _mark, danger, *_, calls, effects, _via, _state = queue_cells(app)
        assert (calls, effects) == ("3k", "1k/1k/1k")
        assert danger == "!!! delete", "a plan that deletes 1,000 records in production is graded so"
        detail = str(app.screen.query_one("#queue-detail", Static).render())
        assert "3,000 calls, 1,000 create, 1,000 update, 1,000 delete" in detail


async def test_calls_whose_effect_nobody_knows_are_counted_as_such_never_as_creates(tmp_path: Path) -> None:
    """An MCP tool that says nothing of itself is recorded as `other`: the summary names it."""
    bulk_plan(tmp_path, 1, 0, 0, unknown=8)
    app = ReviewerApp(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        detail = str(app.screen.query_one("#queue-detail", Static).render())
        assert "9 calls, 1 create, 0 update, 0 delete, 8 effect unknown" in detail


async def test_a_plan_without_deletes_or_alarms_has_no_mark(tmp_path: Path) -> None:
    bulk_plan(tmp_path, 3, 2, 0)
    app = ReviewerApp(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        assert queue_cells(app)[:2] == ["▶", ""]


async def test_one_delete_in_two_thousand_is_not_zero_percent(tmp_path: Path) -> None:
    bulk_plan(tmp_path, 1_999, 0, 1)
    app = ReviewerApp(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        ratios = str(app.screen.query_one("#ratios", Static).render())
        assert "<1%" in ratios and " 0%" not in ratios


async def test_the_outliers_own_row_is_flagged(sample_folder) -> None:
    app = ReviewerApp(sample_folder("billing-refunds.outlier.json"))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        view = app.screen.query_one(PlanView)
        analysis = app.screen.analysis  # type: ignore[attr-defined]
        (outlier_seq,) = analysis.extremes.outlier_seqs
        index = next(i for i, call in enumerate(analysis.proposal.calls) if call.seq == outlier_seq)
        view.move_cursor(index)
        await pilot.pause()
        lines = [view.render_line(y).text for y in range(view.size.height)]
        flagged = [line for line in lines if " out" in line]
        assert len(flagged) == 1 and f" {outlier_seq} " in flagged[0]


async def test_the_review_names_title_task_base_url_and_environment(sample_folder) -> None:
    app = ReviewerApp(sample_folder("billing-refunds.outlier.json"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        claim = str(app.screen.query_one("#claim", Static).render())
        for words in ("Refund", "task:", "https://billing.internal.example", "production"):
            assert words in claim
        await pilot.press("a")
        await wait_until_loaded(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        body = str(app.screen.query_one(".dialog-body Static", Static).render())
        assert "runs on production · https://billing.internal.example" in body


async def test_at_80x24_no_notification_covers_the_approve_dialog(sample_folder) -> None:
    """The re-plan notice is up when the review opens; pressing a clears it before the dialog."""
    app = ReviewerApp(sample_folder("deskline-triage.rev1.json", "deskline-triage.rev2.json"))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        assert len(app._notifications) >= 1, "the re-plan notice should be showing"
        await pilot.press("a")
        await wait_until_loaded(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert len(app._notifications) == 0


async def test_a_failed_worker_says_what_failed_on_its_screen_and_the_screen_stays_usable(
    sample_folder, monkeypatch
) -> None:
    import reviewer.reading.verification

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the audit log could not be read")

    monkeypatch.setattr(reviewer.reading.verification, "compare_execution", broken)
    app = ReviewerApp(sample_folder("deskline-merge.server.json", "deskline-merge.server.execution.json"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter", "v")
        await wait_until_loaded(pilot)
        summary = str(app.screen.query_one("#verification-summary", Static).render())
        assert "failed" in summary and "RuntimeError" in summary and "audit log could not be read" in summary
        assert "comparing" not in summary
        await pilot.press("escape")
        await wait_until_loaded(pilot)
        assert app.is_running and app.screen.query_one(PlanView)


async def test_a_toast_about_one_proposal_is_not_drawn_over_another(sample_folder) -> None:
    """The re-plan notice of the triage plan ("press d") goes with its screen: back on the queue and
    into the merge plan, no toast names the triage's drift."""
    app = ReviewerApp(
        sample_folder("deskline-triage.rev1.json", "deskline-triage.rev2.json", "deskline-merge.server.json")
    )
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        triage = next(item for item in app.items.values() if len(item.revisions) == 2)
        await pilot.press("home")
        while app.queue_screen.highlighted_item() is not triage:
            await pilot.press("down")
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        assert any("Press d" in toast.message for toast in app._notifications), "the re-plan notice"
        await pilot.press("escape")
        await wait_until_loaded(pilot)
        other = next(item for item in app.items.values() if item is not triage)
        app.push_screen(app.create_review_screen(other))
        await wait_until_loaded(pilot)
        assert app.screen.item is other
        assert not any("Press d" in toast.message for toast in app._notifications)


SANDBOX_URL = "https://sandbox.deskline.example/v1/tickets"
SANDBOX_PROOF = {"url": SANDBOX_URL, "query": {"dryRun": "All"}, "checked_at": "2026-03-01T09:30:00Z"}


@pytest.mark.parametrize(
    ("dry_run", "proof", "proven_by"),
    [
        ({"writes_kept": 0}, "audit", "log of kept writes, read for the dry run"),
        (
            {"sandbox": SANDBOX_PROOF},
            "sandbox",
            f"sandbox check at 2026-03-01T09:30:00Z: a create sent to {SANDBOX_URL} with dryRun=All",
        ),
        ({}, "none", None),
        ({"write_requests": 3, "writes_kept": 0}, "audit", "log of kept writes, read for the dry run"),
        ({"write_requests": 0, "writes_kept": 0}, "no writes", "sent no write to the API, so it kept none"),
        (
            {"write_requests": 0, "writes_kept": 0, "sandbox": SANDBOX_PROOF},
            "sandbox",
            f"a create sent to {SANDBOX_URL} with dryRun=All",
        ),
    ],
    ids=["audit", "sandbox", "none", "audit over writes sent", "nothing sent", "sandbox, nothing sent"],
)
async def test_the_review_says_which_proof_a_server_dry_run_carries(
    tmp_path: Path, dry_run: dict[str, object], proof: str, proven_by: str | None
) -> None:
    call = {"tool": "update_ticket", "effect": "update", "args": {"id": "t1"}, "outcome": {"status": "ok"},
            "request": {"method": "PATCH", "path": "/v1/tickets/t1", "query": {"dryRun": "All"}}}  # fmt: skip
    document = proposal_document([call], proposal_id="proof", dry_run={"via": "server", **dry_run})
    (tmp_path / "proof.json").write_text(json.dumps(document))
    app = ReviewerApp(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_review(pilot)
        ratios = str(app.screen.query_one("#ratios", Static).render())
        assert f"proof       {proof}\n" in ratios
        detail = " ".join(str(app.screen.query_one("#detail", Static).render()).split())
        if proven_by is None:
            assert "ok, unproven" in detail and "proven by" not in detail
        else:
            assert "validated" in detail and "proven by" in detail and proven_by in detail
