"""The queue's approval policy (a TOML file) and the quorum rule it drives, as plain functions.

Per target environment: how many distinct reviewers must approve, whether each decision must be
signed, and who may decide. The rule is a function of the decisions so far, so every store calls
the same code and the tests need no HTTP. A policy file with a mistake stops `reviewer serve` with
the line named: a queue that silently fell back to "one approval" would be worse than no queue.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

MAX_APPROVALS: Final = 20
_REVIEWER_NAME: Final = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_RULE_KEYS: Final = frozenset({"approvals", "signatures", "reviewers"})
_KEY_LINE: Final = re.compile(r'^\s*("(?:[^"\\]|\\.)*"|[A-Za-z0-9_-]+)\s*=')
_HEADER_LINE: Final = re.compile(r"^\s*\[[^\[]")


class PolicyError(ValueError):
    """A policy file that cannot be used; the message names the file and the line."""


@dataclass(frozen=True)
class Rule:
    """What deciding a proposal for one environment takes."""

    approvals: int = 1
    signatures: bool = False
    reviewers: frozenset[str] | None = None
    """None: any reviewer token may decide."""

    def may_decide(self, reviewer: str) -> bool:
        return self.reviewers is None or reviewer in self.reviewers


@dataclass(frozen=True)
class Policy:
    default: Rule = Rule()
    environments: Mapping[str, Rule] | None = None

    def rule_for(self, environment: str | None) -> Rule:
        """The rule of `environment`, matched without regard to case or surrounding spaces (the
        name comes from the agent's proposal, so "Production " must not slip past "production");
        an environment the file does not name gets `[default]`."""
        if environment is None or not self.environments:
            return self.default
        return self.environments.get(_environment_key(environment), self.default)


def _environment_key(name: str) -> str:
    return name.strip().casefold()


def read_policy(path: Path) -> Policy:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyError(f"cannot read the policy file {path}: {error}") from error
    return parse_policy(text, str(path))


def parse_policy(text: str, source: str = "policy") -> Policy:
    """The policy in `text`; `PolicyError` naming `source` and the line of the first mistake."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PolicyError(f"{source}: {error}") from error
    lines = _KeyLines(text)

    def fail(path: tuple[str, ...], problem: str) -> PolicyError:
        return PolicyError(f"{source} line {lines.line_of(path)}: {problem}")

    for name in document:
        if name not in ("default", "environments"):
            raise fail((name,), f"unknown table or key {name!r}; expected [default] or [environments.NAME]")
    default = _rule(document.get("default", {}), ("default",), fail)
    environments: dict[str, Rule] = {}
    declared = document.get("environments", {})
    if not isinstance(declared, dict):
        raise fail(("environments",), "environments must be tables: [environments.NAME]")
    for name, table in declared.items():
        key = _environment_key(name)
        if not key:
            raise fail(("environments", name), "an environment needs a name")
        if key in environments:
            raise fail(("environments", name), f"environment {name!r} is named twice (case is ignored)")
        environments[key] = _rule(table, ("environments", name), fail)
    return Policy(default, environments)


def _rule(table: Any, path: tuple[str, ...], fail: Any) -> Rule:
    if not isinstance(table, dict):
        raise fail(path, f"[{'.'.join(path)}] must be a table")
    for key in table:
        if key not in _RULE_KEYS:
            raise fail((*path, key), f"unknown key {key!r}; expected approvals, signatures, reviewers")
    approvals = table.get("approvals", 1)
    if not isinstance(approvals, int) or isinstance(approvals, bool) or not 1 <= approvals <= MAX_APPROVALS:
        raise fail((*path, "approvals"), f"approvals must be a whole number from 1 to {MAX_APPROVALS}")
    signatures = table.get("signatures", False)
    if not isinstance(signatures, bool):
        raise fail((*path, "signatures"), "signatures must be true or false")
    reviewers: frozenset[str] | None = None
    if "reviewers" in table:
        listed = table["reviewers"]
        if not isinstance(listed, list) or not listed:
            raise fail(
                (*path, "reviewers"), "reviewers must be a list of token names, or left out for anyone"
            )
        for name in listed:
            if not isinstance(name, str) or not _REVIEWER_NAME.match(name):
                raise fail((*path, "reviewers"), f"{name!r} is not a token name (1 to 64 of [A-Za-z0-9._-])")
        reviewers = frozenset(listed)
        if len(reviewers) < approvals:
            raise fail(
                (*path, "approvals"),
                f"{approvals} approvals can never be met by {len(reviewers)} listed reviewers",
            )
    return Rule(approvals, signatures, reviewers)


class _KeyLines:
    """Where each table and key of a TOML text sits, for messages: tomllib gives values, not lines.

    A table header is read by tomllib itself, so quoted names (`[environments."eu west"]`) map right.
    """

    def __init__(self, text: str) -> None:
        self._lines: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        for number, line in enumerate(text.splitlines(), start=1):
            if _HEADER_LINE.match(line):
                table = _header_path(line) or table
                self._lines.setdefault(table, number)
                continue
            key = _KEY_LINE.match(line)
            if key:
                name = key.group(1)
                name = tomllib.loads(f"{name} = 0")
                self._lines.setdefault((*table, next(iter(name))), number)

    def line_of(self, path: tuple[str, ...]) -> int:
        """The line of `path`, else of the nearest enclosing table that has one, else 1."""
        for end in range(len(path), 0, -1):
            if path[:end] in self._lines:
                return self._lines[path[:end]]
        return 1


def _header_path(line: str) -> tuple[str, ...] | None:
    try:
        parsed: Any = tomllib.loads(line.split("#", 1)[0] + "\n")
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    while isinstance(parsed, dict) and len(parsed) == 1:
        name = next(iter(parsed))
        path.append(name)
        parsed = parsed[name]
    return tuple(path)


# --- the quorum rule ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Vote:
    """One reviewer's decision on the current revision."""

    reviewer: str
    decision: Literal["approve", "reject"]
    reason: str = ""


@dataclass(frozen=True)
class Tally:
    state: Literal["pending", "approved", "rejected"]
    required: int
    approvals: tuple[str, ...]
    """Distinct reviewers who approved, in the order they did."""
    rejected_by: str | None = None
    reason: str | None = None

    def describe(self) -> str:
        return describe_approvals(self.approvals, self.required)


def describe_approvals(approvals: Iterable[str], required: int) -> str:
    """The quorum so far in one wording for the queue's messages, the command line and the app:
    "1 of 2 approvals (alice)"."""
    names = list(approvals)
    listed = f" ({', '.join(names)})" if names else ""
    noun = "approval" if required == 1 else "approvals"
    return f"{len(names)} of {required} {noun}{listed}"


def tally(votes: Iterable[Vote], required: int) -> Tally:
    """Pending until `required` distinct reviewers approved; the first rejection rejects.

    A reviewer counted twice would let one person meet a quorum of two, so repeats count once.
    """
    approvals: list[str] = []
    for vote in votes:
        if vote.decision == "reject":
            return Tally("rejected", required, tuple(approvals), vote.reviewer, vote.reason)
        if vote.reviewer not in approvals:
            approvals.append(vote.reviewer)
        if len(approvals) >= required:
            return Tally("approved", required, tuple(approvals))
    return Tally("pending", required, tuple(approvals))


VoteRefusal = Literal["not_listed", "already_approved"]


def refuse_vote(rule: Rule, votes: Iterable[Vote], reviewer: str) -> VoteRefusal | None:
    """Why `reviewer` may not add a decision now, or None. A state that is no longer pending is the
    caller's 409; this only answers what the policy adds: a list of who may decide, one vote each."""
    if not rule.may_decide(reviewer):
        return "not_listed"
    if any(vote.reviewer == reviewer for vote in votes):
        return "already_approved"
    return None
