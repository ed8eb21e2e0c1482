"""The README and the docs say what the code does: quoted output, the layout block, links that resolve."""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
import tomllib
import unicodedata
from pathlib import Path

import pytest

from reviewer.__main__ import build_parser
from tests.forked_commands import run_reviewer
from tests.system.documented import NOT_RUN, Command, all_commands

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
    result = run_reviewer(
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


def blocks_run_by_tests() -> set[tuple[str, str]]:
    """Every `documented_block(page, first_words)` call in the suite's source: the blocks a test runs."""
    claimed: set[tuple[str, str]] = set()
    for source in (ROOT / "tests").rglob("test_*.py"):
        text = source.read_text(encoding="utf-8")
        if "documented_block" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "documented_block"
                and all(isinstance(argument, ast.Constant) for argument in node.args)
            ):
                page, first_words = (argument.value for argument in node.args)  # type: ignore[attr-defined]
                claimed.add((page, first_words))
    return claimed


def test_every_command_a_docs_page_shows_is_run_by_a_test_or_listed_as_not_runnable() -> None:
    """A command a page gains fails here until a test runs its block (tests/system/documented.py says
    how) or it joins NOT_RUN with the reason it cannot run."""
    claimed = blocks_run_by_tests()
    neither = [
        f"{command.where}: {command.text}"
        for command in all_commands()
        if not command.synopsis
        and command.text not in NOT_RUN
        and not any(page == command.page and command.block.startswith(words) for page, words in claimed)
    ]
    assert neither == []


def test_the_command_check_sees_the_pages_commands_and_not_their_output() -> None:
    """The check above would pass on pages whose commands it failed to see."""
    found = {(command.page, command.text) for command in all_commands()}
    assert ("operating.md", "reviewer token revoke --db queue.sqlite3 alice") in found
    assert (
        "signing-and-policies.md",
        "jq -j '.signatures[0].signature' state.json > statement.json.sig",
    ) in found
    assert not any(text.startswith(("reviewer run:", "reviewer serve:", "deskline")) for _, text in found)
    assert ("operating.md", "reviewer token create --db queue.sqlite3 --name my-agent --role agent") in found
    assert len(blocks_run_by_tests()) >= 10


def test_every_command_listed_as_not_runnable_is_still_on_a_page() -> None:
    shown = {command.text for command in all_commands()}
    assert sorted(set(NOT_RUN) - shown) == []


def subcommand_parser(words: list[str]) -> argparse.ArgumentParser:
    """The parser of `reviewer WORD ...` as the command line builds it."""
    parser = build_parser(words[1])
    for word in words[1:]:
        actions = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
        if not actions or word not in actions[0].choices:
            break
        parser = actions[0].choices[word]
    return parser


@pytest.mark.parametrize(
    "synopsis", [command for command in all_commands() if command.synopsis], ids=lambda command: command.where
)
def test_each_synopsis_names_only_options_its_command_takes(synopsis: Command) -> None:
    """A synopsis cannot run as written (`[--via record|server]`): each option it names is one the
    command's parser takes, and takes a value where the synopsis gives one."""
    words = synopsis.text.split()
    assert words[0] == "reviewer", synopsis.text
    parser = subcommand_parser(words)
    shown = re.findall(r"(--[a-z][a-z-]*)(\s+[^\s\[\]|-])?", synopsis.text.split(" -- ")[0])
    assert shown, synopsis.text
    for option, value in shown:
        action = parser._option_string_actions.get(option)
        assert action is not None, f"{synopsis.where}: `{' '.join(words[:2])}` takes no {option}"
        assert (action.nargs != 0) == bool(value), (
            f"{synopsis.where}: {option} {'takes' if value else 'needs'} a value"
        )


DISTRIBUTION = "reviewer-gate"
"""The name on the package index: the bare `reviewer` there is someone else's project. The command and
the import package are still `reviewer`."""
_INSTALL = re.compile(r"\b(?:pipx|pip3?|uv pip|uv tool)\s+install\s+([^`\n#;&|)]*)")
_REQUIREMENT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([^\]]*)\])?")


def installed_distributions(text: str) -> list[tuple[str, set[str]]]:
    """Each distribution an install command in `text` names from the package index, with its extras
    (local paths such as `-e .` and options are not names)."""
    named = []
    for words in _INSTALL.findall(text):
        for word in words.split():
            word = word.strip("'\"")
            if word.startswith(("-", ".", "/")):
                continue
            if requirement := _REQUIREMENT.match(word):
                extras = {extra.strip() for extra in (requirement.group(2) or "").split(",") if extra.strip()}
                named.append((requirement.group(1).lower().replace("_", "-"), extras))
    return named


def test_the_install_check_reads_the_commands_as_pip_does() -> None:
    text = "pip install 'reviewer[postgres]'\n(`pip install reviewer-gate[mcp,notify]`, `pip install -e .`)"
    assert installed_distributions(text) == [("reviewer", {"postgres"}), ("reviewer-gate", {"mcp", "notify"})]


def test_every_install_command_on_a_page_names_the_project_by_its_distribution_name() -> None:
    """README and every docs page: `pip install 'reviewer[postgres]'` would install another project."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION
    extras = set(project["optional-dependencies"])
    ours = []
    for page in DOCS:
        for name, wanted in installed_distributions(page.read_text(encoding="utf-8")):
            assert name != "reviewer", f"{page.name}: `reviewer` on the package index is not this project"
            if name == DISTRIBUTION:
                assert wanted <= extras, f"{page.name}: no such extra {sorted(wanted - extras)}"
                ours.append(page.name)
    assert {"operating.md", "notifications.md", "agents.md", "mcp-gate.md"} <= set(ours)


_DESIGN_CITATION = re.compile(r'docs/design\.md, "([^"]+)"')
_NUMBERED_CITATION = re.compile(r"\bDESIGN" + r" \d+")
"""A contract cited by a number of a document the project does not hold (written so as not to be one)."""


def cited_texts() -> list[Path]:
    roots = [ROOT / "reviewer", ROOT / "tests", ROOT / "bench", ROOT / "docs", ROOT / "examples"]
    files = [path for root in roots for path in root.rglob("*") if path.suffix in (".py", ".md", ".toml")]
    return [*files, ROOT / ".ci" / "run", README]


def test_every_citation_of_the_design_page_names_one_of_its_sections() -> None:
    """The code cites the contracts it relies on by section name; a renamed section leaves no
    citation pointing nowhere, and nothing cites a numbered document the project does not hold."""
    page = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    sections = {line.lstrip("#").strip() for line in page.splitlines() if line.startswith(("## ", "### "))}
    cited: dict[str, str] = {}
    for path in cited_texts():
        text = path.read_text(encoding="utf-8", errors="replace")
        assert not _NUMBERED_CITATION.search(text), f"{path.relative_to(ROOT)} cites a numbered document"
        joined = re.sub(r"\s*\n\s*(?:#\s*)?", " ", text)
        for section in _DESIGN_CITATION.findall(joined):
            cited[section] = str(path.relative_to(ROOT))
    unknown = {section: where for section, where in cited.items() if section not in sections}
    assert unknown == {}
    assert {"Verifying against audit logs", "Decision rules"} <= set(cited)


def test_the_operating_page_lists_every_migration_step_the_code_has() -> None:
    """Each step as `migrations.STEPS` words it, in order, and none the code does not have: a release
    that adds a step and not its line fails here."""
    from reviewer.service.store.migrations import STEPS

    page = (ROOT / "docs" / "operating.md").read_text(encoding="utf-8")
    listed = re.findall(r"^- (\d+): (.+)$", page, re.MULTILINE)
    assert listed == [(str(step), words) for step, words in STEPS.items()]
