"""`reviewer policy check FILE` and `reviewer policy explain FILE PROPOSAL...`: a policy tested like code.

`check` compiles every rule and prints what it loaded, or every mistake on its own line (exit 2),
then what each rule costs on the largest plan the queue accepts (made up here), warning of a rule
that cannot finish within the queue's deadline; `explain` prints, for each proposal file, the
environment whose rule applies and why, the rules that match and what they ask, so a team can hold
its policy to the bundled samples in CI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from reviewer.policy.expressions import DEFAULT_DEADLINE

if TYPE_CHECKING:
    from reviewer.policy.file import Policy

LARGEST_PLAN: Final = 200_000
"""The calls of the largest plan the queue accepts (`reviewer.plan.proposal.MAX_CALLS`)."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `policy check` and `policy explain` to the `reviewer` command line."""
    policy = subparsers.add_parser(
        "policy", help="test a queue policy file", description="Test a queue policy before it serves."
    )
    commands = policy.add_subparsers(title="policy commands", metavar="COMMAND", required=True)
    check = commands.add_parser("check", help="compile every rule; report each mistake with its line")
    check.add_argument("file", type=Path, metavar="FILE")
    check.add_argument(
        "--deadline",
        type=float,
        default=DEFAULT_DEADLINE,
        metavar="SECONDS",
        help="the queue's --policy-deadline, to time each rule against (default: %(default)g)",
    )
    check.add_argument(
        "--calls",
        type=int,
        default=LARGEST_PLAN,
        metavar="N",
        help="time each rule on a made-up plan of N calls (default: %(default)s, the largest the queue "
        "accepts; 0: do not time the rules)",
    )
    check.set_defaults(func=run_check)
    explain = commands.add_parser("explain", help="which rules match these proposals and what they ask")
    explain.add_argument("file", type=Path, metavar="FILE")
    explain.add_argument("proposals", type=Path, nargs="+", metavar="PROPOSAL")
    explain.set_defaults(func=run_explain)


def run_check(args: argparse.Namespace) -> int:
    policy = _read_policy(args.file, "reviewer policy check")
    if policy is None:
        return 2
    for line in policy.describe():
        print(line)
    _print_openings(policy)
    if not policy.has_default:
        print(f"{args.file}: no [default]: a plan of no listed environment needs 1 approval from anyone")
    if policy.rules and args.calls > 0:
        _print_costs(args.file, policy, args.calls, args.deadline)
    return 0


def _print_openings(policy: Policy) -> None:
    """When each environment with change windows may run plans: now (until when), and its next openings."""
    from datetime import UTC, datetime

    from reviewer.policy.windows import next_openings, standing, when

    now = datetime.now(UTC)
    for environment in policy.environments.values():
        if not environment.windows:
            continue
        current = standing(environment.windows, now)
        if current.open:
            until = "" if current.runs_until is None else f" until {when(current.runs_until)}"
            said = f"plans may run now{until}"
        else:
            said = f"plans may not run now ({current.window})"
        openings = next_openings(environment.windows, now)
        listed = ", ".join(when(opening) for opening in openings) or "none within the next 400 days"
        print(f"[environments.{environment.name}] {said}; next openings: {listed}")


def _read_policy(file: Path, command: str) -> Policy | None:
    """The policy in `file`, or None once each of its mistakes is printed on its own line."""
    from reviewer.policy.file import PolicyError, read_policy

    try:
        return read_policy(file)
    except PolicyError as error:
        for mistake in error.mistakes:
            print(f"{command}: {mistake}", file=sys.stderr)
        return None


def _print_costs(file: Path, policy: Policy, calls: int, deadline: float) -> None:
    """Each rule's time on a made-up plan of `calls` calls, in a worker as the queue evaluates."""
    from reviewer.policy.bounded import rule_costs

    costs, values = rule_costs(policy, made_up_plan(calls), deadline)
    made = "did not finish" if values is None else f"{values:.2f} s"
    print(f"cost on a made-up plan of {calls:,} calls, deadline {deadline:g} s: the plan's values {made}")
    for rule, seconds in zip(policy.rules, costs, strict=True):
        if seconds is not None:
            print(f"  rule {rule.name!r}: {seconds:.2f} s")
            continue
        print(
            f"reviewer policy check: {file}: warning: rule {rule.name!r} did not finish within the "
            f"{deadline:g} s deadline on {calls:,} calls; the queue would ask at least what it asks "
            "of every such plan",
            file=sys.stderr,
        )


def made_up_plan(calls: int) -> bytes:
    """A proposal of `calls` calls of every effect, with a request and a few arguments each: the
    shape rules read (`plan.calls`, `c.args`, `c.path`), at the size the queue may be sent."""
    import msgspec

    effects = ("create", "update", "delete", "read", "other")
    document = {
        "format": "reviewer.proposal/v1",
        "proposal_id": "made-up-largest-plan",
        "revision": 1,
        "title": "the largest plan the queue accepts",
        "agent": {"name": "policy-check"},
        "created_at": "2026-01-01T00:00:00Z",
        "target": {"api": "made-up", "base_url": "https://api.example/v1"},
        "dry_run": {"via": "server", "write_requests": calls, "writes_kept": 0},
        "calls": [
            {
                "seq": seq,
                "tool": f"tool_{seq % 7}",
                "effect": effects[seq % len(effects)],
                "args": {"id": f"id-{seq}", "amount_cents": seq % 9000, "currency": "EUR", "note": "made up"},
                "request": {"method": "POST", "path": f"/v1/things/{seq}"},
            }
            for seq in range(1, calls + 1)
        ],
    }
    return msgspec.json.encode(document)


def run_explain(args: argparse.Namespace) -> int:
    from reviewer.plan.proposal import ProposalError, parse_proposal
    from reviewer.plan.sanitize import safe_text
    from reviewer.policy.verdict import evaluate

    policy = _read_policy(args.file, "reviewer policy explain")
    if policy is None:
        return 2
    status = 0
    for path in args.proposals:
        try:
            proposal = parse_proposal(path.read_bytes(), str(path))
        except OSError as error:
            print(f"reviewer policy explain: cannot read {path}: {error.strerror}", file=sys.stderr)
            status = 1
            continue
        except ProposalError as error:
            print(f"reviewer policy explain: {error}", file=sys.stderr)
            status = 1
            continue
        verdict = evaluate(policy, proposal, signing=True)
        print(f"{path.name}: {safe_text(verdict.summary())}")
        for match in verdict.matched:
            failed = f" (failed: {safe_text(match.error)})" if match.error else ""
            print(f"  rule {safe_text(match.rule)!r}: {safe_text(match.asks)}{failed}")
        for _name, sentence in verdict.alarms:
            print(f"  alarm: {safe_text(sentence)}")
    return status
