"""`reviewer serve` and `reviewer token` as an operator meets them: one clear line and a non-zero
exit for every mistake, nothing created by a mistyped database, and no plain HTTP off loopback
without saying so."""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from reviewer.service.store.opener import open_store
from tests.forked_commands import reviewer_process, run_reviewer
from tests.queue_harness import STARTUP_TIMEOUT, Service, reviewer_command
from tests.service.ports import free_port
from tests.service.postgres import Cluster
from tests.service.tls import self_signed


def run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return run_reviewer(reviewer_command(*args), capture_output=True, text=True, timeout=timeout, check=False)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_a_port_out_of_range_is_one_line_and_exit_1(port: str, tmp_path: Path) -> None:
    result = run("serve", "--db", str(tmp_path / "q.sqlite3"), "--port", port)
    assert result.returncode == 1
    assert one_line(result) == f"reviewer serve: --port must be 1 to 65535, not {port}"
    assert not (tmp_path / "q.sqlite3").exists()


def test_a_taken_port_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run("serve", "--db", str(tmp_path / "q.sqlite3"), "--port", str(port))
    assert result.returncode == 1
    assert one_line(result) == f"reviewer serve: cannot listen on 127.0.0.1:{port}: Address already in use"


@pytest.mark.parametrize(
    "command",
    [("token", "create", "--name", "a", "--role", "agent"), ("token", "list"), ("token", "revoke", "a")],
)
def test_token_commands_refuse_a_missing_database_and_create_nothing(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    mistyped = tmp_path / "queu.sqlite3"
    result = run(*command, "--db", str(mistyped))
    assert result.returncode == 1
    assert f"no queue database at {mistyped}" in one_line(result)
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_an_unreachable_postgresql_url_is_one_line_naming_host_and_port(tmp_path: Path) -> None:
    port = free_port()
    url = f"postgresql://queue:secret-password@127.0.0.1:{port}/queue"
    for command in (("serve", "--port", str(free_port())), ("token", "list")):
        result = run(*command, "--db", url, timeout=60)
        assert result.returncode == 1, result.stderr
        line = one_line(result)
        assert f"cannot reach PostgreSQL at 127.0.0.1:{port}/queue" in line
        assert "secret-password" not in result.stderr + result.stdout
    assert list(tmp_path.iterdir()) == []
    assert not Path("postgresql:").exists()


def test_token_commands_refuse_a_postgresql_database_without_a_queue(postgres_cluster: Cluster) -> None:
    result = run(
        "token", "create", "--name", "alice", "--role", "reviewer", "--db", postgres_cluster.fresh_database()
    )
    assert result.returncode == 1
    assert "holds no queue" in one_line(result)


def test_token_names_are_checked_and_listed_safely(tmp_path: Path, postgres_cluster: Cluster) -> None:
    for db in (str(tmp_path / "q.sqlite3"), postgres_cluster.fresh_database()):
        open_store(db, clock=time.time, pending_ttl=60, approval_ttl=60, create=True).close()  # as serve does
        bad = run("token", "create", "--name", "eve\x1b[2J", "--role", "reviewer", "--db", db)
        assert bad.returncode == 1
        assert "\x1b" not in bad.stderr and "1 to 64 letters" in one_line(bad)
        assert run("token", "create", "--name", "Eve", "--role", "reviewer", "--db", db).returncode == 0
        twin = run("token", "create", "--name", "eve", "--role", "agent", "--db", db)
        assert twin.returncode == 1 and "keeps its role for life" in one_line(twin)
        listed = run("token", "list", "--db", db)
        assert listed.stdout.splitlines()[0].split("\t")[:2] == ["Eve", "reviewer"]
        assert run("token", "revoke", "EVE", "--db", db).returncode == 0


def test_serve_says_it_created_a_new_database(tmp_path: Path) -> None:
    service = Service(db=tmp_path / "new.sqlite3", log_path=tmp_path / "service.log")
    service.start()
    service.stop()
    assert f"created a new, empty queue in {tmp_path / 'new.sqlite3'}" in service.log()
    service.start()
    service.stop()
    assert service.log().count("created a new, empty queue") == 1


def test_plain_http_off_loopback_is_refused_unless_a_proxy_is_declared(tmp_path: Path) -> None:
    refused = run(
        "serve", "--db", str(tmp_path / "q.sqlite3"), "--host", "0.0.0.0", "--port", str(free_port())
    )
    assert refused.returncode == 1
    assert "refusing to serve plain HTTP on 0.0.0.0" in one_line(refused)
    assert "--behind-tls-proxy" in refused.stderr
    assert not (tmp_path / "q.sqlite3").exists()
    proxied = Service(
        db=tmp_path / "q.sqlite3",
        log_path=tmp_path / "service.log",
        serve_args=("--host", "0.0.0.0", "--behind-tls-proxy"),
    )
    proxied.start()
    proxied.stop()
    assert "a TLS-terminating proxy is in front" in proxied.log()


def test_https_with_a_certificate_and_key(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    self_signed(cert, key)
    port = free_port()
    process = reviewer_process(
        reviewer_command(
            "serve",
            "--db",
            str(tmp_path / "q.sqlite3"),
            "--port",
            str(port),
            "--host",
            "0.0.0.0",
            "--tls-cert",
            str(cert),
            "--tls-key",
            str(key),
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        answer = None
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while answer is None and time.monotonic() < deadline:
            try:
                answer = httpx.get(
                    f"https://127.0.0.1:{port}/v1/whoami",
                    verify=ssl.create_default_context(cafile=cert),
                    timeout=2,
                )
            except httpx.TransportError:
                time.sleep(0.1)
        assert answer is not None and answer.status_code == 401
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/v1/whoami", timeout=2)
    finally:
        process.terminate()
        process.wait(10)
    missing = run(
        "serve", "--db", str(tmp_path / "q.sqlite3"), "--port", str(free_port()), "--tls-cert", str(cert)
    )
    assert missing.returncode == 1 and "--tls-cert and --tls-key go together" in one_line(missing)


def test_token_and_key_commands_import_neither_the_web_stack_nor_the_rule_language(tmp_path: Path) -> None:
    """An operator's `reviewer token create` (and every test that mints one) pays for the store
    alone: FastAPI, uvicorn and the CEL package load only for `serve` and for policies that hold
    expressions."""
    db = tmp_path / "q.sqlite3"
    probe = (
        "import sys, time\n"
        "from reviewer.service.store.opener import open_store\n"
        f"open_store({str(db)!r}, clock=time.time, pending_ttl=1, approval_ttl=1, create=True).close()\n"
        "from reviewer.__main__ import main\n"
        f"main(['token', 'create', '--db', {str(db)!r}, '--name', 'ops', '--role', 'reviewer'])\n"
        f"main(['keys', 'list', '--db', {str(db)!r}])\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run([*reviewer_command()[:1], "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("rvw_"), "the token was minted"
    loaded = set(done.stderr.split())
    assert not {"fastapi", "starlette", "uvicorn", "cel", "reviewer.service.app"} & loaded


def test_a_token_bound_to_a_person_is_listed_with_them_and_a_malformed_person_is_one_line(
    tmp_path: Path,
) -> None:
    from reviewer.service.store.opener import open_store

    database = tmp_path / "q.sqlite3"
    open_store(database, clock=lambda: 1.0, pending_ttl=1, approval_ttl=1, create=True).close()
    issuer = "https://sso.example.com/realms/platform"
    create = ("token", "create", "--db", str(database), "--name")
    made = run(*create, "dave-glass", "--role", "reviewer", "--break-glass", "--person", f"{issuer}#dave-7")
    assert made.returncode == 0, made.stderr
    listed = run("token", "list", "--db", str(database)).stdout
    assert "dave-glass\treviewer\t" in listed and f"\tbreak-glass\tfor {issuer}#dave-7" in listed
    malformed = [("no-hash-mark", "reviewer"), ("#dave", "reviewer"), (f"{issuer}#", "reviewer")]
    for bad, role in [*malformed, (f"{issuer}#dave", "agent")]:
        refused = run(*create, "x", "--role", role, "--person", bad)
        assert refused.returncode == 2
        assert one_line(refused).startswith("reviewer token create: --person is a reviewer's provider")
