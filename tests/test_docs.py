"""The README and the docs say what the code does: quoted output, the layout block, links that resolve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted([README, ROOT / "bench" / "README.md", *(ROOT / "docs").glob("*.md")])
_MINTED = re.compile(r"fake-[0-9a-f]{8}")
"""The fake backend mints a random id each run; everything else in the walkthrough is fixed."""
_FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\(([^()\s]+)\)")


def quoted_block(page: Path, after: str) -> str:
    """The first fenced block that follows the line `after` on a page."""
    text = page.read_text(encoding="utf-8")
    start = text.index("```\n", text.index(after)) + len("```\n")
    return text[start : text.index("```\n", start)]


def test_the_walkthrough_prints_the_table_the_docs_quote() -> None:
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
    page = ROOT / "docs" / "reviewing.md"
    quoted = quoted_block(page, "`reviewer walkthrough` shows it on the real sample API:")
    assert _MINTED.sub("fake-<id>", printed) == _MINTED.sub("fake-<id>", quoted)


def test_the_layout_block_names_every_module_and_package_of_the_tree() -> None:
    """The README's `reviewer/` block lists exactly what is in `reviewer/`, nothing gone, nothing new."""
    block = quoted_block(README, "```\nreviewer/")
    listed = {line.split()[0] for line in block.splitlines() if re.match(r"^  \S", line)}
    package = ROOT / "reviewer"
    present = {
        entry.name + ("/" if entry.is_dir() else "")
        for entry in package.iterdir()
        if entry.name not in ("__init__.py", "__pycache__") and (entry.is_dir() or entry.suffix == ".py")
    }
    assert listed == present


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    found: set[str] = set()
    for line in _FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = "".join(
            char
            for char in heading.group(1).lower()
            if char in " -_" or unicodedata.category(char)[0] in "LN"
        ).replace(" ", "-")
        suffix, number = slug, 0
        while suffix in found:
            number += 1
            suffix = f"{slug}-{number}"
        found.add(suffix)
    return found


def relative_links(page: Path) -> list[str]:
    """Every link and picture on a page that is not a URL, outside code."""
    prose = _INLINE_CODE.sub("", _FENCE.sub("", page.read_text(encoding="utf-8")))
    return [target for target in _LINK.findall(prose) if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


@pytest.mark.parametrize("page", DOCS, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_its_anchor(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(destination):
            broken.append(f"{target}: no heading with that anchor")
    assert broken == []


def test_the_link_check_finds_links_and_anchors() -> None:
    """The check above would pass on a page whose links it failed to see: it sees the README's."""
    assert "docs/reviewing.md#what-a-dry-run-proves" in relative_links(README)
    assert "gate-your-agent" in anchors(README)
    assert "reviewer-mcp-gate-gate-an-mcp-server-you-do-not-change" in anchors(ROOT / "docs" / "mcp-gate.md")
