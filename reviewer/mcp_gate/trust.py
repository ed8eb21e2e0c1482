"""What `mcp-gate` lets through and how it names effects: the operator's flags and file
(`--read`, `--effect`, `--tools`), with the upstream's annotations counted only as the operator allows."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, get_args

import mcp_types as types

from reviewer.agent.tools import WRITE_EFFECTS
from reviewer.plan.proposal import Effect


class TrustConfigError(ValueError):
    """The operator's tool configuration (`--tools FILE`, `--read`, `--effect`) cannot be used."""


DESTRUCTIVE_CAUTION: Final = (
    "the upstream hints destructiveHint: a call may overwrite or destroy what it touches "
    "(an annotation the operator has not confirmed)"
)
READ_ONLY_CAUTION: Final = (
    "the upstream hints readOnlyHint, which the operator has not confirmed (--read): gated as a call "
    "whose effect is not known"
)
UNKNOWN_CAUTION: Final = (
    "effect unknown: the upstream says nothing of what this call does (no destructiveHint: false), and "
    "the operator has not named it (--effect): it may create, change or delete anything it reaches"
)
IDEMPOTENT_NOTE: Final = (
    "the upstream hints idempotentHint: calling it again with the same arguments does nothing more"
)
OPEN_WORLD_NOTE: Final = (
    "the upstream hints openWorldHint: it acts on things outside the server (the web, another system)"
)


@dataclass(frozen=True)
class TrustPolicy:
    """The operator's word on the upstream's tools; the upstream's annotations count only as it allows.

    `reads` pass un-gated; `effects` are gated with that effect. With `trust_read_only_hints`, a tool
    hinted `readOnlyHint` (and not also `destructiveHint`) passes too. Nothing else passes: a hint is
    the upstream's claim about itself, and one wrong hint would let a write through unseen.
    """

    reads: frozenset[str] = frozenset()
    effects: Mapping[str, Effect] = field(default_factory=dict)
    trust_read_only_hints: bool = False

    def passes(self, tool: types.Tool) -> bool:
        """Whether calls of `tool` go straight to the upstream, un-gated."""
        if tool.name in self.effects:
            return False
        if tool.name in self.reads:
            return True
        hints = tool.annotations
        return bool(
            self.trust_read_only_hints
            and hints is not None
            and hints.read_only_hint is True
            and hints.destructive_hint is not True
        )

    def effect_of(self, tool: types.Tool) -> Effect:
        """What a gated call of `tool` does, for the reviewer, never more than the evidence says: a
        create only for a tool that says it adds and destroys nothing (`destructiveHint: false`), an
        update for one that says it may destroy, else `other`, an effect unknown."""
        if tool.name in self.effects:
            return self.effects[tool.name]
        if self._destructive(tool):
            return "update"
        hints = tool.annotations
        if hints is not None and hints.destructive_hint is False and hints.read_only_hint is not True:
            return "create"
        return "other"  # it claims to write nothing, or says nothing: not a read until the operator says

    def caution_of(self, tool: types.Tool) -> str:
        """What the reviewer is told of each call beyond its effect: why the effect is what it is (a
        destructive or read-only hint, or none at all), and the idempotent and open-world hints."""
        if tool.name in self.effects:
            return ""
        hints = tool.annotations
        said = []
        if self._destructive(tool):
            said.append(DESTRUCTIVE_CAUTION)
        elif hints is not None and hints.read_only_hint is True:
            said.append(READ_ONLY_CAUTION)
        elif self.effect_of(tool) == "other":
            said.append(UNKNOWN_CAUTION)
        if hints is not None and hints.idempotent_hint is True:
            said.append(IDEMPOTENT_NOTE)
        if hints is not None and hints.open_world_hint is True:
            said.append(OPEN_WORLD_NOTE)
        return "; ".join(said)

    def destructive(self, tool: types.Tool) -> bool:
        """Whether its calls are marked destructive: the operator's `--effect TOOL=delete`, or the
        upstream's `destructiveHint`, which can only raise it (an update the operator named may still
        be marked destructive by its hint), never lower it."""
        return self.effects.get(tool.name) == "delete" or self._destructive(tool)

    @staticmethod
    def _destructive(tool: types.Tool) -> bool:
        return tool.annotations is not None and tool.annotations.destructive_hint is True


def load_policy(
    config: Path | None, reads: Sequence[str], effect_pairs: Sequence[str], trust_read_only_hints: bool
) -> TrustPolicy:
    """The policy from the config file (TOML: `read = [...]`, `[effects]`, `trust_read_only_hints`)
    and the flags, which win over the file for the tools they name."""
    file_reads: set[str] = set()
    file_effects: dict[str, Effect] = {}
    trust = trust_read_only_hints
    if config is not None:
        try:
            document = tomllib.loads(config.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise TrustConfigError(f"--tools {config}: {error}") from None
        unknown = sorted(set(document) - {"read", "effects", "trust_read_only_hints"})
        if unknown:
            raise TrustConfigError(
                f"--tools {config}: unknown key {unknown[0]!r} (read, effects, trust_read_only_hints)"
            )
        listed = document.get("read", [])
        if not isinstance(listed, list) or not all(isinstance(name, str) and name for name in listed):
            raise TrustConfigError(f"--tools {config}: read must be a list of tool names")
        file_reads = set(listed)
        effects = document.get("effects", {})
        if not isinstance(effects, dict):
            raise TrustConfigError(f"--tools {config}: [effects] must map tool names to effects")
        file_effects = parse_effects(f"{name}={value}" for name, value in effects.items())
        hinted = document.get("trust_read_only_hints", False)
        if not isinstance(hinted, bool):
            raise TrustConfigError(f"--tools {config}: trust_read_only_hints must be true or false")
        trust = trust or hinted
        clash = sorted(file_reads & set(file_effects))
        if clash:
            raise TrustConfigError(f"--tools {config}: {clash[0]!r} is both in read and in [effects]")
    flag_effects = parse_effects(effect_pairs)
    clash = sorted(set(reads) & set(flag_effects))
    if clash:
        raise TrustConfigError(f"{clash[0]!r} is given both --read and --effect")
    effects_now = {name: effect for name, effect in file_effects.items() if name not in reads}
    effects_now.update(flag_effects)
    reads_now = (file_reads - set(flag_effects)) | set(reads)
    return TrustPolicy(frozenset(reads_now), effects_now, trust)


def parse_effects(pairs: Iterable[str]) -> dict[str, Effect]:
    effects: dict[str, Effect] = {}
    for pair in pairs:
        name, _, effect = pair.partition("=")
        if not name or effect not in get_args(Effect) or effect == "read":
            raise TrustConfigError(
                f"--effect {pair!r}: write TOOL=EFFECT with EFFECT one of {', '.join(WRITE_EFFECTS)} "
                "(a tool that only reads is named with --read)"
            )
        effects[name] = effect  # type: ignore[assignment]
    return effects
