"""What an on-call engineer reads first: the queue's cursor and columns, the keys to the alarm rows,
writes a dry run kept, decisions the app refuses, drift of an earlier revision, wide seqs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Static

from reviewer.plan.proposal import parse_proposal
from reviewer.queue.messages import TrailEvent
from reviewer.reading.analysis import Analysis
from reviewer.tui.app import ReviewerApp
from reviewer.tui.model.sources import QueueItem
from reviewer.tui.palette import THEME
from reviewer.tui.screens.dialogs import BreakGlassScreen, ConfirmScreen, TypedConfirmScreen
from reviewer.tui.screens.drift import DriftScreen
from reviewer.tui.screens.queue import LIVE_COLUMNS, QUEUE_COLUMNS, fit_columns, newest_first
from reviewer.tui.screens.review import ReviewScreen
from reviewer.tui.widgets.plan_view import PlanView
from tests.builders import proposal_document
from tests.forked_commands import run_reviewer
from tests.tui.helpers import wait_until_loaded

pytestmark = pytest.mark.anyio

K8S = "k8s-shop-scale-down.server.json"
KEPT = "crm-dedupe.writes-kept.json"
TRIAGE = ("deskline-triage.rev1.json", "deskline-triage.rev2.json")
MERGE = "deskline-merge.server.json"


def marks_column(app: ReviewerApp) -> list[str]:
    table = app.queue_screen.query_one("#queue", DataTable)
    return [str(table.get_cell_at((row, 0))) for row in range(table.row_count)]


def plain(widget: Static) -> str:
    return str(widget.render())


# --- the queue ---------------------------------------------------------------------------------


async def test_the_cursor_row_alone_carries_the_cursor_glyph_and_it_follows_the_cursor(sample_folder) -> None:
    app = ReviewerApp(sample_folder(MERGE, KEPT, K8S))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        assert [mark.startswith("▶") for mark in marks_column(app)] == [True, False, False]
        await pilot.press("down", "down")
        await wait_until_loaded(pilot)
        assert [mark.startswith("▶") for mark in marks_column(app)] == [False, False, True]


@pytest.mark.parametrize("columns", [QUEUE_COLUMNS, LIVE_COLUMNS], ids=["demo", "live"])
@pytest.mark.parametrize("width", [50, 80, 100, 120, 140, 160])
def test_the_deciding_columns_survive_every_width_and_the_title_keeps_room(columns, width: int) -> None:
    shown = fit_columns(columns, width)
    keys = [column.key for column in shown]
    assert {"mark", "danger", "title", "environment"} <= set(keys)
    assert "effects" in keys or width < 80, "the c/u/d counts give way only on a phone"
    title = next(column for column in shown if column.key == "title")
    assert title.width >= (12 if width < 80 else 16)
    assert sum(column.width + 2 for column in shown) + 4 <= width
    if width >= (120 if columns is QUEUE_COLUMNS else 150):
        assert "host" in keys


def test_the_host_column_names_the_host_and_a_port_other_than_the_schemes() -> None:
    from reviewer.tui.screens.queue import host_of

    assert host_of("https://k8s-prod-eu1.internal.example:6443") == "k8s-prod-eu1.internal.example:6443"
    assert host_of("https://crm.example.com/api") == "crm.example.com"


def test_the_host_column_reads_the_host_as_the_review_screen_and_the_executor_do() -> None:
    """One host rule: a fullwidth name is the host it reaches, a look-alike its IDNA form."""
    from reviewer.plan.hosts import read_host
    from reviewer.tui.screens.queue import host_of

    for url in (
        "https://\uff41\uff50\uff49.example/v1",
        "https://\u0430pi.example.com",
        "http://API.Example:80/",
    ):
        assert host_of(url) == read_host(url).host
    assert host_of("https://\uff41\uff50\uff49.example/v1") == "api.example"


def item_submitted(proposal_id: str, minutes_ago: int | None) -> QueueItem:
    document = proposal_document([{"tool": "t", "effect": "update"}], proposal_id=proposal_id)
    item = QueueItem(proposal_id, "pending")
    item.add(parse_proposal(json.dumps(document), proposal_id), "test")
    if minutes_ago is not None:
        at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC) - timedelta(minutes=minutes_ago)
        item.history = [
            TrailEvent(seq=1, at=at, actor="agent", event="submitted", revision=1, plan_sha256="0" * 64)
        ]
    return item


@pytest.mark.parametrize("destructive", [False, True])
def test_the_queue_marks_a_plan_that_destroys_with_an_update_marked_destructive(destructive: bool) -> None:
    """A proven server dry run of one update raises no alarm; marked destructive (an MCP tool hinted
    `destructiveHint`), the update is counted with the deletes, and the queue's danger column says so."""
    from reviewer.tui.screens.queue import queue_row
    from reviewer.tui.widgets.panes import summary_counts

    update = {"tool": "delete_entities", "effect": "update", "outcome": {"status": "ok"}}
    calls = [{**update, "destructive": True} if destructive else update]
    document = proposal_document(calls, proposal_id="p", dry_run={"via": "server", "writes_kept": 0})
    item = QueueItem("p", "pending")
    item.add(parse_proposal(json.dumps(document), "p"), "test")
    item.analysed.add(1)
    figures = item.figures()
    assert figures is not None and figures.alarms == ()
    assert queue_row(item)[1].plain == ("!!  destroys" if destructive else "")
    assert ("1 more destructive" in summary_counts(figures)) is destructive


def test_rows_are_newest_submission_first_whenever_they_arrive() -> None:
    """A proposal submitted after the first poll, listed last, still comes first."""
    first_poll = [item_submitted("b", 10), item_submitted("c", 20)]
    arrived_later = item_submitted("a", 1)
    ordered = newest_first([*first_poll, arrived_later])
    assert [item.proposal_id for item in ordered] == ["a", "b", "c"]
    undated = [item_submitted("x", None), item_submitted("y", None)]
    assert [item.proposal_id for item in newest_first(undated)] == ["x", "y"]


async def test_rows_listed_one_by_one_take_the_places_newest_first_gives_them(tmp_path: Path) -> None:
    """The table's order as rows arrive (a poll's newest first, then a newer one, a tie, one the
    queue did not date, an older one after it) is `newest_first` of them all: a row goes last only
    when it sorts last."""
    arrivals = [
        item_submitted("c", 30),
        item_submitted("d", 40),
        item_submitted("a", 5),
        item_submitted("e", 40),
        item_submitted("x", None),
        item_submitted("f", 50),
        item_submitted("g", 60),
    ]
    (tmp_path / "empty").mkdir()
    app = ReviewerApp(tmp_path / "empty")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        table = app.queue_screen.query_one("#queue", DataTable)
        for count, item in enumerate(arrivals, start=1):
            app.queue_screen.show_item(item)
            rows = [str(row.key.value) for row in table.ordered_rows]
            assert rows == [shown.proposal_id for shown in newest_first(arrivals[:count])], count
        await pilot.pause()
        assert "7 proposals" in str(app.queue_screen.query_one("#chrome").render())


async def test_the_drift_mark_clears_once_the_drift_was_viewed(sample_folder) -> None:
    app = ReviewerApp(sample_folder(*TRIAGE))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        assert "Δ" in marks_column(app)[0]
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        await pilot.press("escape")
        await wait_until_loaded(pilot)
        assert "Δ" in marks_column(app)[0], "opening the revision is not viewing its drift"
        await pilot.press("enter", "d")
        await wait_until_loaded(pilot)
        assert isinstance(app.screen, DriftScreen)
        await pilot.press("escape", "escape")
        await wait_until_loaded(pilot)
        assert "Δ" not in marks_column(app)[0]


# --- the review --------------------------------------------------------------------------------


async def test_f_jumps_to_the_first_delete_and_n_walks_the_rows_flagged_red(sample_folder) -> None:
    """The Kubernetes sample: deletes at #7, #8, #9 (#9 refused), the outlier at #6."""
    app = ReviewerApp(sample_folder(K8S))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        view = app.screen.query_one(PlanView)
        await pilot.press("f")
        assert view.cursor == 6
        seen = []
        for _ in range(4):
            await pilot.press("n")
            await wait_until_loaded(pilot)
            seen.append(view.cursor)
        assert seen == [7, 8, 5, 6]
        assert "3 deletes: persistent_volume_claim, namespace, persistent_volume" in plain(
            app.screen.query_one("#alarms", Static)
        )
        detail = plain(app.screen.query_one("#detail", Static)).splitlines()
        assert any("shop-preview-pr-1182" in line for line in detail[:6]), "the args come first"


async def test_n_stops_on_an_update_marked_destructive(tmp_path: Path) -> None:
    """An update an MCP tool hinted destructive is drawn red like a delete, so `n` stops on it too."""
    ok = {"outcome": {"status": "ok"}}
    calls = [
        {"tool": "update_entities", "effect": "update", **ok},
        {"tool": "delete_entities", "effect": "update", "destructive": True, **ok},
        {"tool": "create_entities", "effect": "create", **ok},
    ]
    document = proposal_document(calls, proposal_id="p", dry_run={"via": "server", "writes_kept": 0})
    (tmp_path / "p.json").write_text(json.dumps(document))
    app = ReviewerApp(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        view = app.screen.query_one(PlanView)
        await pilot.press("n")
        await wait_until_loaded(pilot)
        assert view.cursor == 1


async def test_writes_kept_read_kept_and_approving_them_needs_the_word_typed(sample_folder) -> None:
    app = ReviewerApp(sample_folder(KEPT))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        view = app.screen.query_one(PlanView)
        row = view.render_line(1).text
        assert "kept: written" in row and "validated" not in row
        await pilot.press("a")
        await wait_until_loaded(pilot)
        dialog = app.screen
        assert isinstance(dialog, TypedConfirmScreen)
        assert "sends every write of this plan a second time" in plain(
            dialog.query_one(".dialog-body Static", Static)
        )
        await pilot.press("y", "enter")
        await wait_until_loaded(pilot)
        assert app.screen is dialog, "y is not the word"
        await pilot.press("escape", "a")
        await pilot.press(*"again", "enter")
        await wait_until_loaded(pilot)
        assert isinstance(app.screen, ReviewScreen)
        assert "not sent (demo)" in plain(app.screen.query_one("#decision", Static))


async def test_breaking_glass_on_kept_writes_needs_the_word_typed_first(sample_folder) -> None:
    """Break glass is an approval: on a plan whose dry run kept writes it asks the word approving asks,
    then why it cannot wait; escape at the word sends nothing."""
    app = ReviewerApp(sample_folder(KEPT))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        await pilot.press("g")
        await wait_until_loaded(pilot)
        assert isinstance(app.screen, TypedConfirmScreen)
        await pilot.press("escape")
        await wait_until_loaded(pilot)
        assert isinstance(app.screen, ReviewScreen)
        await pilot.press("g", *"again", "enter")
        await wait_until_loaded(pilot)
        assert isinstance(app.screen, BreakGlassScreen)
        await pilot.press(*"the freeze blocks a fix", "enter")
        await wait_until_loaded(pilot)
        assert isinstance(app.screen, ReviewScreen)
        assert "not sent (demo)" in plain(app.screen.query_one("#decision", Static))


async def test_an_executed_proposal_is_refused_with_the_reason_not_offered_a_dialog(sample_folder) -> None:
    app = ReviewerApp(sample_folder(MERGE, "deskline-merge.server.execution.json"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        for key in ("a", "x"):
            await pilot.press(key)
            await wait_until_loaded(pilot)
            assert isinstance(app.screen, ReviewScreen), f"{key} opened a dialog"
            assert "already been executed" in plain(app.screen.query_one("#decision", Static))


async def test_the_approve_dialog_says_the_quorum_and_the_signing_in_the_demo(sample_folder) -> None:
    app = ReviewerApp(sample_folder(MERGE))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter", "a")
        await wait_until_loaded(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        body = plain(app.screen.query_one(".dialog-body Static", Static))
        assert "approvals  the demo has no queue" in body and "signature  the demo signs nothing" in body


async def test_d_on_the_first_of_two_revisions_compares_it_with_the_latest(sample_folder) -> None:
    app = ReviewerApp(sample_folder(*TRIAGE))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        item = next(iter(app.items.values()))
        await app.push_screen(ReviewScreen(item, 1))
        await wait_until_loaded(pilot)
        assert "rev 1/2" in plain(app.screen.query_one("#chrome", Static))
        await pilot.press("d")
        await wait_until_loaded(pilot)
        screen = app.screen
        assert isinstance(screen, DriftScreen) and (screen.base, screen.target) == (1, 2)
        assert not any("Only one revision" in note.message for note in app._notifications)


def test_the_seq_column_holds_six_digit_seqs_whole() -> None:
    calls = [{"seq": 149_990 + step, "tool": "create_refund", "effect": "create"} for step in range(11)]
    analysis = Analysis(parse_proposal(json.dumps(proposal_document(calls)), "wide"))
    view = PlanView(analysis)
    for width in (90, 116):
        widths = {column.header: cells for column, cells in view._layout(width)}
        assert widths["#"] == len("150000")
        assert widths["tool"] == 13, "the tool column gives up the cell the seq takes"


class ManyRows:
    """A RowSource of `count` identical rows, for the cursor's arithmetic without a plan file."""

    def __init__(self, count: int, template: Analysis) -> None:
        self.count, self.template = count, template

    def __len__(self) -> int:
        return self.count

    def row(self, index: int):  # type: ignore[no-untyped-def]
        from dataclasses import replace

        return replace(self.template.row(0), index=index, seq=index + 1)

    def has_outlier(self, index: int) -> bool:
        return False


class OnePlan(App[None]):
    def __init__(self, rows: ManyRows) -> None:
        super().__init__()
        self.rows = rows
        self.register_theme(THEME)
        self.theme = THEME.name

    def compose(self) -> ComposeResult:
        yield Static("banner", id="banner")
        yield PlanView(self.rows, id="plan")

    def on_mount(self) -> None:
        self.query_one("#banner").display = False
        self.query_one(PlanView).focus()


async def test_end_shows_the_last_call_of_120000_even_when_a_banner_appears_above() -> None:
    calls = [{"tool": "create_refund", "effect": "create"}]
    template = Analysis(parse_proposal(json.dumps(proposal_document(calls)), "one"))
    app = OnePlan(ManyRows(120_000, template))
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.query_one(PlanView)
        await pilot.press("end")
        await pilot.pause()
        last_line = view.scrollable_content_region.height - 1
        assert (
            view.render_line(last_line).text.startswith("▶") and "120000" in view.render_line(last_line).text
        )
        banner = app.query_one("#banner", Static)
        banner.update("one\ntwo\nthree")
        banner.display = True
        await pilot.pause()
        await pilot.pause()
        last_line = view.scrollable_content_region.height - 1
        assert "120000" in view.render_line(last_line).text


# --- the smaller things ----------------------------------------------------------------------------


async def test_ctrl_c_says_which_key_quits_without_markup(sample_folder) -> None:
    app = ReviewerApp(sample_folder(MERGE))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
        messages = [note.message for note in app._notifications]
        assert messages == ["Press q to quit the app"]


def test_the_help_wraps_a_long_meaning_under_itself() -> None:
    """At the help's width (66 cells in a 72-cell dialog), the chain-noise meaning wraps under
    itself, not back to the margin."""
    import io

    from rich.console import Console

    from reviewer.tui.screens.dialogs import VERDICT_HELP, two_columns

    console = Console(width=66, file=io.StringIO(), color_system=None)
    with console.capture() as capture:
        console.print(two_columns(VERDICT_HELP, 16))
    rows = capture.get().splitlines()
    start = next(index for index, row in enumerate(rows) if "refused only because" in row)
    column = rows[start].index("refused only because")
    follow = rows[start + 1]
    assert follow[:column].strip() == "" and follow[column] != " ", f"falls back: {follow!r}"


def test_login_checks_the_queue_answers_before_asking_for_the_token(tmp_path: Path) -> None:
    import os

    from tests.queue_harness import reviewer_command
    from tests.service.ports import free_port

    port = free_port()  # a loopback port nobody listens on
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    login = run_reviewer(
        reviewer_command("login", "--queue", f"http://127.0.0.1:{port}"),
        input="",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert login.returncode == 1
    assert "did not answer" in login.stderr
    assert "reviewer token for" not in login.stderr
