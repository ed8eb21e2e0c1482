"""What `reviewer run` accepts before COMMAND starts, and what the child's environment keeps."""

from __future__ import annotations

import argparse
import base64
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reviewer.queue.config import AGENT_TOKEN_ENV, QUEUE_ENV, SIGNING_KEY_ENV, TOKEN_ENV
from reviewer.queue.trust import CA_VARIABLES
from reviewer.run.child import API_URL_ENV, PROPOSAL_ID_ENV, child_environment
from reviewer.run.errors import RunRefused
from reviewer.run.options import check_api_url, parse_dry_run_param, read_credentials
from reviewer.run.replan import FEEDBACK_ENV
from reviewer.sandbox.environment import SETTINGS_ENV, withheld_variables
from reviewer.sandbox.errors import SandboxRefused


@pytest.mark.parametrize(
    "url",
    ["https://api.example/v1", "http://127.0.0.1:8480", "http://localhost:1/x/", "http://[::1]:9"],
)
def test_https_or_loopback_is_accepted(url: str) -> None:
    assert check_api_url(url) == url.rstrip("/")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://api.example/v1", "plain http off loopback"),
        ("http://10.0.0.5:8480", "plain http off loopback"),
        ("https://user:secret@api.example", "user or password"),
        ("https://api.example/v1?key=1", "no query"),
        ("ftp://api.example", "http(s) URL"),
        ("/v1/tickets", "http(s) URL"),
    ],
)
def test_other_api_urls_are_refused(url: str, said: str) -> None:
    with pytest.raises(RunRefused, match=said.replace("(", r"\(").replace(")", r"\)")):
        check_api_url(url)


def test_a_credential_comes_from_the_environment_or_a_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "key"
    secret_file.write_text("from-a-file\n")
    credentials = read_credentials(
        ["Authorization: Bearer env:API_TOKEN", f"X-Api-Key: file:{secret_file}"], {"API_TOKEN": "s3cret"}
    )
    assert credentials.headers == {"Authorization": "Bearer s3cret", "X-Api-Key": "from-a-file"}
    assert credentials.from_env == {"API_TOKEN"}
    assert "s3cret" not in repr(credentials)


def test_the_dry_run_parameter_is_name_equals_value() -> None:
    assert parse_dry_run_param("validate_only=true") == {"validate_only": "true"}
    with pytest.raises(RunRefused):
        parse_dry_run_param("dryRun")


def test_the_child_gets_the_gate_and_none_of_the_secrets() -> None:
    environment = child_environment(
        {
            "PATH": "/bin",
            "API_TOKEN": "s3cret",
            "COPY_OF_IT": "prefix-s3cret",
            "REVIEWER_AGENT_TOKEN": "agent",
            "REVIEWER_TOKEN": "reviewer",
        },
        api_url="http://127.0.0.1:5",
        proposal_id="p-1",
        withheld={"API_TOKEN"},
        secrets=["Bearer s3cret", "s3cret"],
    )
    assert environment == {
        "PATH": "/bin",
        "REVIEWER_API_URL": "http://127.0.0.1:5",
        "REVIEWER_PROPOSAL_ID": "p-1",
    }


def test_a_copy_of_a_prefixed_secret_under_another_name_is_withheld() -> None:
    """`Bearer env:API_TOKEN`: the header is `Bearer s3cret`, but what must not reach the child is the
    secret itself, wherever it is, and a copy of the agent token too."""
    environ = {
        "PATH": "/bin",
        "API_TOKEN": "s3cret-value",
        "ALSO_THE_TOKEN": "s3cret-value",
        "IN_A_URL": "https://user:s3cret-value@api.example",
        "REVIEWER_AGENT_TOKEN": "agent-token-value",
        "AGENT_COPY": "agent-token-value",
        "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1",
    }
    credentials = read_credentials(["Authorization: Bearer env:API_TOKEN"], environ)
    environment = child_environment(
        environ,
        api_url="http://127.0.0.1:5/secret",
        proposal_id="p-1",
        withheld=credentials.from_env,
        secrets=credentials.secrets,
    )
    assert sorted(environment) == ["PATH", "REVIEWER_API_URL", "REVIEWER_PROPOSAL_ID"]


def test_a_settings_value_is_not_taken_for_a_secret_but_any_other_reviewer_variables_is() -> None:
    """The reviewer's settings are withheld by name alone: a one-character feedback would otherwise
    take every variable holding a 1 (the executor's own `XDG_STATE_HOME` among them), and a CA file
    the `SSL_CERT_FILE` naming it. A `REVIEWER_` variable the reviewer does not know may be a secret."""
    environ = {
        "PATH": "/bin",
        "XDG_STATE_HOME": "/home/u1/.local/state",
        "SSL_CERT_FILE": "/etc/ssl/corp.pem",
        "QUEUE_DOCS": "see https://queue.example",
        "REVIEWER_FEEDBACK": "1",
        "REVIEWER_CA_FILE": "/etc/ssl/corp.pem",
        "REVIEWER_QUEUE": "https://queue.example",
        "REVIEWER_SIGNING_KEY": "/home/u1/.ssh/id_ed25519.pub",
        "REVIEWER_TOKEN": "reviewer-token-value",
        "ITS_COPY": "reviewer-token-value",
        "REVIEWER_SOMETHING_NEW": "unknown-value",
        "ITS_OTHER_COPY": "unknown-value",
    }
    assert withheld_variables(environ) == {name for name in environ if name.startswith("REVIEWER_")} | {
        "ITS_COPY",
        "ITS_OTHER_COPY",
    }


def test_the_settings_whose_values_are_no_secret_are_the_reviewers_own_and_no_token() -> None:
    read_by_the_reviewer = {QUEUE_ENV, SIGNING_KEY_ENV, CA_VARIABLES[0]}
    told_to_command = {API_URL_ENV, PROPOSAL_ID_ENV, FEEDBACK_ENV}
    assert read_by_the_reviewer | told_to_command == SETTINGS_ENV
    assert not SETTINGS_ENV & {TOKEN_ENV, AGENT_TOKEN_ENV}


def test_without_a_sandbox_run_refuses_unless_told_and_root_runs_command_as_a_fresh_uid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No bubblewrap here (hidden from PATH): an ordinary user is refused, told what --no-sandbox
    costs; root falls back to running COMMAND as a uid made for the run; --no-sandbox runs it unsandboxed."""
    from reviewer.sandbox import modes as sandbox

    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None if name == "bwrap" else f"/usr/bin/{name}")
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    with pytest.raises(
        SandboxRefused, match="bubblewrap .* is not installed.*/proc/PID/environ.*--no-sandbox"
    ):
        sandbox.choose_sandbox({})
    assert sandbox.choose_sandbox({}, allow_none=True) == sandbox.Sandbox("none")
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    as_another = sandbox.choose_sandbox({})
    assert as_another.kind == "another user" and as_another.uid in sandbox.FRESH_UIDS
    with as_another.launch(["node", "agent.mjs"]) as launch:
        assert launch.argv[:2] == ["setpriv", f"--reuid={as_another.uid}"]
        assert launch.argv[-2:] == ["node", "agent.mjs"] and launch.pass_fds == ()
    assert sandbox.choose_sandbox({}).uid != as_another.uid, "each run has a uid of its own"


NAMESPACES_USED_UP = "echo {limit} > /proc/sys/user/max_user_namespaces"
"""Run in a user namespace of its own (as its root), this leaves no user namespace for bubblewrap to
make: the kernel refuses it as a machine with user namespaces turned off does, in bwrap's own words."""


def without_namespaces(
    command: list[str], *, as_root: bool, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`command` where bubblewrap cannot make its namespaces: as root of a user namespace whose limit
    is 0, or (`as_root` False) as uid 1000 of the one namespace a limit of 1 lets it have."""
    inner = shlex.join(command)
    if not as_root:
        inner = f"unshare --user --map-user=1000 --map-group=1000 {inner}"
    script = f"{NAMESPACES_USED_UP.format(limit=0 if as_root else 1)} && exec {inner}"
    return subprocess.run(
        ["unshare", "--user", "--map-root-user", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
        env={**os.environ, "REVIEWER_AGENT_TOKEN": "never-used"},
    )


@pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("unshare") is None, reason="no bwrap")
def test_a_run_whose_namespaces_cannot_be_made_says_bubblewraps_own_reason(tmp_path: Path) -> None:
    """Refused as an ordinary user, and fallen back to another uid as root: either way the line says
    what bubblewrap said, not only that it failed."""
    refused = without_namespaces(
        [sys.executable, "-m", "reviewer", "run", "--api", "http://127.0.0.1:9", "--", "true"],
        as_root=False,
        cwd=tmp_path,
    )
    lines = refused.stderr.splitlines()
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert lines[0].startswith(
        "reviewer run: COMMAND cannot be sandboxed here (bwrap could not make the "
        "namespaces: bwrap: Creating new namespace failed"
    ), lines[0]
    assert "--no-sandbox" in lines[0]

    fell_back = without_namespaces(
        [
            sys.executable,
            "-c",
            "from reviewer.sandbox.modes import choose_sandbox; print(choose_sandbox({}).describe())",
        ],
        as_root=True,
    )
    assert fell_back.returncode == 0, fell_back.stderr
    assert fell_back.stdout.startswith("sandbox: another user (uid "), fell_back.stdout
    assert (
        "no namespace could be made: bwrap could not make the namespaces: bwrap: Creating new namespace "
        "failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC))"
    ) in fell_back.stdout


def test_bubblewraps_reason_is_its_last_line_escaped_and_bounded() -> None:
    """What bwrap writes reaches the operator's terminal: an escape sequence in it is shown, not
    obeyed, and a flood is cut to one bounded line."""
    from reviewer.sandbox.modes import MAX_REASON_CHARS, bwrap_reason

    said = bwrap_reason(
        b"bwrap: warning\nbwrap: Can't bind \x1b]0;owned\x07/run/x\t" + b"y" * 5000 + b"\n\n", 1
    )
    assert said.startswith("bwrap: Can't bind \\x1b]0;owned\\x07/run/x\\t"), said
    assert "\n" not in said and "\x1b" not in said and len(said) <= MAX_REASON_CHARS
    assert bwrap_reason(b"", 3) == "it exited with status 3 and said nothing"


def test_as_another_user_a_secret_any_user_may_open_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The root fallback runs COMMAND as a stranger, and its command line says where the credential's
    file is: one any user may read (0644 in folders anyone passes) is refused before anything runs,
    and so is an agent socket any user may connect to; 0600, or a folder of the owner's alone, is not."""
    import socket
    import tempfile

    from reviewer.sandbox import modes as sandbox

    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None if name == "bwrap" else f"/usr/bin/{name}")
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    folder = Path(tempfile.mkdtemp())
    try:
        folder.chmod(0o755)
        secret = folder / "api-token"
        secret.write_text("s3cret")
        secret.chmod(0o644)
        with pytest.raises(
            SandboxRefused, match=r"as another user COMMAND could open '.*/api-token', which any"
        ):
            sandbox.choose_sandbox({}, [str(secret)])
        secret.chmod(0o600)
        assert sandbox.choose_sandbox({}, [str(secret)]).kind == "another user"
        secret.chmod(0o644)
        folder.chmod(0o700)
        assert sandbox.choose_sandbox({}, [str(secret)]).kind == "another user"
        folder.chmod(0o755)
        with socket.socket(socket.AF_UNIX) as agent:
            agent.bind(str(folder / "agent.sock"))
            (folder / "agent.sock").chmod(0o777)
            with pytest.raises(SandboxRefused, match=r"could open '.*/agent.sock'"):
                sandbox.choose_sandbox({"SSH_AUTH_SOCK": str(folder / "agent.sock")})
    finally:
        folder.chmod(0o700)
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


def test_where_no_seccomp_filter_can_be_loaded_the_namespaces_are_refused_unless_told(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without the filter COMMAND could open a Unix socket made after the run starts: `run` says so and
    refuses, unless --allow-weaker-sandbox, and then its first line says what is missing."""
    from reviewer.sandbox import modes as sandbox
    from reviewer.sandbox.syscall_filter import FilterUnavailable

    def unavailable() -> bytes:
        raise FilterUnavailable("libseccomp cannot be loaded (absent)")

    monkeypatch.setattr(sandbox, "no_unix_sockets", unavailable)
    reach = sandbox.Reach(tmp_path)
    with pytest.raises(
        SandboxRefused, match=r"cannot refuse it Unix sockets here \(libseccomp cannot be loaded"
    ):
        sandbox.choose_sandbox({}, reach=reach)
    weaker = sandbox.choose_sandbox({}, reach=reach, allow_weaker=True)
    assert weaker.kind == "namespaces" and weaker.syscall_filter is None
    said = weaker.describe()
    assert "Unix sockets NOT refused (--allow-weaker-sandbox: libseccomp cannot be loaded (absent);" in said
    with weaker.launch(["true"], [8479]) as launch:
        assert launch.argv[0] == "bwrap" and len(launch.pass_fds) == 1 and launch.handover is not None
    monkeypatch.undo()
    filtered = sandbox.choose_sandbox({}, reach=reach)
    with filtered.launch(["true"], [8479]) as launch:
        assert launch.argv[:4] == [sys.executable, "-I", "-S", sandbox.LAUNCHER]
        assert launch.argv[4] == "--seccomp" and base64.b64decode(launch.argv[5]) == filtered.syscall_filter
        assert launch.argv[6:8] == ["--", "bwrap"]


def test_the_child_gets_no_variable_that_says_where_a_host_socket_listens(tmp_path: Path) -> None:
    """tmux's, screen's, D-Bus's and the agents' variables, and any other whose value names a socket."""
    import socket

    from reviewer.run.child import child_environment

    listening = tmp_path / "editor.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(listening))
        environ = {
            "PATH": "/usr/bin",
            "TMUX": "/tmp/tmux-1000/default,4242,0",
            "TMUX_PANE": "%1",
            "STY": "4243.pts-0.host",
            "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus",
            "GPG_AGENT_INFO": "/run/user/1000/gnupg/S.gpg-agent:0:1",
            "XDG_RUNTIME_DIR": "/run/user/1000",
            "EDITOR_SOCKET": str(listening),
            "EDITOR_ADDRESS": f"unix:path={listening},guid=1",
            "NOT_A_SOCKET": str(tmp_path),
        }
        environment = child_environment(environ, api_url="http://127.0.0.1:8479", proposal_id="p")
    assert sorted(environment) == ["NOT_A_SOCKET", "PATH", "REVIEWER_API_URL", "REVIEWER_PROPOSAL_ID"]


def run_options(*arguments: str) -> argparse.Namespace:
    from reviewer.__main__ import build_parser

    return build_parser("run").parse_args(["run", *arguments])


def test_the_options_are_read_without_touching_the_process() -> None:
    """`settings_from` reads and checks everything from the options and the environment it is handed;
    sealing the process and making the sandbox are `reviewer run`'s next steps, not its."""
    from reviewer.run.commands import settings_from

    environ = {"API_TOKEN": "s3cret", "REVIEWER_AGENT_TOKEN": "agent-token", "HOME": "/nonexistent"}
    before = dict(os.environ)
    options = run_options(
        "--api", "https://api.example/v1", "--api-header", "Authorization: Bearer env:API_TOKEN",
        "--environment", "staging", "--", "node", "agent.mjs",
    )  # fmt: skip
    settings = settings_from(options, environ)
    assert dict(os.environ) == before
    assert settings.command == ["node", "agent.mjs"] and settings.agent_token == "agent-token"
    assert settings.credentials.headers == {"Authorization": "Bearer s3cret"}
    assert settings.withheld is not None and settings.withheld.from_env == {"API_TOKEN"}
    assert settings.sandbox.kind == "none" and settings.environment == "staging"
    with pytest.raises(RunRefused, match="no agent token"):
        settings_from(options, {"API_TOKEN": "s3cret"})
    with pytest.raises(RunRefused, match="name the agent's command"):
        settings_from(run_options("--api", "https://api.example/v1"), environ)
