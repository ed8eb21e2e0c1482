"""Every reader of JSON anyone may have written answers a nesting too deep as bad input, in words."""

from __future__ import annotations

from pathlib import Path

import pytest

from reviewer.agent.ledger import Ledger, LedgerError
from reviewer.mcp_gate.recordings import RecordingFile, RecordingUnreadable
from reviewer.service.errors import DatabaseUnusable
from reviewer.service.signed_memory import SignedMemory
from reviewer.trail.memory import TrailRefused, _read

DEEP = "[" * 5000


def test_a_ledger_line_nested_too_deep_stops_the_executor_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text(DEEP + "\n")
    with pytest.raises(LedgerError, match=r"line 1 does not read \(JSON nested too deep to read\)"):
        Ledger(path).require_unclaimed("p", 1, "a" * 64)


def test_a_remembered_checkpoint_nested_too_deep_is_refused_in_words(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    path.write_text(DEEP)
    with pytest.raises(TrailRefused, match="JSON nested too deep to read"):
        _read(path)


def test_a_signed_log_memory_nested_too_deep_is_refused_in_words(tmp_path: Path) -> None:
    path = tmp_path / "signed.json"
    path.write_text(DEEP)
    with pytest.raises(DatabaseUnusable, match="JSON nested too deep to read"):
        SignedMemory(path).read()


def test_a_recording_nested_too_deep_is_refused_in_words(tmp_path: Path) -> None:
    path = tmp_path / "recording.json"
    path.write_text(DEEP)
    with pytest.raises(RecordingUnreadable, match="JSON nested too deep to read"):
        RecordingFile(path).load()
