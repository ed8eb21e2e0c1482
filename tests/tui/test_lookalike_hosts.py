"""Snapshots of a base URL whose host is not what it seems: each docstring says what the picture must show."""

from __future__ import annotations

import json
from pathlib import Path

from reviewer.tui.app import ReviewerApp
from tests.tui.helpers import SAMPLES
from tests.tui.test_snapshots import SERVER, open_first


def folder_with_base_url(folder: Path, base_url: str) -> Path:
    """The reference server dry run, its target's base URL replaced."""
    document = json.loads((SAMPLES / SERVER).read_text())
    document["target"]["base_url"] = base_url
    folder.mkdir()
    (folder / SERVER).write_text(json.dumps(document, ensure_ascii=False))
    return folder


def test_review_shows_a_cyrillic_host_as_it_will_be_resolved(snap_compare, tmp_path) -> None:
    """`https://dеskline.staging.example` with a Cyrillic е: the claim pane's "runs on" line shows
    the host as it will be resolved, `https://xn--dskline-7gg.staging.example`, then "(written
    dеskline.staging.example)" in red; the red alarm banner leads with "the base URL is not what it
    seems: requests go to xn--dskline-7gg.staging.example", before "1 real refusal"."""
    app = ReviewerApp(folder_with_base_url(tmp_path / "proposals", "https://d\u0435skline.staging.example"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first())


def test_approve_confirmation_names_the_host_behind_userinfo(snap_compare, tmp_path) -> None:
    """`http://deskline.staging.example@evil.example/v1`, then a: the approve dialog's "runs on"
    line names `http://evil.example/v1`, and the line under it, in red, says "! base URL:
    'deskline.staging.example' before the @ is not the host: requests go to evil.example"; under
    the counts the alarms lead with "! the base URL is not what it seems: requests go to
    evil.example"."""
    base_url = "http://deskline.staging.example@evil.example/v1"
    app = ReviewerApp(folder_with_base_url(tmp_path / "proposals", base_url))
    assert snap_compare(app, terminal_size=(100, 30), run_before=open_first("a"))
