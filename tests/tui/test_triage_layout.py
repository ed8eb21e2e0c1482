"""What each width keeps: a plan row's method and the end of its path, the queue's host whole on a
wide terminal, a long id's start in a phone's chrome, and every verdict in the help."""

from __future__ import annotations

from pathlib import Path

import pytest

from reviewer.plan.proposal import parse_proposal
from reviewer.reading.analysis import Analysis, Verdict
from reviewer.tui.screens.dialogs import VERDICT_HELP
from reviewer.tui.screens.queue import LIVE_COLUMNS, QUEUE_COLUMNS, TITLE_WIDE, fit_columns
from reviewer.tui.widgets.chrome import id_part
from reviewer.tui.widgets.plan_view import PlanView, call_cell

SAMPLES = Path(__file__).resolve().parents[2] / "reviewer" / "sample_proposals"


def kubernetes() -> Analysis:
    return Analysis(parse_proposal((SAMPLES / "k8s-shop-scale-down.server.json").read_bytes(), "k8s"))


def test_the_help_lists_every_verdict() -> None:
    """`ok, unproven` among them: the verdict a server's unproven ok gets, drawn bold amber."""
    listed = {name for name, _meaning in VERDICT_HELP}
    assert {str(verdict) for verdict in Verdict} <= listed


@pytest.mark.parametrize("width", [44, 56, 70, 76, 90, 120, 196])
def test_a_row_keeps_its_method_and_the_end_of_its_path(width: int) -> None:
    """Six scale calls to six deployments read apart at every width: each call cell ends with its
    deployment's name and `/scale`, after its method; the columns fill the width exactly."""
    analysis = kubernetes()
    view = PlanView(analysis)
    layout = view._layout(width)
    cells = dict((column.header, cells) for column, cells in layout)
    shown = [
        call_cell(analysis.row(index), cells["call"], tool_shown="tool" in cells, args_shown="args" in cells)
        for index in range(6)
    ]
    names = ["checkout", "cart", "search", "recommendations", "payments", "catalog"]
    for cell, name in zip(shown, names, strict=True):
        assert cell.startswith("PATCH ") and len(cell) == cells["call"], (width, cell)
        path_part = cell.rstrip().split("  ")[0]
        assert path_part.endswith("/scale") and (name[-3:] in path_part or width >= 120), (width, cell)
    assert sum(cells.values()) + len(layout) <= width


def test_at_200_columns_a_path_reads_whole() -> None:
    analysis = kubernetes()
    cells = dict((column.header, cells) for column, cells in PlanView(analysis)._layout(196))
    assert cells["call"] >= len("PATCH /apis/apps/v1/namespaces/shop/deployments/recommendations/scale")
    assert cells["tool"] >= len("delete_persistent_volume")


@pytest.mark.parametrize("columns", [QUEUE_COLUMNS, LIVE_COLUMNS], ids=["demo", "live"])
def test_the_queue_host_widens_on_a_wide_terminal(columns) -> None:
    """At 200 columns the host column holds `k8s-prod-eu1.internal.example:6443` whole (it was cut at
    20 cells); at 100 it keeps its 20, and the title its room."""
    wide = {column.key: column.width for column in fit_columns(columns, 200)}
    assert wide["host"] >= len("k8s-prod-eu1.internal.example:6443") and wide["title"] >= TITLE_WIDE
    assert {column.key: column.width for column in fit_columns(columns, 100)}.get("host", 20) == 20


def test_a_phone_chrome_keeps_a_generated_id_whole_and_a_long_ids_start() -> None:
    assert id_part("k3j5x2qa7m-merge-t1-and") == ("k3j5x2qa7m-merge-t1-and", "bold")
    long_id = "merge-t1-and-t2-into-a-new-ticket-delete-t3-4f741731"
    assert id_part(long_id) == (long_id, "bold", "merge-t1-and-t2-into-a-…")
