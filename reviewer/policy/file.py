"""The queue's policy file (TOML): environments, the base URLs they own, and rules on the plan in CEL.

A policy with a mistake stops `reviewer serve` with every mistake on its own line: a queue that
silently fell back to "one approval" would be worse than no queue. Every rule's `when` is compiled
here, once, with its cost bounded (`reviewer.policy.expressions`).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Final

from reviewer.policy.escalation import EscalationStep, ladder_words, read_ladder
from reviewer.policy.expressions import Expression, ExpressionError, compile_expression
from reviewer.policy.names import BaseUrlPattern, folded
from reviewer.policy.quorum import MAX_APPROVALS, Requirement, Signatures, signed_words
from reviewer.policy.windows import MAX_WINDOWS, Window, WindowError, read_window

MAX_RULES: Final = 200
_REVIEWER_PATTERN: Final = re.compile(r"^[A-Za-z0-9._%+@*?-]{1,254}$")
"""A token name, or the name a reviewer signed in through the OpenID provider decides under (an email
address), with * and ? as in `finance-*` or `*@example.com`."""
_REQUIREMENT_KEYS: Final = ("approvals", "signatures", "reviewers")
_ENVIRONMENT_KEYS: Final = frozenset(
    {*_REQUIREMENT_KEYS, "base_urls", "allow_policy_approval", "escalation", "windows"}
)
_RULE_KEYS: Final = frozenset({"name", "when", *_REQUIREMENT_KEYS, "reject", "approve"})
_KEY_LINE: Final = re.compile(r'^\s*("(?:[^"\\]|\\.)*"|[A-Za-z0-9_-]+)\s*=')
_HEADER_LINE: Final = re.compile(r"^\s*\[[^\[]")
_ARRAY_HEADER_LINE: Final = re.compile(r"^\s*\[\[")


class PolicyError(ValueError):
    """A policy file that cannot be used; the message names the file and the line of each mistake."""

    def __init__(self, mistakes: list[str]) -> None:
        super().__init__("\n".join(mistakes))
        self.mistakes = mistakes


@dataclass(frozen=True)
class Environment:
    """A policy environment: what deciding its plans takes, and the base URLs it owns."""

    name: str
    requirement: Requirement = Requirement()
    base_urls: tuple[BaseUrlPattern, ...] = ()
    allow_policy_approval: bool = False
    escalation: tuple[EscalationStep, ...] = ()
    """Its plans' escalation steps (`reviewer.policy.escalation`), none by default."""
    windows: tuple[Window, ...] = ()
    """When its approved plans may run (`reviewer.policy.windows`); none: any time."""


@dataclass(frozen=True)
class PolicyRule:
    """A `[[rules]]` entry: when its expression holds on a plan, what it asks."""

    name: str
    when: Expression
    line: int
    approvals: int | None = None
    signatures: Signatures = False
    reviewers: tuple[str, ...] = ()
    reject: str | None = None
    approve: bool = False

    def asks(self) -> str:
        """What the rule asks, as the screen and `policy explain` say it: "needs 2 approvals"."""
        if self.reject is not None:
            return f"rejects: {self.reject}"
        if self.approve:
            return "approves by policy"
        parts = []
        if self.approvals is not None:
            parts.append(f"{self.approvals} approval{'s' if self.approvals != 1 else ''}")
        if self.signatures:
            parts.append("passkey signatures" if self.signatures == "passkey" else "signatures")
        if self.reviewers:
            parts.append(f"reviewers {', '.join(self.reviewers)}")
        return "needs " + (" and ".join(parts) if parts else "a human")

    def requirement(self) -> Requirement:
        return Requirement(self.approvals or 1, self.signatures, (self.reviewers,) if self.reviewers else ())


@dataclass(frozen=True)
class Policy:
    default: Environment = Environment("default")
    environments: Mapping[str, Environment] = field(default_factory=dict)
    """Keyed by each name as read at a glance (`reviewer.policy.names.folded`: its confusable skeleton,
    accents dropped, digits read as letters)."""
    rules: tuple[PolicyRule, ...] = ()
    sha256: str = hashlib.sha256(b"").hexdigest()
    """The digest of the file's text: a proposal evaluated under another digest is evaluated again."""
    has_default: bool = False
    """Whether the file wrote a `[default]` table (one left out means one approval from anyone)."""

    @property
    def reads_calls(self) -> bool:
        return any(rule.when.reads_calls for rule in self.rules)

    @property
    def reads_call_list(self) -> bool:
        """Whether a rule reads the calls one by one (as CEL values, or a walk's field of each),
        not only by groups (`Walk.fields`)."""
        return any(
            rule.when.reads_calls
            and (rule.when.reads_call_list or any(walk.fields is None for walk in rule.when.walks))
            for rule in self.rules
        )

    @property
    def grouped_fields(self) -> tuple[str, ...]:
        """The fields of a call the rules' walks by groups read, together."""
        fields = {field for rule in self.rules for walk in rule.when.walks for field in walk.fields or ()}
        return tuple(sorted(fields))

    @property
    def reads_args(self) -> bool:
        return any(rule.when.reads_args for rule in self.rules)

    @property
    def call_fields(self) -> frozenset[str]:
        """The fields of a call some rule that reads the calls may read."""
        fields: frozenset[str] = frozenset()
        for rule in self.rules:
            if rule.when.reads_calls:
                fields |= rule.when.call_fields
        return fields

    @property
    def reads_alarms(self) -> bool:
        return any(rule.when.reads_alarms for rule in self.rules)

    @property
    def reads_totals(self) -> bool:
        return any(rule.when.reads_totals for rule in self.rules)

    @property
    def trivial(self) -> bool:
        """No environment and no rule: every plan gets the default without reading its body."""
        return not self.environments and not self.rules

    @property
    def escalates(self) -> bool:
        """Whether some environment (or `[default]`) has escalation steps."""
        return any(environment.escalation for environment in (self.default, *self.environments.values()))

    def ladder_for(self, environment: str | None) -> tuple[EscalationStep, ...]:
        """The escalation steps of the environment named `environment` (None: `[default]`); a
        verdict's environment, its own name, is found without folding it again (the sweep asks this
        for every pending plan, every few seconds)."""
        ladder = self._ladders.get(environment)
        return ladder if ladder is not None else (self.named(environment) or self.default).escalation

    @cached_property
    def _ladders(self) -> dict[str | None, tuple[EscalationStep, ...]]:
        return {None: self.default.escalation} | {
            environment.name: environment.escalation for environment in self.environments.values()
        }

    def named(self, environment: str | None) -> Environment | None:
        """The environment whose name `environment` is or passes for (same `folded` form), or None."""
        if environment is None:
            return None
        return self.environments.get(folded(environment))

    def requirement_for(self, environment: str | None) -> Requirement:
        """The requirement of the environment named `environment` (or passing for it), else `[default]`."""
        return (self.named(environment) or self.default).requirement

    def owning(self, base_url: str | None) -> Environment | None:
        """The first environment (in file order) one of whose base URL patterns `base_url` is under."""
        if base_url is None:
            return None
        for environment in self.environments.values():
            if any(pattern.matches(base_url) for pattern in environment.base_urls):
                return environment
        return None

    def listed_reviewers(self) -> list[tuple[str, str]]:
        """Every (pattern, where) the file lists as a reviewer, for `serve` to check against tokens."""
        listed: list[tuple[str, str]] = []
        for environment in (self.default, *self.environments.values()):
            for patterns in environment.requirement.reviewers:
                listed.extend((pattern, f"[{_table_name(environment.name)}]") for pattern in patterns)
        for rule in self.rules:
            listed.extend((pattern, f"rule {rule.name!r}") for pattern in rule.reviewers)
        return listed

    def describe(self) -> list[str]:
        """One line per environment and rule, as `serve` prints what it loaded."""
        lines = []
        for environment in (self.default, *self.environments.values()):
            requirement = environment.requirement
            owns = (
                f"; owns {', '.join(p.text for p in environment.base_urls)}" if environment.base_urls else ""
            )
            by_policy = "; policy may approve" if environment.allow_policy_approval else ""
            ladder = f"; {ladder_words(environment.escalation)}" if environment.escalation else ""
            who = f" by {requirement.listed()}" if requirement.reviewers else ""
            signed = f", {signed_words(requirement.signatures)}" if requirement.signatures else ""
            lines.append(
                f"[{_table_name(environment.name)}] {requirement.approvals} approval"
                f"{'s' if requirement.approvals != 1 else ''}{signed}{who}{owns}{by_policy}{ladder}"
                + ("" if environment.name != "default" or self.has_default else " (no [default] in the file)")
            )
            lines.extend(
                f"  window {window.describe()} (line {window.line})" for window in environment.windows
            )
        for rule in self.rules:
            lines.append(
                f"rule {rule.name!r} (line {rule.line}): when {rule.when.source.strip()} → {rule.asks()}"
            )
        return lines


def _table_name(name: str) -> str:
    return "default" if name == "default" else f"environments.{name}"


def read_policy(path: Path) -> Policy:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyError([f"cannot read the policy file {path}: {error}"]) from error
    return parse_policy(text, str(path))


def parse_policy(text: str, source: str = "policy") -> Policy:
    """The policy in `text`; `PolicyError` naming `source` and the line of every mistake."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PolicyError([f"{source}: {error}"]) from error
    reader = _Reader(source, _KeyLines(text))
    for name in document:
        if name == "environment":
            reader.fail((name,), "unknown table [environment.NAME]; environments are [environments.NAME]")
        elif name not in ("default", "environments", "rules"):
            reader.fail(
                (name,),
                f"unknown table or key {name!r}; expected [default], [environments.NAME] or [[rules]]",
            )
    default = reader.environment("default", document.get("default", {}), ("default",), base_urls=False)
    environments: dict[str, Environment] = {}
    declared = document.get("environments", {})
    if not isinstance(declared, dict):
        reader.fail(("environments",), "environments must be tables: [environments.NAME]")
        declared = {}
    for name, table in declared.items():
        key = folded(name)
        if not key:
            reader.fail(("environments", name), "an environment needs a name")
            continue
        if key in environments:
            reader.fail(
                ("environments", name),
                f"environment {name!r} is named twice ({environments[key].name!r} reads the same: "
                "case, width and look-alike letters are ignored)",
            )
            continue
        environment = reader.environment(name, table, ("environments", name), base_urls=True)
        if environment is not None:
            environments[key] = environment
    rules = reader.rules(document.get("rules", []))
    if reader.mistakes:
        raise PolicyError(reader.mistakes)
    assert default is not None
    return Policy(
        default,
        environments,
        tuple(rules),
        hashlib.sha256(text.encode()).hexdigest(),
        "default" in document,
    )


class _Reader:
    """Reads tables into a policy, collecting every mistake with its line instead of stopping at one."""

    def __init__(self, source: str, lines: _KeyLines) -> None:
        self.source = source
        self.lines = lines
        self._mistakes: list[tuple[int, str]] = []

    @property
    def mistakes(self) -> list[str]:
        """Every mistake, in the order of their lines."""
        return [text for _line, text in sorted(self._mistakes, key=lambda mistake: mistake[0])]

    def fail(self, path: tuple[str, ...], problem: str) -> None:
        line = self.lines.line_of(path)
        self._mistakes.append((line, f"{self.source} line {line}: {problem}"))

    def environment(
        self, name: str, table: Any, path: tuple[str, ...], *, base_urls: bool
    ) -> Environment | None:
        if not isinstance(table, dict):
            self.fail(path, f"[{'.'.join(path)}] must be a table")
            return None
        allowed = _ENVIRONMENT_KEYS if base_urls else _ENVIRONMENT_KEYS - {"base_urls"}
        for key in table:
            if key not in allowed:
                self.fail((*path, key), f"unknown key {key!r}; expected {', '.join(sorted(allowed))}")
        requirement = self.requirement(table, path)
        patterns: list[BaseUrlPattern] = []
        listed: Any = table.get("base_urls", [])
        if not isinstance(listed, list) or not all(isinstance(item, str) for item in listed):
            self.fail(
                (*path, "base_urls"), 'base_urls must be a list of patterns like "https://api.example/*"'
            )
            listed = []
        for item in listed:
            try:
                patterns.append(BaseUrlPattern.parse(item))
            except ValueError as error:
                self.fail((*path, "base_urls"), str(error))
        allow = table.get("allow_policy_approval", False)
        if not isinstance(allow, bool):
            self.fail((*path, "allow_policy_approval"), "allow_policy_approval must be true or false")
            allow = False
        ladder = read_ladder(table.get("escalation", []), path, self.fail, self.lines.line_of)
        windows = self.windows(table, path)
        return Environment(name, requirement, tuple(patterns), allow, ladder, windows)

    def windows(self, table: dict[str, Any], path: tuple[str, ...]) -> tuple[Window, ...]:
        declared = table.get("windows", [])
        if not isinstance(declared, list) or len(declared) > MAX_WINDOWS:
            self.fail(
                (*path, "windows"), f"windows are [[{'.'.join(path)}.windows]] tables, at most {MAX_WINDOWS}"
            )
            return ()
        windows = []
        for index, window in enumerate(declared):
            where = (*path, "windows", str(index))
            try:
                windows.append(
                    replace(read_window(window, datetime.now(UTC)), line=self.lines.line_of(where))
                )
            except WindowError as error:
                self.fail(where if error.key is None else (*where, error.key), str(error))
        return tuple(windows)

    def requirement(self, table: dict[str, Any], path: tuple[str, ...]) -> Requirement:
        approvals = self.approvals(table, path) or 1
        signatures = self.signatures(table, path)
        reviewers = self.reviewers(table, path)
        if (
            reviewers
            and not any("*" in name or "?" in name for name in reviewers)
            and len(reviewers) < approvals
        ):
            self.fail(
                (*path, "approvals"),
                f"{approvals} approvals can never be met by {len(reviewers)} listed reviewers",
            )
        return Requirement(approvals, signatures, (reviewers,) if reviewers else ())

    def approvals(self, table: dict[str, Any], path: tuple[str, ...]) -> int | None:
        if "approvals" not in table:
            return None
        approvals = table["approvals"]
        if (
            not isinstance(approvals, int)
            or isinstance(approvals, bool)
            or not 1 <= approvals <= MAX_APPROVALS
        ):
            self.fail((*path, "approvals"), f"approvals must be a whole number from 1 to {MAX_APPROVALS}")
            return None
        return approvals

    def signatures(self, table: dict[str, Any], path: tuple[str, ...]) -> Signatures:
        """`signatures`: true (an SSH signature or a passkey assertion), false, or "passkey"."""
        value = table.get("signatures", False)
        if value != "passkey" and not isinstance(value, bool):
            self.fail((*path, "signatures"), 'signatures must be true, false or "passkey"')
            return False
        return "passkey" if value == "passkey" else bool(value)

    def flag(self, table: dict[str, Any], path: tuple[str, ...], key: str) -> bool:
        value = table.get(key, False)
        if not isinstance(value, bool):
            self.fail((*path, key), f"{key} must be true or false")
            return False
        return value

    def reviewers(self, table: dict[str, Any], path: tuple[str, ...]) -> tuple[str, ...]:
        if "reviewers" not in table:
            return ()
        listed = table["reviewers"]
        if not isinstance(listed, list) or not listed:
            self.fail((*path, "reviewers"), "reviewers must be a list of token names, or left out for anyone")
            return ()
        names = []
        for name in listed:
            if not isinstance(name, str) or not _REVIEWER_PATTERN.match(name):
                self.fail(
                    (*path, "reviewers"),
                    f"{name!r} is not a reviewer's name (a token name, or an email address as the "
                    "identity provider gives it; * and ? as in finance-* or *@example.com)",
                )
            else:
                names.append(name)
        return tuple(dict.fromkeys(names))

    def rules(self, declared: Any) -> list[PolicyRule]:
        if not isinstance(declared, list):
            self.fail(("rules",), "rules are tables: [[rules]]")
            return []
        if len(declared) > MAX_RULES:
            self.fail(("rules",), f"{len(declared)} rules; at most {MAX_RULES}")
        rules: list[PolicyRule] = []
        names: set[str] = set()
        for index, table in enumerate(declared[:MAX_RULES]):
            path = ("rules", str(index))
            rule = self.rule(table, path)
            if rule is None:
                continue
            if rule.name.casefold() in names:
                self.fail((*path, "name"), f"rule {rule.name!r} is named twice")
                continue
            names.add(rule.name.casefold())
            rules.append(rule)
        return rules

    def rule(self, table: Any, path: tuple[str, ...]) -> PolicyRule | None:
        if not isinstance(table, dict):
            self.fail(path, "a rule is a [[rules]] table")
            return None
        before = len(self._mistakes)
        for key in table:
            if key not in _RULE_KEYS:
                self.fail((*path, key), f"unknown key {key!r}; expected {', '.join(sorted(_RULE_KEYS))}")
        name = table.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 120 or not name.isprintable():
            self.fail((*path, "name"), "a rule needs a name (printable text, up to 120 characters)")
            name = "?"
        when = table.get("when")
        expression = None
        if not isinstance(when, str):
            self.fail((*path, "when"), f"rule {name!r} needs a when = '...' expression in CEL")
        else:
            try:
                expression = compile_expression(when)
            except ExpressionError as error:
                self.fail((*path, "when"), f"rule {name!r}: when: {error}")
        approvals = self.approvals(table, path)
        signatures = self.signatures(table, path)
        approve = self.flag(table, path, "approve")
        reviewers = self.reviewers(table, path)
        reject = table.get("reject")
        if reject is not None and (not isinstance(reject, str) or not reject.strip() or len(reject) > 1000):
            self.fail(
                (*path, "reject"), "reject is the reason sent to the agent (text, up to 1,000 characters)"
            )
            reject = None
        asked = [approvals is not None or bool(signatures) or bool(reviewers), reject is not None, approve]
        if sum(asked) != 1:
            self.fail(
                path,
                f"rule {name!r} asks for exactly one of: approvals/signatures/reviewers, reject, approve",
            )
        if len(self._mistakes) > before or expression is None:
            return None
        return PolicyRule(
            name, expression, self.lines.line_of(path), approvals, signatures, reviewers, reject, approve
        )


class _KeyLines:
    """Where each table and key of a TOML text sits, for messages: tomllib gives values, not lines.

    A table header is read by tomllib itself, so quoted names (`[environments."eu west"]`) map right;
    every prefix of a header is where that table is first named, so `[environment.production]`
    on line 4 is reported on line 4. The n-th `[[rules]]` is path ("rules", "n"), the n-th
    `[[environments.production.escalation]]` ("environments", "production", "escalation", "n"),
    and `[[environments.NAME.windows]]` ("environments", NAME, "windows", "n").
    """

    def __init__(self, text: str) -> None:
        self._lines: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        arrays: dict[tuple[str, ...], int] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            array = _ARRAY_HEADER_LINE.match(line) and _header_path(line)
            if array:
                table = (*array, str(arrays.get(array, 0)))
                arrays[array] = arrays.get(array, 0) + 1
                for end in range(1, len(table) + 1):
                    self._lines.setdefault(table[:end], number)
                continue
            if _HEADER_LINE.match(line):
                table = _header_path(line) or table
                for end in range(1, len(table) + 1):
                    self._lines.setdefault(table[:end], number)
                continue
            key = _KEY_LINE.match(line)
            if key:
                name = key.group(1)
                parsed = tomllib.loads(f"{name} = 0")
                self._lines.setdefault((*table, next(iter(parsed))), number)

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
