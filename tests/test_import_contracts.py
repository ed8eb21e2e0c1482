"""Every module of `reviewer` is under an import contract: a new file is covered the day it is written."""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path
from typing import Any

import reviewer

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
MODULES = sorted(module.name for module in pkgutil.walk_packages(reviewer.__path__, "reviewer."))
TOP_LEVEL = {name for name in MODULES if name.count(".") == 1}
LAYERS = "Data flows one way: the apps above the parts they use, the plan format at the bottom"
OMITTED = {
    "Only the terminal app imports Textual": {"reviewer.__main__", "reviewer.tui"},
    "Frameworks stay in their adapters: the core install imports none of them": {
        "reviewer.__main__",
        "reviewer.adapters",
    },
    "The MCP SDK stays in the MCP adapter and mcp-gate": {"reviewer.__main__", "reviewer.mcp_gate"},
    "Apprise stays in the chat sender": set(),
}
"""What each forbidden contract leaves out on purpose: the part allowed to import what it forbids,
and the command line above everything."""


def contracts() -> dict[str, dict[str, Any]]:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    return {contract["name"]: contract for contract in config["tool"]["importlinter"]["contracts"]}


def checked_by(contract: dict[str, Any]) -> set[str]:
    """The modules whose imports a contract checks: its sources, or every module of its layers."""
    layers = [name.strip() for layer in contract.get("layers", []) for name in layer.split("|")]
    return {*contract.get("source_modules", []), *layers}


def covered(module: str, names: set[str]) -> bool:
    """A module is covered when a contract names it or a package above it."""
    return any(module == name or module.startswith(name + ".") for name in names)


def test_every_module_is_in_some_contract() -> None:
    names = set().union(*(checked_by(contract) for contract in contracts().values()))
    assert [module for module in MODULES if not covered(module, names)] == []


def test_the_layers_contract_covers_every_module() -> None:
    names = checked_by(contracts()[LAYERS])
    assert [module for module in MODULES if not covered(module, names)] == []


def test_each_forbidden_contract_leaves_out_only_what_it_means_to() -> None:
    for name, omitted in OMITTED.items():
        assert TOP_LEVEL - checked_by(contracts()[name]) == omitted, name


def test_every_name_a_contract_lists_is_a_module_of_the_tree() -> None:
    """A contract naming a module that was moved or renamed checks nothing; lint-imports may not say so."""
    names = set().union(*(checked_by(contract) for contract in contracts().values()))
    assert sorted(name for name in names if name not in MODULES) == []


def test_each_import_a_contract_ignores_is_made_by_a_module_of_the_tree() -> None:
    """The one exception a forbidden contract allows (the chat sender's Apprise, the MCP adapter's SDK)
    names a module that exists: a stale exception would hide nothing and say something false."""
    importers = {
        line.partition("->")[0].strip()
        for contract in contracts().values()
        for line in contract.get("ignore_imports", [])
    }
    assert importers and sorted(importers - set(MODULES)) == []


def test_every_forbidden_contract_is_checked_for_what_it_leaves_out() -> None:
    """A forbidden contract this test does not know could leave a package out unseen."""
    forbidden = {name for name, contract in contracts().items() if contract["type"] == "forbidden"}
    assert forbidden - {"The terminal app's data model imports no Textual"} == set(OMITTED)


def test_the_walk_sees_the_deepest_modules() -> None:
    """The coverage above would pass on a walk that found nothing: it finds modules three levels down."""
    assert "reviewer.service.routes.decisions" in MODULES
    assert "reviewer.tui.model.sources" in MODULES
    assert len(TOP_LEVEL) >= 10
