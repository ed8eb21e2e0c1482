"""The README says what the code does: its quoted command output is the output of the command today."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
_MINTED = re.compile(r"fake-[0-9a-f]{8}")
"""The fake backend mints a random id each run; everything else in the walkthrough is fixed."""


def quoted_block(after: str) -> str:
    """The first fenced block that follows the line `after` in the README."""
    text = README.read_text(encoding="utf-8")
    start = text.index("```\n", text.index(after)) + len("```\n")
    return text[start : text.index("```\n", start)]


def test_the_walkthrough_prints_the_table_the_readme_quotes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reviewer", "walkthrough"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "100", "NO_COLOR": "1"},
        check=True,
    )
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    printed = "\n".join(lines[next(i for i, line in enumerate(lines) if line.startswith("  call")) :]) + "\n"
    quoted = quoted_block("`reviewer walkthrough` shows it on the real sample API:")
    assert _MINTED.sub("fake-<id>", printed) == _MINTED.sub("fake-<id>", quoted)


def test_the_layout_block_names_every_module_and_package_of_the_tree() -> None:
    """The README's `reviewer/` block lists exactly what is in `reviewer/`, nothing gone, nothing new."""
    block = quoted_block("```\nreviewer/")
    listed = {line.split()[0] for line in block.splitlines() if re.match(r"^  \S", line)}
    package = README.parent / "reviewer"
    present = {
        entry.name + ("/" if entry.is_dir() else "")
        for entry in package.iterdir()
        if entry.name not in ("__init__.py", "__pycache__") and (entry.is_dir() or entry.suffix == ".py")
    }
    assert listed == present
