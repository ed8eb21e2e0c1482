"""DriftRows: the merged rows of a drift view put each removed call back where it stood."""

from __future__ import annotations

from reviewer.reading.analysis import Analysis
from reviewer.reading.drift import diff_revisions
from reviewer.tui.model.sources import read_proposal_file
from reviewer.tui.screens.drift import DriftRows
from tests.tui.helpers import SAMPLES


def triage_rows() -> DriftRows:
    old = read_proposal_file(SAMPLES / "deskline-triage.rev1.json")
    new = read_proposal_file(SAMPLES / "deskline-triage.rev2.json")
    return DriftRows(Analysis(old), Analysis(new), diff_revisions(old, new))


def test_every_new_row_and_every_removed_row_appears_once() -> None:
    rows = triage_rows()
    located = [rows.locate(index) for index in range(len(rows))]
    assert sorted(i for side, i in located if side == "new") == list(range(len(rows.new)))
    assert [i for side, i in located if side == "old"] == list(rows.drift.removed)


def test_marks_follow_the_drift() -> None:
    rows = triage_rows()
    marks = [rows.mark(index) for index in range(len(rows))]
    assert marks.count("added") == len(rows.drift.added) == 1
    assert marks.count("removed") == len(rows.drift.removed) == 1
    assert marks.count("changed") == len(rows.drift.changed) == 1


def test_a_removed_row_stands_before_the_new_row_that_followed_it() -> None:
    rows = triage_rows()
    removed_at = next(index for index in range(len(rows)) if rows.mark(index) == "removed")
    (position,) = rows.drift.removed_positions
    if position < len(rows.new):
        assert rows.locate(removed_at + 1) == ("new", position)
    else:
        assert removed_at == len(rows) - 1
