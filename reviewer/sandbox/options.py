"""The options that shape a sandbox, declared once for `reviewer run` and `reviewer mcp-gate`, and the
sandbox they ask for."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from pathlib import Path

from reviewer.sandbox.egress import parse_host_port
from reviewer.sandbox.errors import SandboxRefused
from reviewer.sandbox.modes import Reach, Role, Sandbox, choose_sandbox


def add_sandbox_options(parser: argparse.ArgumentParser, *, role: Role) -> None:
    """`--writable`, `--readable`, `--share-network`, `--allow-net`, `--allow-weaker-sandbox` and
    `--no-sandbox`; `reviewer run`'s agent writes the folder it is started in, mcp-gate's upstream not."""
    working_directory = role == "agent"
    besides = " besides its working directory" if working_directory else ""
    shown = ", the working directory" if working_directory else ""
    parser.add_argument(
        "--writable",
        action="append",
        default=[],
        metavar="PATH",
        help=f"a file or folder COMMAND may write{besides} (repeatable); it may not hold your home",
    )
    parser.add_argument(
        "--readable",
        action="append",
        default=[],
        metavar="PATH",
        help="a file or folder COMMAND may read where the sandbox does not show it (the sandbox shows "
        f"the system's /usr, /etc's needed files{shown} and the reviewer's installation), e.g. under your "
        "home or in /opt (repeatable); read-only",
    )
    parser.add_argument(
        "--share-network",
        action="store_true",
        help="keep the machine's network in the sandbox (an agent that calls its model's API): COMMAND "
        "then reaches the host's loopback services too; by default its network holds "
        + ("the gate alone" if working_directory else "nothing"),
    )
    parser.add_argument(
        "--allow-net",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="a host COMMAND may reach from its own network (repeatable), e.g. api.openai.com:443 for "
        f"{'its model' if working_directory else 'the API it serves'}: through an HTTP CONNECT proxy at "
        "127.0.0.1:8480 (HTTPS_PROXY is set) that tunnels CONNECT to the named HOST:PORTs only, never to a "
        "name that resolves to a loopback or private address unless named as an IP address or localhost; "
        "plain HTTP is refused",
    )
    parser.add_argument(
        "--allow-weaker-sandbox",
        action="store_true",
        help="run COMMAND in the namespaces even where its seccomp filter cannot be loaded (no libseccomp, "
        "or a kernel or bubblewrap without seccomp): COMMAND may then open Unix sockets, and reach one made "
        "after it starts in a folder it sees",
    )
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run COMMAND as your user, unsandboxed, where no sandbox can be made: it can then read the "
        "environment of every process it descends from, the reviewer's configuration and the agent socket",
    )


def sandbox_from_options(
    options: argparse.Namespace,
    environ: Mapping[str, str],
    secret_files: Iterable[str],
    *,
    role: Role,
) -> Sandbox:
    """The sandbox `add_sandbox_options`' options ask for, for `role`: `reviewer run`'s agent writes the
    folder it is started in; mcp-gate's upstream writes only `--writable`'s, and starts in the folder
    the gate was started in where the sandbox shows it. Raises `SandboxRefused` saying why it cannot be
    made."""
    if options.no_sandbox and (options.writable or options.readable):
        raise SandboxRefused("--writable and --readable shape the sandbox; --no-sandbox has none")
    try:
        allowed_net = sorted({parse_host_port(value) for value in options.allow_net})
    except ValueError as error:
        raise SandboxRefused(str(error)) from None
    here = Path.cwd()
    reach = Reach(
        here if role == "agent" else None,
        tuple(Path(path) for path in options.writable),
        tuple(Path(path) for path in options.readable),
        start_in=here,
    )
    return choose_sandbox(
        environ,
        secret_files,
        allow_none=options.no_sandbox,
        reach=reach,
        share_network=options.share_network,
        allowed_net=allowed_net,
        allow_weaker=options.allow_weaker_sandbox,
        role=role,
    )
