"""Draw the walk of one submission through the queue service's code: which modules of `reviewer` a
`POST /v1/proposals` passes through, in order, from its arrival at the service to its answer.

    python tools/walk.py                     the walk, its figures, the modules entered most often
    python tools/walk.py --json              the same as JSON (tests/test_walk_tool.py reads it)
    python tools/walk.py --sample FILE.json  another proposal (the default is a production delete)
    python tools/walk.py --layers PYPROJECT  climbs judged by another tree's contracts
    python tools/walk.py --grain package     the walk a package a room, as a maintainer reads the house

The service runs in this process (the app factory, FastAPI's TestClient, an SQLite file in a
temporary folder, a fixed clock) under the policy `docs/policies.md` opens with: production with its
reviewers, and a rule that asks two approvals of a delete there. The policy is evaluated in this
process, where `reviewer serve` hands it to worker processes, so the walk shows the rules' modules.
One agent submits the sample twice under two ids: the first warms what is read once per process
(lazy imports, caches); the second is walked.

A profiler (`sys.setprofile`, and `threading.setprofile` for the worker threads the routes hand the
store to) watches only that request: a context variable set at the app's door is inherited by the
request's tasks and threads, and the queue's own background threads never carry it. Every call into
a function of `reviewer` and every return to one moves the walk to that function's module; calls and
returns outside `reviewer` leave it where it is.

- a **stay** is a run of consecutive moves inside one module (A, then B, then A again are three);
- a **room** is a distinct module visited;
- at the coarser grain (`--grain package`) a room is a package (`reviewer.policy`,
  `reviewer.service.store`, `reviewer.reading`): the module walk with each module read as the package
  it belongs to (a package's `__init__` as the package itself), and a stay a run inside one package;
- a **climb** is a move to a module in a higher layer of the `layers` contracts in `pyproject.toml`
  (of the tree whose `reviewer` is imported, or the file `--layers` names, to judge two trees by one
  contract). A module no layer names is its package's; two modules one contract puts in the same
  layer are judged by the next contract that tells them apart.

Nothing in the walk depends on timing, so two runs on one tree print the same. The closing lines give
both grains' figures, whichever is drawn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import importlib
import json
import sys
import tempfile
import threading
import tomllib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
DEFAULT_SAMPLE = PROJECT / "sample_proposals" / "k8s-shop-scale-down.server.json"
FIXED_NOW = 1_780_000_000.0
"""A Thursday in May 2026, 10:26 UTC: the walk never depends on the day it is drawn."""

POLICY = """
[default]
approvals = 1

[environments.production]
base_urls = ["https://api.prod.example/*", "https://*.k8s.prod.example:6443/*"]
approvals = 1
signatures = true
reviewers = ["alice", "bob", "sre-*"]

[environments.staging]
base_urls = ["https://api.staging.example/*"]
allow_policy_approval = true

[[rules]]
name = "deletes in production"
when = 'environment == "production" && plan.counts.destructive > 0'
approvals = 2

[[rules]]
name = "kept writes"
when = "plan.dry_run.writes_kept > 0"
reject = "the API ignored the dry-run flag; fix the tool before asking a human"

[[rules]]
name = "one staging ticket"
when = 'environment == "staging" && size(plan.calls) == 1 && plan.calls.all(c, c.tool == "create_ticket")'
approve = true
"""
"""The policy `docs/policies.md` opens with, without the escalation and change windows it later
gained: the same file on every tree a walk is compared across."""

WALKING: contextvars.ContextVar[bool] = contextvars.ContextVar("walking", default=False)
RESUMABLE = 0x20 | 0x80 | 0x100 | 0x200
"""CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR: code whose frame the
profiler sees entered again at each resumption, where only the first entry is a call."""
LOOP_CALLBACK = asyncio.Handle._run.__code__


class Layers:
    """Every `layers` contract of a `pyproject.toml`, in the file's order, as a module-to-layer map."""

    def __init__(self, pyproject: Path) -> None:
        contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
        self.contracts: list[dict[str, int]] = []
        for contract in contracts:
            if contract.get("type") != "layers":
                continue
            names = {}
            for height, layer in enumerate(contract["layers"]):
                for name in layer.split("|"):
                    names[name.strip()] = height
            self.contracts.append(names)

    @staticmethod
    def _layer(names: dict[str, int], module: str) -> int | None:
        """The layer of `module` in one contract: its own, else its nearest listed package's."""
        parts = module.split(".")
        for end in range(len(parts), 0, -1):
            height = names.get(".".join(parts[:end]))
            if height is not None:
                return height
        return None

    def climbs(self, origin: str, destination: str) -> bool:
        """Whether moving from `origin` to `destination` goes up a layer (layers are listed top first)."""
        for names in self.contracts:
            below, above = self._layer(names, origin), self._layer(names, destination)
            if below is not None and above is not None and below != above:
                return above < below
        return False


@dataclass
class Walk:
    """What the profiler saw of one request: the stays in order and every function called."""

    stays: list[str] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    resumable: set[FrameType] = field(default_factory=set)

    def profile(self, frame: FrameType, event: str, _arg: object) -> None:
        if event != "call" or not WALKING.get():
            return
        module = frame.f_globals.get("__name__", "")
        if not _ours(module):
            return
        if frame.f_code.co_flags & RESUMABLE:
            if frame in self.resumable:
                return  # a coroutine or generator resumed, not called
            self.resumable.add(frame)
        elif frame.f_back is not None and frame.f_back.f_code is LOOP_CALLBACK:
            return  # handed to the event loop from a worker thread: when it runs is timing
        self.calls[f"{module}.{frame.f_code.co_qualname}"] += 1
        if not self.stays or self.stays[-1] != module:
            self.stays.append(module)


def _ours(module: str) -> bool:
    return module == "reviewer" or module.startswith("reviewer.")


def walked(sample: Path) -> tuple[Walk, int]:
    """The walk of one submission of `sample`, and the status the queue answered it with."""
    from fastapi.testclient import TestClient

    from reviewer.policy.file import parse_policy
    from reviewer.service.app import create_app
    from reviewer.service.auth import hash_token, mint_token
    from reviewer.service.store.opener import open_store

    proposal = json.loads(sample.read_text())
    warm_up = dict(proposal, proposal_id=f"{proposal['proposal_id']}-warm-up")
    walk = Walk()
    with tempfile.TemporaryDirectory(prefix="walk-") as folder:
        store = open_store(
            Path(folder) / "queue.db",
            clock=lambda: FIXED_NOW,
            pending_ttl=86_400.0,
            approval_ttl=3_600.0,
            policy=parse_policy(POLICY),
            create=True,
        )
        token = mint_token()
        store.create_token("walk-agent", "agent", hash_token(token))
        app = create_app(None, store=store, clock=lambda: FIXED_NOW)

        async def door(scope: Any, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
            walking = WALKING.set(scope["type"] == "http" and scope["path"] == "/v1/proposals" and armed)
            try:
                await app(scope, receive, send)
            finally:
                WALKING.reset(walking)

        armed = False
        headers = {"Authorization": f"Bearer {token}"}
        threading.setprofile(walk.profile)
        sys.setprofile(walk.profile)
        try:
            with TestClient(door) as client:
                client.post("/v1/proposals", json=warm_up, headers=headers).raise_for_status()
                armed = True
                status = client.post("/v1/proposals", json=proposal, headers=headers).status_code
                armed = False
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
    walk.resumable.clear()  # the frames of a finished request, held only to tell a call from a resumption
    return walk, status


GRAINS = ("module", "package")


def package_of(module: str) -> str:
    """The package a module of `reviewer` belongs to: a package's own `__init__` is the package."""
    return importlib.import_module(module).__package__ or module


def by_package(stays: Sequence[str]) -> list[str]:
    """The walk a package a room: each module read as its package, a run inside one package one stay."""
    packages: list[str] = []
    for module in stays:
        package = package_of(module)
        if not packages or packages[-1] != package:
            packages.append(package)
    return packages


def figures(stays: Sequence[str], layers: Layers) -> dict[str, Any]:
    """The stays, the climbs back up among them (by index), the rooms and how often each was entered."""
    climbs = [index for index in range(1, len(stays)) if layers.climbs(stays[index - 1], stays[index])]
    entries = Counter(stays)
    return {
        "stays": list(stays),
        "climbs": climbs,
        "rooms": len(entries),
        "entries": dict(entries.most_common()),
    }


def counted(drawn: dict[str, Any]) -> dict[str, int]:
    """A walk's figures as three numbers: stays, rooms, climbs back up."""
    return {"stays": len(drawn["stays"]), "rooms": drawn["rooms"], "climbs": len(drawn["climbs"])}


def summary(counts: dict[str, int]) -> str:
    return f"{counts['stays']} stays in {counts['rooms']} rooms with {counts['climbs']} climbs back up"


def back_and_forth(stays: Sequence[str], start: int) -> int:
    """Where the alternation of two rooms that starts at `start` (A, B, A, B, ...) ends."""
    end = start + 2
    while end < len(stays) and stays[end] == stays[end - 2]:
        end += 1
    return min(end, len(stays))


def printed(drawn: dict[str, Any], sample: str, most: int = 6) -> str:
    """The walk one stay a line, a back-and-forth between two rooms (A, B, A, B, ...) on one line
    with its count of stays, then both grains' figures."""
    stays, climbs = drawn["stays"], set(drawn["climbs"])
    lines = [f"POST /v1/proposals ({sample}): the walk by {drawn['grain']}, ^ a climb back up", ""]
    index = 0
    while index < len(stays):
        end = back_and_forth(stays, index)
        if end - index >= 4:
            up = len(climbs.intersection(range(index, end)))
            pair = f"{_short(stays[index])} <-> {_short(stays[index + 1])}"
            lines.append(f"{index + 1:3}   {pair}: {end - index} stays, {up} climb{'' if up == 1 else 's'}")
        else:
            end = index + 1
            lines.append(f"{index + 1:3} {'^' if index in climbs else ' '} {_short(stays[index])}")
        index = end
    lines.append("")
    lines.extend(f"by {grain}: {summary(drawn['grains'][grain])}" for grain in GRAINS)
    often = list(drawn["entries"].items())[:most]
    lines.append("entered most often: " + ", ".join(f"{_short(name)} {n}" for name, n in often))
    return "\n".join(lines)


def _short(module: str) -> str:
    return module.removeprefix("reviewer.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sample", type=Path, default=DEFAULT_SAMPLE, help="the proposal file to submit")
    parser.add_argument("--json", action="store_true", help="print the walk and its figures as JSON")
    parser.add_argument(
        "--grain", choices=GRAINS, default="module", help="a room is a module (the default) or a package"
    )
    parser.add_argument(
        "--layers",
        type=Path,
        metavar="PYPROJECT",
        help="judge climbs by this pyproject.toml's contracts (default: the walked tree's own)",
    )
    args = parser.parse_args(argv)
    import reviewer

    layers = Layers(args.layers or Path(reviewer.__file__).resolve().parent.parent / "pyproject.toml")
    walk, status = walked(args.sample)
    if status != 201:
        print(f"walk: the queue answered the submission {status}, not 201: nothing to draw", file=sys.stderr)
        return 1
    grains = {"module": figures(walk.stays, layers), "package": figures(by_package(walk.stays), layers)}
    drawn = {
        **grains[args.grain],
        "grain": args.grain,
        "grains": {grain: counted(seen) for grain, seen in grains.items()},
        "calls": dict(sorted(walk.calls.items())),
    }
    print(json.dumps(drawn, indent=2) if args.json else printed(drawn, args.sample.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
