"""`tools/walk.py`: the walk of one submission through the queue's code stays as short as measured.

The figures the walk is held to are those docs/design.md, "The walk of a submission" shows: a change
that reads the plan a second time, or sends the submission back and forth between more modules, fails
here and says by how much.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tools.walk import Layers, by_package

PROJECT = Path(__file__).resolve().parent.parent
MEASURED = {
    "module": {"stays": 277, "rooms": 38, "climbs": 115},
    "package": {"stays": 190, "rooms": 7, "climbs": 89},
}
"""The walk's figures at each grain when it was measured: no more stays and climbs back up than these."""


@pytest.fixture(scope="module")
def walk() -> dict[str, Any]:
    environment = dict(os.environ, PYTHONPATH=str(PROJECT))
    done = subprocess.run(
        [sys.executable, str(PROJECT / "tools" / "walk.py"), "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=environment,
    )
    drawn: dict[str, Any] = json.loads(done.stdout)
    return drawn


def test_the_plan_is_parsed_and_read_once_per_submission(walk: dict[str, Any]) -> None:
    calls = walk["calls"]
    assert calls["reviewer.plan.proposal.scan_proposal"] == 1
    assert calls["reviewer.reading.analysis.Analysis.__init__"] == 1
    assert calls["reviewer.reading.summary.read_plan"] == 1
    assert calls["reviewer.reading.totals.plan_money"] == 1  # the totals and the negative amounts in one walk


def test_the_policy_is_asked_once_and_its_history_read_on_each_side_of_the_write_lock(
    walk: dict[str, Any],
) -> None:
    calls = walk["calls"]
    assert calls["reviewer.service.store.decisions.evaluate_policy"] == 1
    assert calls["reviewer.service.store.decisions.changes_requested_before"] == 2
    assert walk["entries"]["reviewer.service.store.decisions"] <= 4


def test_the_walk_climbs_back_up_no_more_than_measured(walk: dict[str, Any]) -> None:
    stays = walk["stays"]
    assert stays[0] == "reviewer.service.app"
    assert walk["entries"]["reviewer.service.routes.proposals"] == 1
    assert walk["rooms"] == len(set(stays))
    assert all(before != after for before, after in zip(stays, stays[1:], strict=False))
    for grain, measured in MEASURED.items():
        seen = walk["grains"][grain]
        for figure in ("stays", "climbs"):
            assert seen[figure] <= measured[figure], (
                f"by {grain}: {seen[figure]} {figure}, measured {measured}"
            )


def test_by_package_a_room_is_a_package_and_a_stay_a_run_inside_one(walk: dict[str, Any]) -> None:
    packages = by_package(walk["stays"])
    assert packages[:4] == [
        "reviewer.service",
        "reviewer.service.store",
        "reviewer.service",
        "reviewer.service.routes",
    ]
    assert {"reviewer.policy", "reviewer.reading", "reviewer.plan", "reviewer.trail"} <= set(packages)
    assert all(before != after for before, after in zip(packages, packages[1:], strict=False))
    package, module = walk["grains"]["package"], walk["grains"]["module"]
    assert (package["stays"], package["rooms"]) == (len(packages), len(set(packages)))
    assert module == {"stays": len(walk["stays"]), "rooms": walk["rooms"], "climbs": len(walk["climbs"])}


def test_the_design_page_gives_the_figures_measured() -> None:
    page = " ".join((PROJECT / "docs" / "design.md").read_text().split())
    module, package = MEASURED["module"], MEASURED["package"]
    assert (
        f"By module the walk is {module['stays']} stays in {module['rooms']} rooms with "
        f"{module['climbs']} climbs back up; by package, {package['stays']} stays in "
        f"{package['rooms']} rooms with {package['climbs']} climbs."
    ) in page


def test_a_climb_is_judged_by_the_contract_that_tells_two_modules_apart(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        """
[[tool.importlinter.contracts]]
name = "outer"
type = "forbidden"
source_modules = ["top"]
forbidden_modules = ["bottom"]

[[tool.importlinter.contracts]]
name = "outer layers"
type = "layers"
layers = ["top", "middle | side", "bottom"]

[[tool.importlinter.contracts]]
name = "inside the middle"
type = "layers"
layers = ["middle.upper", "middle.lower"]
"""
    )
    layers = Layers(pyproject)
    assert layers.climbs("bottom", "middle")
    assert layers.climbs("bottom.deep.module", "top.app")  # a module no layer names is its package's
    assert not layers.climbs("top", "bottom")
    assert not layers.climbs("middle", "side")  # one layer
    assert layers.climbs("middle.lower", "middle.upper")  # told apart by the inner contract
    assert not layers.climbs("middle.upper.part", "middle.lower")
    assert not layers.climbs("elsewhere", "top")  # in no contract: nothing to judge
