"""The command line's table of sub-commands is what their modules register, and only the module of the
command being run is imported."""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reviewer.__main__ import COMMAND_MODULES, COMMANDS, build_parser, top_level
from tests.forked_commands import run_reviewer

ROOT = Path(__file__).resolve().parent.parent


def every_module_registered() -> argparse.ArgumentParser:
    """The parser as it was built before the table: every command module registers its commands."""
    parser = top_level()
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(subparsers)
    return parser


def sub_command(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_each_module_registers_the_commands_the_table_gives_it(module: str) -> None:
    subparsers = argparse.ArgumentParser().add_subparsers()
    importlib.import_module(module).register(subparsers)
    assert list(subparsers.choices) == [name for name, of, _ in COMMANDS if of == module]


def test_help_from_the_table_is_the_help_of_every_module() -> None:
    """Names, help lines and their order: `reviewer --help` is what the modules would print."""
    assert build_parser().format_help() == every_module_registered().format_help()


@pytest.mark.parametrize("command", [name for name, _, _ in COMMANDS])
def test_a_commands_parser_lists_every_command_and_parses_as_its_module_does(command: str) -> None:
    full = every_module_registered()
    parser = build_parser(command)
    assert parser.format_help() == full.format_help()
    assert sub_command(parser, command).format_help() == sub_command(full, command).format_help()


def test_only_the_chosen_commands_module_is_imported() -> None:
    """`reviewer --help` imports no command module; `reviewer demo`'s parser only the terminal app's."""
    probe = (
        "import sys\n"
        "from reviewer.__main__ import COMMAND_MODULES, build_parser\n"
        "build_parser().format_help()\n"
        "before = [m for m in COMMAND_MODULES if m in sys.modules]\n"
        "build_parser('demo').parse_args(['demo'])\n"
        "print(' '.join(before), '|', ' '.join(m for m in COMMAND_MODULES if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    before, after = (part.split() for part in done.stdout.split("|"))
    assert before == []
    assert after == ["reviewer.tui.commands"]


def test_a_mistyped_command_is_refused_with_every_name() -> None:
    done = run_reviewer([sys.executable, "-m", "reviewer", "sevre"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert "invalid choice: 'sevre'" in done.stderr
    assert all(f"'{name}'" in done.stderr for name, _, _ in COMMANDS)


def test_version_names_the_release_and_the_queue_schema_it_writes() -> None:
    """As the installed metadata says; `serve`'s first log line and `/healthz` name the same."""
    from reviewer import release
    from reviewer.service.store.base import SCHEMA_VERSION

    printed = run_reviewer(
        [sys.executable, "-m", "reviewer", "--version"], capture_output=True, text=True, check=False
    )
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == f"reviewer-gate {release()} (queue schema {SCHEMA_VERSION})\n"
    assert release() == "0.1.0"


def test_a_ca_file_that_is_not_one_is_one_line_for_every_command(tmp_path: Path) -> None:
    """Every command's queue client reads REVIEWER_CA_FILE: one that holds no certificate is a line
    naming it, for `login`, `list` and `show` alike, never a traceback."""
    not_a_certificate = tmp_path / "ca.pem"
    not_a_certificate.write_text("not a certificate\n")
    environment = {**os.environ, "REVIEWER_CA_FILE": str(not_a_certificate), "REVIEWER_TOKEN": "t"}
    for command in (["list"], ["show", "p-1"], ["login"]):
        ran = run_reviewer(
            [sys.executable, "-m", "reviewer", *command, "--queue", "https://queue.example"],
            capture_output=True,
            text=True,
            env=environment,
            timeout=60,
        )
        assert ran.returncode == 2, (command, ran.stderr)
        assert (
            ran.stderr.startswith(f"reviewer {command[0]}: REVIEWER_CA_FILE=")
            and "Traceback" not in ran.stderr
        )
