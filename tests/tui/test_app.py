"""The offline app's behaviour, driven through Textual's pilot: what a bug in the screens would break."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from reviewer.reading.analysis import Analysis
from reviewer.tui.app import ReviewerApp
from reviewer.tui.commands import run_demo
from reviewer.tui.palette import DANGER, MUTED, role_text
from reviewer.tui.screens.dialogs import ConfirmScreen, RejectScreen
from reviewer.tui.widgets.plan_view import PlanView
from tests.tui.helpers import SAMPLES, audited_merge_run, open_review, wait_until_loaded

pytestmark = pytest.mark.anyio


def painted_lines(view: PlanView) -> list[str]:
    return [view.render_line(y).text for y in range(view.size.height)]


async def test_hostile_markup_is_shown_as_text_and_runs_nothing(sample_folder) -> None:
    app = ReviewerApp(sample_folder("hostile-markup.json"))
    async with app.run_test(size=(140, 30)) as pilot:
        review = await open_review(pilot)
        lines = "\n".join(painted_lines(review.query_one(PlanView)))
        assert "[@click=app.approve]" in lines
        assert "\x1b" not in lines and "\u202e" not in lines
        assert "\\u202e" in lines
        await pilot.click(PlanView, offset=(60, 1))
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen), "markup in a proposal became a live action"


async def test_the_plan_view_asks_only_for_the_rows_it_paints(sample_folder, monkeypatch) -> None:
    asked: list[int] = []
    original = Analysis.row

    def counting_row(self: Analysis, index: int):  # type: ignore[no-untyped-def]
        asked.append(index)
        return original(self, index)

    monkeypatch.setattr(Analysis, "row", counting_row)
    app = ReviewerApp(sample_folder("billing-refunds-2000.server.json"))
    async with app.run_test(size=(100, 30)) as pilot:
        review = await open_review(pilot)
        await pilot.press("end")
        await pilot.pause()
        view = review.query_one(PlanView)
        assert view.cursor == 1999
        assert "2000" in painted_lines(view)[-1] or any(" 2000 " in line for line in painted_lines(view))
        assert len(set(asked)) < 100, f"{len(set(asked))} of 2,000 rows were built"


async def test_end_and_home_move_the_cursor_and_the_detail_follows(sample_folder) -> None:
    app = ReviewerApp(sample_folder("billing-refunds.outlier.json"))
    async with app.run_test(size=(100, 30)) as pilot:
        review = await open_review(pilot)
        view = review.query_one(PlanView)
        await pilot.press("end")
        await pilot.pause()
        last = review.analysis.proposal.calls[-1].seq
        assert str(review.query_one("#detail").render()).startswith(f"#{last} ")
        await pilot.press("home", "down")
        await pilot.pause()
        assert view.cursor == 1


async def test_a_broken_file_is_listed_and_the_others_still_load(sample_folder) -> None:
    folder: Path = sample_folder("deskline-merge.server.json", "crm-dedupe.writes-kept.json")
    (folder / "a-broken.json").write_text("{not json")
    (folder / "huge-string.json").write_text(
        (SAMPLES / "deskline-merge.server.json").read_text().replace("Printer on fire", "x" * 2_000_000)
    )
    app = ReviewerApp(folder)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        assert set(app.items) == {"deskline-merge-0042-server", "crm-dedupe-0311"}
        problems = {broken.name: broken.problem for broken in app.queue_screen.broken}
        assert "not valid JSON" in problems["a-broken.json"]
        assert "1,048,576" in problems["huge-string.json"]


async def test_a_demo_approval_is_confirmed_and_not_sent(sample_folder) -> None:
    app = ReviewerApp(sample_folder("deskline-merge.server.json"))
    async with app.run_test(size=(100, 30)) as pilot:
        review = await open_review(pilot)
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        digest = review.item.digests[1]
        assert digest in str(app.screen.body)
        await pilot.press("n")
        await pilot.pause()
        assert app.screen is review and not review.query_one("#decision").display
        await pilot.press("a", "y")
        await wait_until_loaded(pilot)
        assert "not sent (demo)" in str(review.query_one("#decision").render())


async def test_a_rejection_needs_a_reason(sample_folder) -> None:
    app = ReviewerApp(sample_folder("deskline-merge.server.json"))
    async with app.run_test(size=(100, 30)) as pilot:
        review = await open_review(pilot)
        await pilot.press("x", "enter")
        await pilot.pause()
        assert isinstance(app.screen, RejectScreen), "an empty reason was accepted"
        await pilot.press(*"dup", "enter")
        await wait_until_loaded(pilot)
        assert app.screen is review
        assert "rejection of revision 1: not sent (demo)" in str(review.query_one("#decision").render())


async def test_a_demo_request_for_changes_is_named_as_one(sample_folder) -> None:
    app = ReviewerApp(sample_folder("deskline-merge.server.json"))
    async with app.run_test(size=(100, 30)) as pilot:
        review = await open_review(pilot)
        await pilot.press("c", *"split it", "enter")
        await wait_until_loaded(pilot)
        assert app.screen is review
        shown = str(review.query_one("#decision").render())
        assert "request for changes of revision 1: not sent (demo)" in shown
        assert "rejection" not in shown


async def test_drift_opens_on_a_replanned_proposal_and_says_so_on_a_single_one(sample_folder) -> None:
    app = ReviewerApp(sample_folder("deskline-triage.rev1.json", "deskline-triage.rev2.json"))
    async with app.run_test(size=(100, 30)) as pilot:
        review = await open_review(pilot)
        assert review.revision == 2
        await pilot.press("d")
        await pilot.pause()
        assert "1 added, 1 removed, 1 changed" in str(app.screen.query_one("#drift-summary").render())


def test_demo_on_a_missing_folder_says_what_is_wrong(tmp_path: Path, capsys) -> None:
    assert run_demo(argparse.Namespace(folder=tmp_path / "nowhere")) == 2
    assert "does not exist" in capsys.readouterr().err


async def test_notifications_show_markup_and_escape_codes_as_text(sample_folder) -> None:
    app = ReviewerApp(sample_folder("deskline-merge.server.json"))
    async with app.run_test(size=(100, 30)) as pilot:
        app.notify("already decided by [@click=app.quit]mallory[/]\x1b[2J", title="[b]Decision")
        await pilot.pause()
        (notification,) = list(app._notifications)  # the app's own record of what it showed
        assert not notification.markup
        assert notification.message == "already decided by [@click=app.quit]mallory[/]\\x1b[2J"
        assert notification.title == "[b]Decision"
        assert app.is_running


async def test_a_replan_that_adds_an_argument_shows_it_as_added(sample_folder) -> None:
    """A field present on one side only reaches the drift detail as "(absent)", not as a crash."""
    import json

    folder: Path = sample_folder("deskline-merge.server.json")
    replan = json.loads((folder / "deskline-merge.server.json").read_text())
    replan["revision"] = 2
    replan["calls"][3]["args"]["force"] = True
    (folder / "deskline-merge.server.rev2.json").write_text(json.dumps(replan))
    app = ReviewerApp(folder)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_review(pilot)
        await pilot.press("d")
        await wait_until_loaded(pilot)
        await pilot.press("end")
        await pilot.pause()
        detail = str(app.screen.query_one("#detail").render())
        assert "args.force: (absent) → true" in detail
        assert app.is_running


def merge_run(sample_folder, edit: Callable[[dict[str, Any]], object]) -> Path:  # type: ignore[no-untyped-def]
    """The executed merge plan and its run's report, the report changed by `edit`."""
    folder: Path = sample_folder("deskline-merge.server.json", "deskline-merge.server.execution.json")
    record_path = folder / "deskline-merge.server.execution.json"
    record = json.loads(record_path.read_text())
    edit(record)
    record_path.write_text(json.dumps(record))
    return folder


async def open_verification(pilot) -> None:  # type: ignore[no-untyped-def]
    await open_review(pilot)
    await pilot.press("v")
    await wait_until_loaded(pilot)


async def test_hostile_keys_in_a_real_run_reach_the_verification_view_escaped(sample_folder) -> None:
    from textual.widgets import DataTable

    folder = merge_run(
        sample_folder, lambda record: record["calls"][0]["args"].update({"\x1b[2J\u202eX": "surprise"})
    )
    app = ReviewerApp(folder)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_verification(pilot)
        table = app.screen.query_one(DataTable)
        cells = " ".join(str(table.get_cell_at((row, 4))) for row in range(table.row_count))
        assert "different: args." in cells and "…" in cells  # cut to its column, whole in the detail
        assert "\x1b" not in cells and "\u202e" not in cells
        detail = str(app.screen.query_one("#detail").render())
        assert "different: args.\\x1b[2J\\u202eX" in detail
        assert "\x1b" not in detail


@pytest.mark.parametrize("with_audit", [True, False])
async def test_the_verification_view_says_when_no_audit_log_was_read(sample_folder, with_audit: bool) -> None:
    """A run reported without an audit verification: `v` says none was read and how to read one."""
    folder = merge_run(sample_folder, lambda record: None if with_audit else record.pop("audit"))
    app = ReviewerApp(folder)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_verification(pilot)
        summary = str(app.screen.query_one("#verification-summary", Static).render())
        said = "no audit log was read with this run: `reviewer verify deskline-merge-0042-server --audit"
        assert (said in " ".join(summary.split())) is not with_audit, summary


async def test_the_verification_view_names_the_audit_source_and_the_writes_nobody_approved(tmp_path) -> None:
    """The report's verification: the source and its count in the summary, each call's verdict in the
    audit column, the unplanned writes with their actor escaped; the differing call's detail says how."""
    from textual.widgets import DataTable

    app = ReviewerApp(audited_merge_run(tmp_path / "proposals"))
    async with app.run_test(size=(80, 24)) as pilot:
        await open_verification(pilot)
        summary = str(app.screen.query_one("#verification-summary", Static).render())
        assert "verified against access-log:/var/log/nginx/deskline.json: 2 of 4 match" in summary
        assert "no audit log was read" not in summary
        table = app.screen.query_one(DataTable)
        assert [str(table.get_cell_at((row, 5))) for row in range(4)] == [
            "matched",
            "matched",
            "differs",
            "missing",
        ]
        unplanned = str(app.screen.query_one("#unplanned", Static).render())
        assert "Unplanned writes (2): no approved call made them" in unplanned
        assert "DELETE /v1/tickets/t7 204 by ci-bot\\x1b[31m\\u202e at 2026-12-02 01:00:03Z" in unplanned
        assert (
            "id other-1 (deskline.json:814)" in unplanned and "POST /v1/tickets?notify=all 201" in unplanned
        )
        assert "\x1b" not in unplanned and "\u202e" not in unplanned
        await pilot.press("down", "down")
        await pilot.pause()
        detail = str(app.screen.query_one("#detail").render())
        assert "differs at /var/log/nginx/deskline.json:815, by request id" in detail
        assert "status: run 200, log 500" in detail


async def test_a_refused_call_a_log_of_kept_writes_does_not_hold_is_not_looked_for(tmp_path) -> None:
    """The sample API's own log (kept writes only): the three kept calls matched, the refused delete
    "not kept" (muted, not the danger of a missing write), and its detail says why."""
    from textual.widgets import DataTable

    calls = [
        {"seq": seq, "verdict": "matched", "where": f"/v1/audit[{seq - 1}]", "matched_by": "request id"}
        for seq in (1, 2, 3)
    ]
    audit = {
        "source": "api:/v1/audit",
        "complete": True,
        "calls": calls,
        "unplanned": [],
        "unplanned_count": 0,
    }
    app = ReviewerApp(audited_merge_run(tmp_path / "proposals", audit))
    async with app.run_test(size=(100, 30)) as pilot:
        await open_verification(pilot)
        table = app.screen.query_one(DataTable)
        cells = [table.get_cell_at((row, 5)) for row in range(4)]
        assert [str(cell) for cell in cells] == ["matched", "matched", "matched", "not kept"]
        await pilot.press("down", "down", "down")
        await pilot.pause()
        detail = str(app.screen.query_one("#detail").render())
        assert "not looked for: the API refused it" in " ".join(detail.split())


async def test_at_50x20_the_verification_cuts_paths_at_their_start_and_enter_shows_the_call(tmp_path) -> None:
    """A phone's 50x20: the call cells keep the path's end (t1, t2, t3 stay apart) and end cut cells
    with `…`; `▶` marks the cursor's row and follows it; `enter` shows the selected call's detail
    in the table's place, inside the screen, and `escape` brings the table back."""
    from textual.widgets import DataTable

    app = ReviewerApp(audited_merge_run(tmp_path / "proposals"))
    async with app.run_test(size=(50, 20)) as pilot:
        await open_verification(pilot)
        screen = app.screen
        table = screen.query_one(DataTable)
        rows = [[str(table.get_cell_at((row, column))) for column in range(4)] for row in range(4)]
        paths = ["POST …tickets", "PATCH …ets/t1", "PATCH …ets/t2", "DELETE …ts/t3"]
        assert [row[1] for row in rows] == paths
        assert rows[1][2] == "same once r…"
        assert [row[0] for row in rows] == ["▶1", " 2", " 3", " 4"]
        await pilot.press("down", "down")
        await pilot.pause()
        assert [str(table.get_cell_at((row, 0))) for row in range(4)] == [" 1", " 2", "▶3", " 4"]
        detail = screen.query_one("#detail-pane")
        assert not detail.display or detail.region.bottom > screen.size.height, "nothing to reach"
        await pilot.press("enter")
        await pilot.pause()
        assert detail.display and detail.has_focus and not table.display
        assert detail.region.y > 0 and detail.region.bottom <= screen.size.height - 1
        assert "differs at /var/log/nginx/deskline.json:815" in str(screen.query_one("#detail").render())
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and table.display and table.has_focus and table.cursor_row == 2


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            {"unplanned": [], "unplanned_count": 0},
            "Unplanned writes: none found",
        ),
        (
            {
                "unplanned": [],
                "unplanned_count": 0,
                "complete": False,
                "problem": "no entries in the run's window (0 read)",
            },
            "the log cannot vouch for this run: no entries in the run's window (0 read)",
        ),
        ({"calls": [{"seq": 1, "verdict": "obeyed"}]}, "the run's audit verification does not read: "),
    ],
)
async def test_the_verification_view_says_none_found_why_not_or_that_the_report_does_not_read(
    tmp_path, change: dict[str, Any], said: str
) -> None:
    """No unplanned write is "none found"; a log that cannot vouch says why (and "none found" is then
    no clean bill); a verification that is not of the report's shape is said to be so, never shown."""
    from tests.tui.helpers import AUDITED

    app = ReviewerApp(audited_merge_run(tmp_path / "proposals", {**AUDITED, **change}))
    async with app.run_test(size=(100, 30)) as pilot:
        await open_verification(pilot)
        shown = " ".join(
            str(app.screen.query_one(which, Static).render())
            for which in ("#verification-summary", "#unplanned")
        )
        assert said in " ".join(shown.split()), shown
        assert ("verified against" in shown) is ("does not read" not in said)


async def test_a_replan_that_changes_a_decimal_amount_is_marked_and_shown(sample_folder) -> None:
    """Floats in a parsed plan compare like any other value: the queue marks the drift, `d` shows it."""
    import json

    folder: Path = sample_folder("deskline-merge.server.json")
    first = json.loads((folder / "deskline-merge.server.json").read_text())
    first["calls"][0]["args"]["budget"] = 12.5
    (folder / "deskline-merge.server.json").write_text(json.dumps(first))
    first["revision"] = 2
    first["calls"][0]["args"]["budget"] = 1250.75
    (folder / "deskline-merge.server.rev2.json").write_text(json.dumps(first))
    app = ReviewerApp(folder)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        assert app.items["deskline-merge-0042-server"].latest_drift() is not None
        await open_review(pilot)
        await pilot.press("d")
        await wait_until_loaded(pilot)
        assert "1 changed" in str(app.screen.query_one("#drift-summary").render())
        assert "args.budget: 12.5 → 1250.75" in str(app.screen.query_one("#detail").render())
        assert app.is_running


def test_demo_without_a_folder_opens_the_samples_that_ship_in_the_package() -> None:
    """`reviewer demo` with no argument reads the package's own samples: every bundled file is there."""
    from reviewer.tui.model.sources import BUNDLED_SAMPLES

    bundled = sorted(path.name for path in BUNDLED_SAMPLES.glob("*.json"))
    assert bundled == sorted(path.name for path in SAMPLES.glob("*.json")) and len(bundled) >= 10


def test_the_app_hands_the_interpreter_between_threads_quickly_while_it_runs(sample_folder) -> None:
    """While the app runs, a thread waiting for the interpreter (the terminal's writer with a frame,
    the event loop behind the loader) gets it within `SWITCH_INTERVAL`; Python's own returns after,
    and `run` returns what the app exited with (a snapshot test's picture)."""
    import sys

    from reviewer.tui.runtime import SWITCH_INTERVAL

    before = sys.getswitchinterval()
    seen: list[float] = []

    async def look(pilot) -> None:  # type: ignore[no-untyped-def]
        seen.append(sys.getswitchinterval())
        pilot.app.exit("what the app exits with")

    app = ReviewerApp(sample_folder("billing-refunds.outlier.json"))
    assert app.run(headless=True, size=(100, 30), auto_pilot=look) == "what the app exits with"
    assert seen == [SWITCH_INTERVAL] and before > SWITCH_INTERVAL
    assert sys.getswitchinterval() == before


@pytest.mark.parametrize(("role", "colour", "bold"), [("danger", DANGER, True), ("muted", MUTED, False)])
async def test_words_in_a_role_are_drawn_in_its_colours(
    sample_folder, role: str, colour: str, bold: bool
) -> None:
    """Textual reads a `Text`'s own style as one of its own styles, where a role's name means nothing
    (such words were drawn plain); `role_text` puts the role on a span, drawn in the role's colours."""
    app = ReviewerApp(sample_folder("deskline-merge.server.json"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        words = Static(role_text("queue unreachable", role))
        await app.screen.mount(words)
        await pilot.pause()
        (segment,) = [segment for segment in words.render_line(0) if segment.text.strip()]
        assert segment.text.strip() == "queue unreachable"
        assert segment.style is not None and segment.style.color is not None
        assert segment.style.color.triplet is not None and segment.style.color.triplet.hex == colour
        assert bool(segment.style.bold) is bold
