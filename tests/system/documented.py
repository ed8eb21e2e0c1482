"""The commands the docs pages show, read from the pages themselves, and a small shell that runs them
as written: a test never copies a command, so a page that changes changes what the suite runs.

A command is a line of a fenced shell block (```sh, or a plain block whose line starts with a command
this project's pages use), its `\\` continuations joined, its `$ ` prompt and trailing `# comment`
dropped. A synopsis (`[--via record|server]`, `ARGS...`) is not run: `tests/test_docs.py` checks that
each option it names is one the command takes. Every other command is run by the test that claims
its block with `documented_block(page, first_words)`, or is in `NOT_RUN` with the reason it cannot be.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[2]
DOCS: Final = ROOT / "docs"
SHELL_LANGUAGES: Final = frozenset({"sh", "bash", "shell", "console"})
COMMAND_WORDS: Final = frozenset(
    {
        "reviewer",
        "mcp-gate",
        "curl",
        "jq",
        "ssh-keygen",
        "ssh-add",
        "head",
        "chmod",
        "pip",
        "npm",
        "node",
        "python",
        "python3",
        "export",
        "createdb",
        "pg_dump",
        "pg_restore",
    }
)
"""The first words of a command in a plain block; there, other lines are output (and `reviewer run:`,
a command's name and a colon, is its output too)."""
_FENCE: Final = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.M | re.S)
_COMMENT: Final = re.compile(r"\s+#(\s.*)?$")
_SYNOPSIS: Final = re.compile(r"\[[^\]]*(\||\.\.\.)[^\]]*\]|\]\.\.\.|[A-Z]+\.\.\.|--[a-z-]+ [A-Z][A-Z_]+\b")

NOT_RUN: Final[Mapping[str, str]] = {
    "pip install 'reviewer-gate[notify]'": "installs into the environment; .ci/run installs the notify extra",
    "pip install 'reviewer-gate[postgres]'": "installs into the environment; .ci/run installs psycopg",
    "npm install --prefix idp oidc-provider@9.13.3": "the test links the copy .ci/run installs in .test-idp",
    "reviewer": "the terminal app, interactive; tests/tui drives it against a served queue",
}
"""Commands the suite cannot run as written, each with the reason: one small list."""


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    """Where the command starts on the page, 1-based."""
    text: str
    block: str
    """The first command of its block: how a test names the block it runs."""
    expected: str = ""
    """The output the page prints under a `$ ` prompt, if any."""

    @property
    def synopsis(self) -> bool:
        return "[--" in self.text and bool(_SYNOPSIS.search(self.text))

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def _block_commands(page: str, language: str, text: str, first_line: int) -> list[Command]:
    if language and language not in SHELL_LANGUAGES:
        return []
    lines = textwrap.dedent(text).splitlines()
    prompted = any(line.startswith("$ ") for line in lines)
    found: list[tuple[int, str, list[str]]] = []
    logical, start = "", 0
    for number, line in enumerate(lines, first_line):
        if logical:
            logical += " " + line.strip()
        elif prompted:
            if not line.startswith("$ "):
                if found and line.strip():
                    found[-1][2].append(line)
                continue
            logical, start = line[2:], number
        elif line[:1].isspace() and found and line.strip():  # a synopsis's next line
            found[-1] = (found[-1][0], f"{found[-1][1]} {_COMMENT.sub('', line).strip()}", [])
            continue
        else:
            words = line.split(maxsplit=2)
            is_command = bool(words) and not line.startswith("#")
            if not language:
                is_command = is_command and words[0] in COMMAND_WORDS
                is_command = is_command and not (len(words) > 1 and words[1].endswith(":"))
            if not is_command:
                continue
            logical, start = line, number
        if logical.endswith("\\"):
            logical = logical[:-1].rstrip()
            continue
        found.append((start, _COMMENT.sub("", logical).strip(), []))
        logical = ""
    if not found:
        return []
    return [Command(page, start, command, found[0][1], "\n".join(output)) for start, command, output in found]


def fenced(page: str, starting_with: str, language: str = "") -> str:
    """The first fenced block of `page` in `language` whose text starts with `starting_with`."""
    for fence in _FENCE.finditer((DOCS / page).read_text(encoding="utf-8")):
        text = textwrap.dedent(fence.group(3))
        if fence.group(2) == language and text.startswith(starting_with):
            return text
    raise AssertionError(f"no {language or 'plain'} block starting with {starting_with!r} in docs/{page}")


def page_function(page: str, starting_with: str, name: str) -> Callable[..., Any]:
    """The function `name` that a page's Python block defines, run as the page prints it."""
    namespace: dict[str, Any] = {}
    exec(compile(fenced(page, starting_with, "python"), f"docs/{page}", "exec"), namespace)
    function: Callable[..., Any] = namespace[name]
    return function


def page_commands(page: str) -> list[Command]:
    """Every command a docs page shows, in page order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    commands: list[Command] = []
    for fence in _FENCE.finditer(text):
        first_line = text.count("\n", 0, fence.start()) + 2
        commands += _block_commands(page, fence.group(2), fence.group(3), first_line)
    return commands


def all_commands() -> list[Command]:
    return [command for page in sorted(DOCS.glob("*.md")) for command in page_commands(page.name)]


def documented_block(page: str, first_words: str) -> list[Command]:
    """The commands of the block on `page` whose first command starts with `first_words`, those in
    `NOT_RUN` and synopses left out: the test that calls this runs every one of them
    (`tests/test_docs.py` counts a block as run by finding this call)."""
    blocks: dict[str, list[Command]] = {}
    for command in page_commands(page):
        blocks.setdefault(command.block, []).append(command)
    # A block whose first command is exactly `first_words` is that block, whatever longer ones start alike.
    matching = [commands for first, commands in blocks.items() if first == first_words] or [
        commands for first, commands in blocks.items() if first.startswith(first_words)
    ]
    assert len(matching) == 1, f"{len(matching)} blocks on docs/{page} start with {first_words!r}"
    return [command for command in matching[0] if command.text not in NOT_RUN and not command.synopsis]


def as_run(command: Command, replacements: Mapping[str, str]) -> str:
    """The command with the page's placeholders replaced by this test's (each must occur) and an
    optional `[--flag value]` given."""
    text = command.text
    for placeholder, value in replacements.items():
        assert placeholder in text, f"{command.where}: no {placeholder!r} in {text!r}"
        text = text.replace(placeholder, value)
    return re.sub(r"\[(--[^\]]*)\]", r"\1", text)


@dataclass
class Shell:
    """Runs documented commands one at a time with bash in `folder`, the project's commands first on
    PATH; `export NAME=VALUE` sets NAME for the commands after it, `COMMAND &` starts it in the
    background (stopped by `close`). Everything every command printed is kept in `output`."""

    folder: Path
    env: dict[str, str] = field(default_factory=dict)
    output: list[str] = field(default_factory=list)
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        self.env = {**os.environ, "PATH": path, "PYTHONUNBUFFERED": "1", **self.env}

    def run(self, text: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run one command; it must succeed. What it printed, as a CompletedProcess."""
        if text.endswith("&"):
            raise AssertionError(f"{text!r} runs in the background: use start()")
        export = re.fullmatch(r"export (\w+)=(.*)", text)
        script = f'{text}\nprintf %s "${export.group(1)}"' if export else text
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        self.output += [done.stdout, done.stderr]
        assert done.returncode == 0, f"{text!r} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        if export:
            self.env[export.group(1)] = done.stdout
        return done

    def popen(self, text: str) -> subprocess.Popen[str]:
        """Start a command that runs until it is done, its output piped to the caller."""
        return subprocess.Popen(
            ["bash", "-c", f"exec {text}"],
            cwd=self.folder,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def start(self, text: str) -> Path:
        """Start a `COMMAND &` line; the file its output goes to."""
        assert text.endswith("&"), text
        log = self.folder / f"background-{len(self.background)}.log"
        with log.open("wb") as output:
            self.background.append(
                subprocess.Popen(
                    ["bash", "-c", f"exec {text[:-1].strip()}"],
                    cwd=self.folder,
                    env=self.env,
                    stdout=output,
                    stderr=output,
                    start_new_session=True,
                )
            )
        return log

    def close(self) -> None:
        for process in self.background:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
            process.wait(10)
        self.output += [log.read_text(errors="replace") for log in self.folder.glob("background-*.log")]
