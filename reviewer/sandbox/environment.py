"""The environment a sandboxed program starts with: the operator's, without the reviewer's variables,
the agent socket, the variables a credential was read from, any variable holding one of their secret
values, and the variables that say where a host socket listens."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from typing import Final

WITHHELD_ENV: Final = frozenset({"SSH_AUTH_SOCK"})
"""The agent socket: its keys could sign a reviewer's approval."""
WITHHELD_PREFIX: Final = "REVIEWER_"
"""Every variable of the reviewer's: the queue tokens (the agent's could submit and run plans, a
reviewer's approve them), the queue's URL, the configuration's place. What the sandboxed program is
given of the reviewer's is set after (the gate's URL), never inherited."""
SETTINGS_ENV: Final = frozenset(
    {
        "REVIEWER_QUEUE",
        "REVIEWER_CA_FILE",
        "REVIEWER_SIGNING_KEY",
        "REVIEWER_API_URL",
        "REVIEWER_PROPOSAL_ID",
        "REVIEWER_FEEDBACK",
    }
)
"""The reviewer's variables that hold no secret: the queue's URL, the paths of the CA file and of the
signing key, and what `reviewer run` tells its program (the gate's URL, the proposal, a reviewer's
words). Withheld by name like every `REVIEWER_` one, but their values are not looked for in other
variables: `SSL_CERT_FILE` naming the same CA file stays, as does every variable that happens to
hold a one-character feedback. Any other `REVIEWER_` variable's value counts as a secret."""
HOST_SOCKET_ENV: Final = frozenset(
    {
        "TMUX",
        "TMUX_PANE",
        "STY",
        "WINDOW",
        "DBUS_SESSION_BUS_ADDRESS",
        "DBUS_SYSTEM_BUS_ADDRESS",
        "SSH_AGENT_PID",
        "GPG_AGENT_INFO",
        "GNUPGHOME",
        "XDG_RUNTIME_DIR",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "XAUTHORITY",
        "KRB5CCNAME",
        "SWAYSOCK",
        "I3SOCK",
        "KITTY_LISTEN_ON",
        "NVIM",
        "NVIM_LISTEN_ADDRESS",
        "VSCODE_IPC_HOOK_CLI",
        "PULSE_SERVER",
        "SYSTEMD_EXEC_PID",
        "INVOCATION_ID",
        "NOTIFY_SOCKET",
    }
)
"""Where the operator's sessions and agents listen (a tmux or screen server runs any command it is sent;
D-Bus starts services, `systemd-run --user`; gpg-agent signs): names the child has no use for. A
variable whose value names a Unix socket that exists goes too, whatever its name."""


def withheld_variables(
    environ: Mapping[str, str], withheld: Iterable[str] = (), secrets: Iterable[str] = ()
) -> set[str]:
    """The variables the child must not get: every `REVIEWER_` one, the agent socket, the variables the
    credential was read from, and any variable that holds one of their values (but the reviewer's
    `SETTINGS_ENV`) or a secret, under whatever name and with whatever around it (`Bearer ...`)."""
    named = {name for name in environ if name.startswith(WITHHELD_PREFIX)}
    named |= set(WITHHELD_ENV | set(withheld)) & environ.keys()
    values = [value for value in (*secrets, *(environ[name] for name in named - SETTINGS_ENV)) if value]
    return named | {name for name, value in environ.items() if any(secret in value for secret in values)}


def host_socket_variables(environ: Mapping[str, str]) -> set[str]:
    """The variables that tell where a host socket is: `HOST_SOCKET_ENV`'s, and any whose value (or
    its `unix:path=` or its part before a comma, as tmux writes it) names an existing Unix socket."""
    found = set(HOST_SOCKET_ENV) & environ.keys()
    for name, value in environ.items():
        for candidate in (value, value.partition(",")[0], value.rpartition("path=")[2].partition(",")[0]):
            if candidate.startswith("/") and _is_socket(candidate):
                found.add(name)
    return found


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def sandboxed_environment(
    environ: Mapping[str, str], withheld: Iterable[str] = (), secrets: Iterable[str] = ()
) -> dict[str, str]:
    """`environ` without `withheld_variables` and `host_socket_variables`."""
    hidden = withheld_variables(environ, withheld, secrets) | host_socket_variables(environ)
    return {name: value for name, value in environ.items() if name not in hidden}
