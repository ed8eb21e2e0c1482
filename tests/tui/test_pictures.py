"""The pictures the README shows read as the terminal does: no two words joined across a column
boundary, in any renderer, for every sample's review at a phone's sizes and a desk's."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from rich.cells import cell_len

from reviewer.tui.app import ReviewerApp
from screenshots.regenerate import place_runs
from tests.tui.helpers import SAMPLES, wait_until_loaded

pytestmark = pytest.mark.anyio

_RUN = re.compile(
    r'<text class="[^"]*" x="([\d.]+)" y="[\d.]+" textLength="([\d.]+)" '
    r'clip-path="url\(#terminal-(?:\d+-)?line-(\d+)\)">([^<]*)</text>'
)


def drawn_lines(svg: str, *, trimmed: bool) -> list[str]:
    """The SVG's lines as a renderer draws them: each run at its x; `trimmed`, as librsvg does, with
    the spaces at its edges dropped, so its first letter lands where its first space was."""
    runs = [
        (float(x), float(length), int(line), html.unescape(text))
        for x, length, line, text in _RUN.findall(svg)
    ]
    cell = min(length / len(text) for _, length, _, text in runs if text and text.isascii())
    lines: dict[int, list[str]] = {}
    for x, _, line, text in runs:
        text = text.replace("\xa0", " ")
        if trimmed:
            text = text.strip(" ")
        row = lines.setdefault(line, [])
        column = round(x / cell)
        for character in text:
            row.extend(" " * (column - len(row) + 1))
            row[column] = character
            column += cell_len(character)
    return ["".join(lines[line]).rstrip() for line in sorted(lines)]


def joined_words(svg: str) -> list[tuple[str, str]]:
    """Each line a trimming renderer draws otherwise than the terminal's own cells, with that line."""
    return [
        (terminal, trimmed)
        for terminal, trimmed in zip(
            drawn_lines(svg, trimmed=False), drawn_lines(svg, trimmed=True), strict=True
        )
        if terminal.split() != trimmed.split()
    ]


async def every_review(size: tuple[int, int], folder: Path = SAMPLES) -> list[tuple[str, str]]:
    """The queue and each sample's review screen, as SVGs of the app at `size`."""
    pictures = []
    app = ReviewerApp(folder)
    async with app.run_test(size=size) as pilot:
        await wait_until_loaded(pilot)
        pictures.append(("queue", app.export_screenshot()))
        for proposal_id in list(app.items):
            app.push_screen(app.create_review_screen(app.items[proposal_id]))
            await wait_until_loaded(pilot)
            pictures.append((proposal_id, app.export_screenshot()))
            await pilot.press("escape")
            await wait_until_loaded(pilot)
    return pictures


@pytest.mark.parametrize("size", [(50, 20), (80, 24), (120, 30)], ids=lambda s: "x".join(map(str, s)))
async def test_no_words_join_across_a_column_boundary_in_the_pictures(size: tuple[int, int]) -> None:
    """Every rendered row of every sample (the queue, each review), as the README's pictures are
    written (`place_runs`): a renderer that trims each run's edges draws the same words as the
    terminal's cells. Before, librsvg drew `deleteDELETE /v1/tickets/…`, `delete t3task:` and
    `#1 create_ticketcreate`."""
    pictures = await every_review(size)
    assert len(pictures) > 9
    for name, svg in pictures:
        assert joined_words(place_runs(svg)) == [], name


async def test_the_terminals_own_svg_joins_words_in_a_trimming_renderer(sample_folder) -> None:
    """The check can fail: the SVG as Textual writes it joins the effect and call columns of the
    reference scenario's delete in a renderer that trims runs."""
    pictures = dict(await every_review((100, 30), sample_folder("deskline-merge.server.json")))
    joined = joined_words(pictures["deskline-merge-0042-server"])
    assert any(
        "deleteDELETE" in trimmed.replace(" ", "") and "delete DELETE" in terminal
        for terminal, trimmed in joined
    )
