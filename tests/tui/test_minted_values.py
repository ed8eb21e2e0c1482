"""Snapshot of a plan that hard-codes the id its dry run's create answered: the docstring says what the
picture must show."""

from __future__ import annotations

import json
from pathlib import Path

from reviewer.tui.app import ReviewerApp
from tests.tui.helpers import SAMPLES
from tests.tui.test_snapshots import SERVER, open_first


def folder_with_hard_coded_id(folder: Path) -> Path:
    """The reference server dry run, its second call written with `tk-4` (the id the dry run's create
    answered) where the agent library records `<id from call 1>`."""
    document = json.loads((SAMPLES / SERVER).read_text())
    merge = document["calls"][1]
    merge["args"]["mergedInto"] = "tk-4"
    merge["request"]["body"]["mergedInto"] = "tk-4"
    folder.mkdir()
    (folder / SERVER).write_text(json.dumps(document, ensure_ascii=False))
    return folder


def test_review_flags_a_hard_coded_minted_id_and_reads_its_refusal_as_chain_noise(
    snap_compare, tmp_path
) -> None:
    """The red alarm banner leads with "call 2 (update_ticket) carries 'tk-4' at args.mergedInto, a
    value only the dry run minted (call 1's id): the real run would send it as written, to whatever
    holds it then"; row 2 (update t1, 422), selected, reads "chain noise" and "←#1" like row 3, and its
    detail shows `"mergedInto":"tk-4"` as written; only the delete's 409 is a real refusal."""
    app = ReviewerApp(folder_with_hard_coded_id(tmp_path / "proposals"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first("down"))
