"""`reviewer policy check FILE` and `reviewer policy explain FILE PROPOSAL...`: a policy tested like code.

`check` compiles every rule and prints what it loaded, or every mistake on its own line (exit 2);
`explain` prints, for each proposal file, the environment whose rule applies and why, the rules that
match and what they ask, so a team can hold its policy to the bundled samples in CI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `policy check` and `policy explain` to the `reviewer` command line."""
    policy = subparsers.add_parser(
        "policy", help="test a queue policy file", description="Test a queue policy before it serves."
    )
    commands = policy.add_subparsers(title="policy commands", metavar="COMMAND", required=True)
    check = commands.add_parser("check", help="compile every rule; report each mistake with its line")
    check.add_argument("file", type=Path, metavar="FILE")
    check.set_defaults(func=run_check)
    explain = commands.add_parser("explain", help="which rules match these proposals and what they ask")
    explain.add_argument("file", type=Path, metavar="FILE")
    explain.add_argument("proposals", type=Path, nargs="+", metavar="PROPOSAL")
    explain.set_defaults(func=run_explain)


def run_check(args: argparse.Namespace) -> int:
    from reviewer.policy.file import PolicyError, read_policy

    try:
        policy = read_policy(args.file)
    except PolicyError as error:
        for mistake in error.mistakes:
            print(f"reviewer policy check: {mistake}", file=sys.stderr)
        return 2
    for line in policy.describe():
        print(line)
    if not policy.has_default:
        print(f"{args.file}: no [default]: a plan of no listed environment needs 1 approval from anyone")
    return 0


def run_explain(args: argparse.Namespace) -> int:
    from reviewer.plan.proposal import ProposalError, parse_proposal
    from reviewer.plan.sanitize import safe_text
    from reviewer.policy.file import PolicyError, read_policy
    from reviewer.policy.verdict import evaluate

    try:
        policy = read_policy(args.file)
    except PolicyError as error:
        for mistake in error.mistakes:
            print(f"reviewer policy explain: {mistake}", file=sys.stderr)
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
