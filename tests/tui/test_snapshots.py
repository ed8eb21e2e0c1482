"""Snapshot tests of the review screens: each docstring says what the picture must show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reviewer.tui.app import ReviewerApp
from tests.builders import proposal_document
from tests.tui.helpers import SAMPLES, audited_merge_run, wait_until_loaded

SERVER = "deskline-merge.server.json"


def open_first(*extra_keys: str):  # type: ignore[no-untyped-def]
    """A run_before that waits for the files to load, opens the first proposal and presses keys,
    each once what the one before started has finished (the drift view fills in a worker: `end`
    pressed before its rows are there moves nothing)."""

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_until_loaded(pilot)
        for key in ("enter", *extra_keys):
            await pilot.press(key)
            await wait_until_loaded(pilot)

    return run_before


def test_queue_screen(snap_compare) -> None:
    """The queue of every bundled sample: one row each with its danger, title, environment, agent,
    revision ("2/2" for the re-planned triage), calls, c/u/d counts and the dry-run kind; ▶ on the
    cursor's row; the danger column gives each row's worst grade, its severity in `!` and a word:
    red "!!! kept" (the CRM writes kept) and "!!! delete" (the Kubernetes deletes in production),
    amber "!! money" (the 2,000 refunds in production), "!! outlier", "!! hidden", and the merge
    tried three ways as "!! by fake", "!! recorded" and "!! delete", the triage "!! unsent"; under the
    table the highlighted proposal's worst grade first ("!! moves EUR 84,641.64 (1,800 calls), in
    production"), then its id, environment, API, agent and file; the chrome says "demo" and "9
    proposals"."""
    assert snap_compare(ReviewerApp(SAMPLES), terminal_size=(100, 30), run_before=wait_until_loaded)


def test_review_server_dry_run(snap_compare, sample_folder) -> None:
    """The reference scenario under the server's own dry run: create "validated" (green), both
    updates "chain noise" (yellow) with the ←#1 flag, delete "real refusal" (red, "del" flag);
    side effects 1:2:1:0, 1 validated, 1 real refusal, 2 chain noise, 4 sent 0 kept; the chrome
    shows the proposal id, revision, digest prefix and proposer; the banner says 1 real refusal."""
    app = ReviewerApp(sample_folder(SERVER))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first())


def test_review_fake_dry_run(snap_compare, sample_folder) -> None:
    """The same plan answered by a fake: every row "not validated" (yellow italic), no refusals,
    side effects say 4 unvalidated, 0 validated, and the banner says nothing was validated."""
    app = ReviewerApp(sample_folder("deskline-merge.fake.json"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first())


def test_review_record_dry_run(snap_compare, sample_folder) -> None:
    """The same plan only recorded: every row "recorded" (dim), placeholders shown as ⟨id from #1
    create_ticket⟩ in the args column, nothing validated."""
    app = ReviewerApp(sample_folder("deskline-merge.record.json"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first())


def test_writes_kept_alarm(snap_compare, sample_folder) -> None:
    """A dry run whose API ignored the flag: the red banner under the chrome and the reversed
    "DRY RUN KEPT 3 WRITES" block at the top of the side effects, impossible to miss; none of its
    server oks counts as validated (0 validated, 3 unvalidated)."""
    app = ReviewerApp(sample_folder("crm-dedupe.writes-kept.json"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first())


def test_outlier_in_extremes(snap_compare, sample_folder) -> None:
    """The bulk refund: the extremes pane shows amount_cents with its median and a red line for the
    one refund about 1,000 times the median, naming its call number; the side effects say what the
    refunds move ("moves EUR ..." in bold amber)."""
    app = ReviewerApp(sample_folder("billing-refunds.outlier.json"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first())


def test_hostile_proposal(snap_compare, sample_folder) -> None:
    """Hostile text shown, not obeyed: markup such as [@click=app.approve] and [bold red] appears
    literally, ESC sequences and the bidi override appear as \\x1b / \\u202e escapes, every row
    carries the "hid" flag, the 100 KB string is cut with a count, and the layout is intact."""
    app = ReviewerApp(sample_folder("hostile-markup.json"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first())


def test_approve_confirmation(snap_compare, sample_folder) -> None:
    """Pressing a: a dialog over the review that names the revision and proposal, shows the full
    plan sha256, the counts being approved and the alarms, says "demo: nothing will be sent",
    and offers y / n."""
    app = ReviewerApp(sample_folder(SERVER))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first("a"))


def test_break_glass_confirmation(snap_compare, sample_folder) -> None:
    """Pressing g: the approval's dialog (revision, proposal, full sha256, counts, alarms, demo: nothing
    will be sent) titled "Approve with break glass", with a field asking why it cannot wait and the
    keys enter and escape."""
    app = ReviewerApp(sample_folder(SERVER))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first("g"))


def test_demo_decision_is_not_sent(snap_compare, sample_folder) -> None:
    """After a then y in the demo: the banner under the panes and a notification say the approval
    of revision 1 was "not sent (demo)"."""
    app = ReviewerApp(sample_folder(SERVER))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first("a", "y"))


def test_reject_asks_for_a_reason(snap_compare, sample_folder) -> None:
    """Pressing x: the rejection dialog with the same digest and counts and an empty reason field."""
    app = ReviewerApp(sample_folder(SERVER))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first("x"))


def test_help_screen(snap_compare) -> None:
    """Pressing ?: every key of the queue (enter, / Filter, s Sort, up, down, pgup, pgdn, home, end,
    escape Clear the filter, r), the review and the confirmation, and what each dry-run verdict, flag
    and danger word means (below the fold)."""
    assert snap_compare(
        ReviewerApp(SAMPLES), terminal_size=(100, 30), press=["question_mark"], run_before=wait_until_loaded
    )


def test_queue_at_80x24(snap_compare) -> None:
    """The queue at 80x24: the marks, danger, title (cut with an ellipsis at 16), env, rev, c/u/d and
    dry run fit; agent, host, calls and the demo's state column gave way; nothing needs horizontal
    scrolling; the footer offers / Filter and s Sort."""
    assert snap_compare(ReviewerApp(SAMPLES), terminal_size=(80, 24), run_before=wait_until_loaded)


def test_review_at_80x24(snap_compare, sample_folder) -> None:
    """The review at 80x24: the plan keeps seq, effect, the call (its method and the end of its path,
    "DELETE /v1/tickets/t3", then the first arguments in the cells left), verdict and flags (the tool
    column gives way, and leads the selected call's detail), the three panes below stay readable, the
    footer lists the keys (f first delete, n next alarm row among them)."""
    app = ReviewerApp(sample_folder(SERVER))
    assert snap_compare(app, terminal_size=(80, 24), run_before=open_first())


def test_broken_file_listed(snap_compare, sample_folder) -> None:
    """A folder with one good proposal and two broken files: the good one is listed; the one whose
    second call has a wrong type is listed from its header and then marked broken (a red "!!! broken"
    and "broken" in its row); under the table, below a red "2 file(s) could not be read", the broken
    ones are named with the reason (the field for the wrong type, "not valid JSON")."""
    folder: Path = sample_folder(SERVER)
    (folder / "truncated.json").write_text('{"format": "reviewer.proposal/v1", "calls": [')
    wrong_type = (folder / SERVER).read_text().replace('"seq": 2', '"seq": "2"')
    wrong_type = wrong_type.replace('"deskline-merge-0042-server"', '"deskline-merge-0042-wrong-type"')
    (folder / "wrong-type.json").write_text(wrong_type)
    assert snap_compare(ReviewerApp(folder), terminal_size=(100, 30), run_before=wait_until_loaded)


def test_drift_view(snap_compare, sample_folder) -> None:
    """d on the re-planned triage: "1 added, 1 removed, 1 changed" above the merged rows of rev 2,
    the inserted create_label green, the changed priority update yellow, the dropped delete put back
    in red where it stood; the cursor on the first change, whose detail says "added in rev 2"; the
    placeholders renumbered by the insertion (←#2) are not marked as changes."""
    app = ReviewerApp(sample_folder("deskline-triage.rev1.json", "deskline-triage.rev2.json"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first("d"))


def test_drift_changed_field(snap_compare, sample_folder) -> None:
    """In the drift view, the cursor on the changed call: its detail starts with the changed field,
    old value in red → new value in green, before the full call."""
    app = ReviewerApp(sample_folder("deskline-triage.rev1.json", "deskline-triage.rev2.json"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first("d", "end", "up"))


def test_verification_view(snap_compare, sample_folder) -> None:
    """v on the executed server plan: the summary "naive: 1 of 4 identical; placeholders resolved:
    3 of 4 match; refused: 1", then "verified against access-log:/var/log/nginx/deskline.json: 4 of 4
    match"; the create "same", both updates "same once resolved" (green), the delete "refused 409"
    (red), each with the audit column "matched" (green); "Unplanned writes: none found"; the calls'
    paths cut at their start ("PATCH …ickets/t1", "…/t2", "…/t3"); the cursor's row marked `▶1` and
    underlined; the detail of the first row below, saying where the log records it."""
    folder = sample_folder(SERVER, "deskline-merge.server.execution.json")
    assert snap_compare(ReviewerApp(folder), terminal_size=(100, 30), run_before=open_first("v"))


def test_verification_against_an_audit_source(snap_compare, tmp_path) -> None:
    """v on a run its runner held against nginx's access log, at 80x24: under the naive summary,
    "verified against access-log:/var/log/nginx/deskline.json: 2 of 4 match" (the count red); every
    column in sight, the audit column "matched" (green) twice, "differs" and "missing" (red); then
    "Unplanned writes (2): no approved call made them", the DELETE /v1/tickets/t7 204 by
    "ci-bot\\x1b[31m\\u202e" (escaped, never obeyed) with its time, request id and log line, and the
    POST with its query; the selected call's pane says where the log records call 1."""
    app = ReviewerApp(audited_merge_run(tmp_path / "proposals"))
    assert snap_compare(app, terminal_size=(80, 24), run_before=open_first("v"))


@pytest.mark.parametrize("keys", [(), ("down", "down", "enter")], ids=["table", "enter"])
def test_verification_against_an_audit_source_at_50x20(snap_compare, tmp_path, keys) -> None:
    """The same at a phone's 50x20: the summary lines wrap, the table keeps #, call, check and audit
    with all four rows (paths cut at their start, "…ets/t1", "…ets/t2", "…ts/t3"; "same once r…"
    ending in an ellipsis; `▶1` on the cursor's row), the selected call's pane gives way, and the
    unplanned writes start under the table (the rest scrolls); the footer offers "⏎ Call detail".
    After down, down, enter: the third call's detail ("same once resolved", the audit "differs at
    …:815", "status: run 200, log 500") in the table's place, inside the screen."""
    app = ReviewerApp(audited_merge_run(tmp_path / "proposals"))
    assert snap_compare(app, terminal_size=(50, 20), run_before=open_first("v", *keys))


# --- the same states in 16 colours and without colour -------------------------------------------


def test_review_in_16_colours(snap_compare, sample_folder) -> None:
    """The server plan in a 16-colour terminal, cursor on the refused delete: "real refusal", "del"
    and "delete" in bright red on black, the cursor row marked ▶ (its tint falls to black), chain
    noise bright yellow, "validated" bright green; the claim lines show title, task and base URL."""
    app = ReviewerApp(sample_folder(SERVER), color_system="standard")
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first("end"))


def test_review_without_colour(snap_compare, sample_folder, monkeypatch) -> None:
    """NO_COLOR: only greys; "real refusal", "del", "delete" and the alarm are reversed (the
    strongest text, never the dimmest), chain noise bold, the cursor row marked ▶ and underlined."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = ReviewerApp(sample_folder(SERVER))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first("end"))


def test_drift_in_16_colours(snap_compare, sample_folder) -> None:
    """The triage drift in 16 colours: the added row marked +, the changed row ~, the removed row -
    in the first column, each still telling its state with its tint gone; the cursor ▶ on the first
    change."""
    app = ReviewerApp(
        sample_folder("deskline-triage.rev1.json", "deskline-triage.rev2.json"), color_system="standard"
    )
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first("d"))


def test_drift_without_colour(snap_compare, sample_folder, monkeypatch) -> None:
    """The triage drift with NO_COLOR: the + ~ - marks carry the row states; the removed delete's
    "del" flag reversed."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = ReviewerApp(sample_folder("deskline-triage.rev1.json", "deskline-triage.rev2.json"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first("d"))


def test_queue_in_16_colours(snap_compare) -> None:
    """The queue in 16 colours: header and zebra rows on black, every "!!!" grade and c/u/d count
    with a delete in bright red, the "!!" grades in yellow, counts whole (2k for the 2,000-call
    plan)."""
    app = ReviewerApp(SAMPLES, color_system="standard")
    assert snap_compare(app, terminal_size=(100, 30), run_before=wait_until_loaded)


def test_queue_without_colour(snap_compare, monkeypatch) -> None:
    """The queue with NO_COLOR: the "!!!" grades and delete counts reversed, the "!!" grades bold and
    underlined, the cursor row reversed whole and marked ▶."""
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(ReviewerApp(SAMPLES), terminal_size=(100, 30), run_before=wait_until_loaded)


# --- what an on-call engineer reads at 80x24 ------------------------------------------------------


def test_queue_by_danger_at_80x24(snap_compare) -> None:
    """`s` at 80x24: the rows worst first, "!!! kept" then "!!! delete" (the Kubernetes plan) in red,
    then the "!!" grades, "!! money" last; the chrome says "by danger"; the cursor stayed on the
    refunds, now the last row."""
    assert snap_compare(
        ReviewerApp(SAMPLES), terminal_size=(80, 24), press=["s"], run_before=wait_until_loaded
    )


def test_queue_filtered_at_80x24(snap_compare) -> None:
    """`/` then "merge t1" and enter at 80x24: the filter's line over the table holds "merge t1";
    the three merges are the only rows ("!! by fake", "!! recorded", "!! delete"), the chrome says
    "3 of 9 match /merge t1"."""
    keys = ["slash", *"merge t1", "enter"]
    assert snap_compare(
        ReviewerApp(SAMPLES), terminal_size=(80, 24), press=keys, run_before=wait_until_loaded
    )


@pytest.mark.parametrize("colours", ["truecolor", "standard", "nocolor"])
def test_queue_at_50x20(snap_compare, colours: str, monkeypatch) -> None:
    """A phone's 50x20, in truecolor, 16 colours and without colour, the cursor on the Kubernetes
    plan: seven rows, no two alike (the merge tried three ways reads "!! by fake", "!! recorded",
    "!! delete"); columns danger, title and env; under the table its worst alarm first and whole,
    "!!! 3 deletes: persistent_volume_claim, namespace, persistent_volume, in production"; the demo's
    line keeps "decisions are not sent" and ends with "…"."""
    if colours == "nocolor":
        monkeypatch.setenv("NO_COLOR", "1")
    app = ReviewerApp(SAMPLES, color_system=None if colours in ("truecolor", "nocolor") else colours)
    assert snap_compare(app, terminal_size=(50, 20), press=["end"], run_before=wait_until_loaded)


QUEUE_ROWS = {"clean row": 0, "alarm row": 1, "re-planned row": 6}


def queue_after(presses: int):  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_until_loaded(pilot)
        await pilot.press(*["down"] * presses)
        await wait_until_loaded(pilot)

    return run_before


@pytest.mark.parametrize("row", list(QUEUE_ROWS))
def test_queue_cursor_in_16_colours(snap_compare, row: str) -> None:
    """The queue at 80x24 in 16 colours, the cursor on the refunds ("!! money"), the outlier ("!!
    outlier") or the re-planned triage ("Δ", "!! unsent", rev "2/2"): ▶ in the first column of that
    row only, the row underlined; the columns danger, env (production / staging), rev, c/u/d and dry
    run all shown, titles cut at 16."""
    app = ReviewerApp(SAMPLES, color_system="standard")
    assert snap_compare(app, terminal_size=(80, 24), run_before=queue_after(QUEUE_ROWS[row]))


@pytest.mark.parametrize("row", list(QUEUE_ROWS))
def test_queue_cursor_without_colour(snap_compare, row: str, monkeypatch) -> None:
    """The same with NO_COLOR: the cursor's row reversed whole and marked ▶; the "!!!" grades
    reversed, the "!!" grades bold and underlined."""
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(ReviewerApp(SAMPLES), terminal_size=(80, 24), run_before=queue_after(QUEUE_ROWS[row]))


def test_kubernetes_deletes_at_80x24(snap_compare, sample_folder) -> None:
    """The Kubernetes sample at 80x24 after f: the alarm line names "3 deletes: persistent_volume_claim,
    namespace, persistent_volume" with the real refusal and the outlier; the cursor ▶ on #7, the first
    delete, in sight, its call cut at its start ("DELETE …umeclaims/data-postgres-0") so each
    deployment's row names it ("PATCH …/deployments/catalog/scale"); its detail begins with its
    arguments (namespace shop-preview-pr-1182)."""
    app = ReviewerApp(sample_folder("k8s-shop-scale-down.server.json"))
    assert snap_compare(app, terminal_size=(80, 24), run_before=open_first("f"))


def test_writes_kept_rows(snap_compare, sample_folder) -> None:
    """The writes-kept sample at 80x24: every row's dry-run column says "kept: written" in red (not
    "validated"), the detail says the write has already happened and approving sends it again."""
    app = ReviewerApp(sample_folder("crm-dedupe.writes-kept.json"))
    assert snap_compare(app, terminal_size=(80, 24), run_before=open_first())


def test_writes_kept_dialog(snap_compare, sample_folder) -> None:
    """a on the writes-kept sample: "Approve: writes again", the dialog says the dry run already made
    3 of 3 writes and approving sends them a second time, and asks for "again" typed in a field
    (enter sends, escape goes back), not y."""
    app = ReviewerApp(sample_folder("crm-dedupe.writes-kept.json"))
    assert snap_compare(app, terminal_size=(80, 24), run_before=open_first("a"))


def test_drift_of_revision_1_of_2(snap_compare, sample_folder) -> None:
    """d on revision 1 of the re-planned triage (the chrome said rev 1/2): the drift of revision 1
    against revision 2 (1 added, 1 removed, 1 changed), not "Only one revision"."""

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        from reviewer.tui.screens.review import ReviewScreen

        await wait_until_loaded(pilot)
        app = pilot.app
        await app.push_screen(ReviewScreen(next(iter(app.items.values())), 1))
        await wait_until_loaded(pilot)
        await pilot.press("d")
        await wait_until_loaded(pilot)

    app = ReviewerApp(sample_folder("deskline-triage.rev1.json", "deskline-triage.rev2.json"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_six_digit_seqs(snap_compare, tmp_path, size) -> None:
    """A plan whose seqs run to 150,000 (its last calls, #149,990 to #150,000, as a 150,000-call plan
    ends), after end: every seq whole in the # column ("150000", not "1500…"), the cursor ▶ on the
    last, in sight."""
    calls = [
        {"seq": 149_990 + step, "tool": "create_refund", "effect": "create", "args": {"amount_cents": 500}}
        for step in range(11)
    ]
    (tmp_path / "wide.json").write_text(json.dumps(proposal_document(calls, proposal_id="wide-seqs")))
    app = ReviewerApp(tmp_path / "wide.json")
    assert snap_compare(app, terminal_size=size, run_before=open_first("end"))


def money_both_ways(folder: Path) -> Path:
    """Five refunds of +2,000,000 USD and five of -2,000,000 USD: money that nets to nothing."""
    calls = [
        {
            "tool": "create_refund",
            "effect": "create",
            "args": {"amount": amount, "currency": "USD", "charge": f"ch_{seq}"},
            "outcome": {"status": "ok", "http_status": 200},
        }
        for seq, amount in enumerate([2_000_000] * 5 + [-2_000_000] * 5, start=1)
    ]
    target = {"api": "stripe", "base_url": "https://api.stripe.com", "environment": "production"}
    document = proposal_document(calls, proposal_id="refunds-net-zero", title="Refunds", target=target)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "refunds.json").write_text(json.dumps(document))
    return folder


def test_money_that_cancels_out_at_80x24(snap_compare, tmp_path) -> None:
    """The ten refunds opened at 80x24: the banner names "5 calls with a negative amount", and the
    Side effects pane says "moves USD +10,000,000 / -10,000,000" (warning colour), never USD 0."""
    app = ReviewerApp(money_both_ways(tmp_path / "proposals"))
    assert snap_compare(app, terminal_size=(80, 24), run_before=open_first())


def test_money_that_cancels_out_at_50x20(snap_compare, tmp_path) -> None:
    """The same plan on a phone's 50x20, its alarms opened whole with `e`: the negative amounts'
    alarm is there in words beside the unproven dry run's."""
    app = ReviewerApp(money_both_ways(tmp_path / "proposals"))
    assert snap_compare(app, terminal_size=(50, 20), run_before=open_first("e"))
