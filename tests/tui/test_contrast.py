"""Every character on the review, drift, queue and dialog screens is readable in every colour mode:
WCAG contrast of at least 4.5:1 in truecolor, 256 colours and 16 colours (a dark xterm palette), and
without colour (NO_COLOR) the danger words are bold or reversed, never dimmed."""

from __future__ import annotations

import pytest

from reviewer.tui.app import ReviewerApp
from tests.builders import proposal_document
from tests.tui.contrast import low_contrast, screen_segments, styles_of
from tests.tui.helpers import SAMPLES, audited_merge_run, wait_until_loaded

pytestmark = pytest.mark.anyio

MERGE = ("deskline-merge.server.json",)
TRIAGE = ("deskline-triage.rev1.json", "deskline-triage.rev2.json")
SCREENS = {
    "queue": ((), ()),
    "queue, cursor on an alarm row": ((), ("down",)),
    "queue, cursor on a re-planned row": ((), ("down",) * 6),
    "queue by danger, cursor on a kept write": ((), ("s", "home")),
    "queue, the filter's line empty": ((), ("slash",)),
    "queue, filtered": ((), ("slash", *"merge", "enter")),
    "review, cursor on the refused delete": (MERGE, ("enter", "end")),
    "review, cursor on chain noise": (MERGE, ("enter", "down")),
    "review, writes kept": (("crm-dedupe.writes-kept.json",), ("enter",)),
    "review, hidden characters": (("hostile-markup.json",), ("enter", "down")),
    "review, outlier": (("billing-refunds.outlier.json",), ("enter",)),
    "drift, cursor on the added row": (TRIAGE, ("enter", "d")),
    "drift, cursor on the changed row": (TRIAGE, ("enter", "d", "end", "up")),
    "drift, cursor on the removed row": (TRIAGE, ("enter", "d", "end")),
    "approve confirmation": (MERGE, ("enter", "a")),
    "help": (MERGE, ("question_mark",)),
}
APPS = {"colour": ("truecolor", "256", "standard"), "no colour": ("nocolor",)}
"""One app per palette: the colour one is read in three terminals (its 256- and 16-colour filters
only map colours), the NO_COLOR one, whose styles differ, in its own."""


def make_app(folder, mode: str, monkeypatch: pytest.MonkeyPatch) -> ReviewerApp:  # type: ignore[no-untyped-def]
    if mode == "nocolor":
        monkeypatch.setenv("NO_COLOR", "1")
    return ReviewerApp(folder, color_system=None if mode in ("truecolor", "nocolor") else mode)


def shown_in(mode: str) -> str | None:
    return mode if mode in ("256", "standard") else None


@pytest.mark.parametrize("palette", list(APPS))
@pytest.mark.parametrize("screen", list(SCREENS))
async def test_every_character_is_readable(screen: str, palette: str, sample_folder, monkeypatch) -> None:
    files, keys = SCREENS[screen]
    modes = APPS[palette]
    app = make_app(sample_folder(*files) if files else SAMPLES, modes[0], monkeypatch)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        for key in keys:
            await pilot.press(key)
            await wait_until_loaded(pilot)
        found = {mode: low_contrast(app, shown_in=shown_in(mode)) for mode in modes}
        assert found == {mode: [] for mode in modes}


@pytest.mark.parametrize("mode", ["256", "standard"])
async def test_a_truecolor_screen_filtered_here_is_the_screen_the_app_shows_in_fewer_colours(
    mode: str, sample_folder, monkeypatch
) -> None:
    """What lets one app stand for three terminals above: the review screen of a 256- or 16-colour
    app, segment for segment, is the truecolor app's screen passed through that terminal's filter."""
    screens = []
    for system in ("truecolor", mode):
        app = make_app(sample_folder(*MERGE), system, monkeypatch)
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until_loaded(pilot)
            await pilot.press("enter")
            await wait_until_loaded(pilot)
            screens.append(screen_segments(app, shown_in=mode if system == "truecolor" else None))
    filtered, shown = screens
    assert any(style and style.color for line in shown for _, style, _ in line)
    assert filtered == shown


@pytest.mark.parametrize("word", ["real refusal", "del ", "1 real refusal"])
async def test_without_colour_danger_is_bold_or_reversed_never_dim(
    word: str, sample_folder, monkeypatch
) -> None:
    app = make_app(sample_folder(*MERGE), "nocolor", monkeypatch)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        styles = styles_of(app, word)
        assert styles, f"{word!r} is not on the screen"
        for style in styles:
            assert style.bold or style.reverse, f"{word!r} drawn as {style}"
            assert not style.dim, f"{word!r} drawn dim: {style}"


async def test_the_cursor_row_keeps_its_verdict_readable(sample_folder) -> None:
    """The bug that started this: the cursor's background was the warning colour, and "chain noise"
    on the cursor row had a contrast of about 1:1."""
    app = ReviewerApp(sample_folder(*MERGE), color_system="256")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter", "down")
        await wait_until_loaded(pilot)
        assert styles_of(app, "chain noise")
        assert [problem for problem in low_contrast(app) if "chain" in problem.text] == []


@pytest.mark.parametrize("palette", list(APPS))
@pytest.mark.parametrize("presses", [0, 1, 6], ids=["clean row", "alarm row", "re-planned row"])
async def test_the_queue_cursor_shows_in_every_mode(presses: int, palette: str, monkeypatch) -> None:
    """The queue's cursor row, whatever the colours: it alone holds ▶, and its text is underlined or
    reversed (the background that tints it falls to black in 16 colours and goes with NO_COLOR)."""
    modes = APPS[palette]
    app = make_app(SAMPLES, modes[0], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press(*["down"] * presses)
        await wait_until_loaded(pilot)
        for mode in modes:
            rows = screen_segments(app, shown_in=shown_in(mode))
            marked = [index for index, line in enumerate(rows) if any("▶" in text for text, _, _ in line)]
            assert marked == [3 + presses], f"{mode}: ▶ on the cursor's row only (rows start on line 3)"
            words = [(text, style) for text, style, _ in rows[marked[0]] if style and text.strip("│ ")]
            assert words and all(style.underline or style.reverse for _, style in words), (mode, words)
            assert low_contrast(app, shown_in=shown_in(mode)) == [], mode


async def test_a_call_that_may_have_been_written_is_never_the_dimmest_text(tmp_path, monkeypatch) -> None:
    """`ok, unproven` (the server answered ok, nothing proved the API honoured the dry run) is bold in
    its row without colour, never italic alone nor dim: it is no less bright than the words around it."""
    import json

    call = {"tool": "update_ticket", "effect": "update", "args": {"id": "t1"}, "outcome": {"status": "ok"},
            "request": {"method": "PATCH", "path": "/v1/tickets/t1", "query": {"dryRun": "All"}}}  # fmt: skip
    document = proposal_document([call, call], proposal_id="unproven", dry_run={"via": "server"})
    (tmp_path / "unproven.json").write_text(json.dumps(document))
    app = make_app(tmp_path, "nocolor", monkeypatch)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        styles = styles_of(app, "ok, unproven")
        assert len(styles) >= 3, "both rows and the detail pane"
        for style in styles:
            assert style.bold and not style.dim, style


@pytest.mark.parametrize("palette", list(APPS))
async def test_the_verification_cursor_shows_in_every_mode(palette: str, tmp_path, monkeypatch) -> None:
    """The verification's cursor row, as the queue's: it alone holds ▶, its words underlined or
    reversed, in 16 colours and without colour too."""
    modes = APPS[palette]
    app = make_app(audited_merge_run(tmp_path / "proposals"), modes[0], monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        await pilot.press("v")
        await wait_until_loaded(pilot)
        await pilot.press("down")
        await wait_until_loaded(pilot)
        for mode in modes:
            rows = screen_segments(app, shown_in=shown_in(mode))
            marked = [index for index, line in enumerate(rows) if any("▶" in text for text, _, _ in line)]
            assert len(marked) == 1, f"{mode}: ▶ on the cursor's row only"
            assert "PATCH …ickets/t1" in "".join(text for text, _, _ in rows[marked[0]])
            words = [(text, style) for text, style, _ in rows[marked[0]] if style and text.strip("│ ")]
            assert words and all(style.underline or style.reverse for _, style in words), (mode, words)


@pytest.mark.parametrize("palette", list(APPS))
async def test_the_danger_column_reads_in_every_mode_at_a_phones_width(palette: str, monkeypatch) -> None:
    """At 50x20 every grade is readable (4.5:1 in truecolor, 256 and 16 colours) and bold; without
    colour a stop ("!!!") is reversed and a danger ("!!") underlined, so the two differ by more than
    their count of "!"."""
    modes = APPS[palette]
    app = make_app(SAMPLES, modes[0], monkeypatch)
    async with app.run_test(size=(50, 20)) as pilot:
        await wait_until_loaded(pilot)
        for mode in modes:
            assert low_contrast(app, shown_in=shown_in(mode)) == [], mode
        stop, danger = styles_of(app, "!!! kept"), styles_of(app, "!!  by fake")
        assert stop and danger
        assert all(style.bold and not style.dim for style in stop + danger)
        if palette == "no colour":
            assert all(style.reverse for style in stop) and all(style.underline for style in danger)
        else:
            assert {style.color for style in stop}.isdisjoint(style.color for style in danger)
