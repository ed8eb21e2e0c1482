"""`reviewer list`, `show`, `approve` and `login` against a real queue on a loopback port: what waits,
a digest `reviewer approve` accepts, and messages that say what happened."""

from __future__ import annotations

import contextlib
import json
import os
import re
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.forked_commands import reviewer_process, run_reviewer
from tests.queue_harness import (
    STARTUP_TIMEOUT,
    Actors,
    Service,
    claimed_report,
    decide,
    make_actors,
    mint_tokens,
    reviewer_command,
    served_with_actors,
    start_service,
    submit,
    unique_id,
)
from tests.service.ports import free_port

SAMPLES = Path(__file__).resolve().parent.parent / "sample_proposals"


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Actors]]:
    yield from served_with_actors(tmp_path_factory.mktemp("queue"))


def run(
    queue: tuple[Service, Actors], *args: str, columns: int = 50, stdin: str = "", **environ: str
) -> subprocess.CompletedProcess[str]:
    """A command as alice, in a terminal `columns` wide, with no config file and no SSH agent."""
    service, actors = queue
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("SSH_AUTH_SOCK", "REVIEWER_SIGNING_KEY", "XDG_CONFIG_HOME")
    }
    env.update(
        REVIEWER_QUEUE=service.url,
        REVIEWER_TOKEN=actors.tokens["alice"],
        XDG_CONFIG_HOME=str(Path(service.db).parent / "no-config"),
        COLUMNS=str(columns),
    )
    env.update(environ)
    return run_reviewer(
        reviewer_command(*args), capture_output=True, text=True, env=env, timeout=60, input=stdin
    )


def submit_sample(actors: Actors, name: str, proposal_id: str) -> dict[str, str]:
    """A bundled sample under a fresh id (the queue keeps every id it saw)."""
    document = json.loads((SAMPLES / name).read_text())
    document["proposal_id"] = proposal_id
    response = actors.agent.post("/v1/proposals", content=json.dumps(document).encode())
    assert response.status_code == 201, response.text
    answer: dict[str, str] = response.json()
    return answer


def test_show_prints_the_digest_and_the_approve_line_the_queue_accepts(queue: tuple[Service, Actors]) -> None:
    """The printed line, run as printed, approves the revision: the digest is the queue's whole one."""
    proposal_id = unique_id("k8s-show")
    answer = submit_sample(queue[1], "k8s-shop-scale-down.server.json", proposal_id)
    shown = run(queue, "show", proposal_id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert answer["plan_sha256"] in lines
    assert "runs on production · https://k8s-prod-eu1" in " ".join(line.strip() for line in lines)
    assert any("3 deletes: persistent_volume_claim" in line for line in lines)
    assert all(len(line) <= 50 for line in lines if answer["plan_sha256"] not in line), shown.stdout
    start = next(index for index, line in enumerate(lines) if line.startswith("reviewer approve"))
    command = " ".join(line.rstrip("\\").strip() for line in lines[start : start + 3]).split()
    assert command[:2] == ["reviewer", "approve"] and command[-1] == answer["plan_sha256"]
    approved = run(queue, *command[1:])
    assert approved.returncode == 0, approved.stderr
    assert "approved by alice" in approved.stdout
    after = run(queue, "show", proposal_id, "--json")
    assert json.loads(after.stdout)["state"] == "approved"
    assert json.loads(after.stdout)["approve_command"] == command


def test_list_names_what_waits_newest_first_with_its_alarms(
    queue: tuple[Service, Actors],
) -> None:
    older, newer = unique_id("older"), unique_id("newer")
    submit_sample(queue[1], "deskline-merge.server.json", older)
    submit_sample(queue[1], "k8s-shop-scale-down.server.json", newer)
    listed = run(queue, "list")
    assert listed.returncode == 0, listed.stderr
    text = listed.stdout
    assert text.index(newer) < text.index(older)
    assert all(len(line) <= 50 for line in text.splitlines()), text
    block = text[text.index(newer) : text.index(older)]
    assert "production" in block and "! 1 real refusal" in block and "3 deletes" in block
    scripted = json.loads(run(queue, "list", "--json").stdout)
    ids = [entry["proposal_id"] for entry in scripted]
    assert ids.index(newer) < ids.index(older)
    entry = scripted[ids.index(newer)]
    assert entry["environment"] == "production" and entry["deletes"] == 3
    assert re.fullmatch("[0-9a-f]{64}", entry["plan_sha256"])
    assert entry["digest_matches"] is None and entry["approve_command"] == []  # `show` fetches and checks


def test_list_and_show_give_times_with_their_zone(queue: tuple[Service, Actors]) -> None:
    """A time without its zone is an hour off for half of a team: `list` and `show` say UTC, and
    the time they print is the queue's, turned to UTC."""
    from datetime import UTC, datetime

    proposal_id = unique_id("zoned")
    submit_sample(queue[1], "deskline-merge.server.json", proposal_id)
    scripted = json.loads(run(queue, "list", "--json").stdout)
    entry = next(entry for entry in scripted if entry["proposal_id"] == proposal_id)
    submitted = datetime.fromisoformat(entry["submitted_at"]).astimezone(UTC)
    listed = run(queue, "list", columns=120).stdout
    block = listed[listed.index(proposal_id) :].split("\n\n")[0]
    assert f" · {submitted:%Y-%m-%d %H:%M} UTC" in block, block
    shown = run(queue, "show", proposal_id, columns=120).stdout
    assert f", {submitted:%Y-%m-%d %H:%M:%S} UTC" in shown, shown


def test_a_time_in_another_zone_is_said_in_utc() -> None:
    from reviewer.queue.overview import moment_words

    assert moment_words("2026-03-29T01:30:00+02:00") == "2026-03-28 23:30 UTC"
    assert moment_words("2026-03-29T01:30:07", seconds=True) == "2026-03-29 01:30:07 UTC"


def test_show_of_an_unknown_proposal_says_so(queue: tuple[Service, Actors]) -> None:
    result = run(queue, "show", unique_id("missing"))
    assert result.returncode == 1 and "reviewer show:" in result.stderr and "Traceback" not in result.stderr


def test_a_wrong_digest_is_said_not_to_match_not_to_be_stale(queue: tuple[Service, Actors]) -> None:
    proposal_id = unique_id("digest")
    answer = submit(queue[1].agent, proposal_id)
    wrong = "0" * 64
    result = run(queue, "approve", proposal_id, "--revision", "1", "--digest", wrong)
    assert result.returncode == 1
    assert f"the digest {wrong} does not match revision 1's (sha256 {answer['plan_sha256']})" in result.stderr
    assert "not the latest" not in result.stderr


def test_approving_an_executed_proposal_names_the_agent_that_ran_it(queue: tuple[Service, Actors]) -> None:
    service, actors = queue
    proposal_id = unique_id("ran")
    digest = submit(actors.agent, proposal_id)["plan_sha256"]
    assert decide(actors.bob, proposal_id, 1, digest).status_code == 201
    report = claimed_report(actors.agent, proposal_id, 1, digest)
    response = actors.agent.post(f"/v1/proposals/{proposal_id}/executions", json=report)
    assert response.status_code in (200, 201), response.text
    result = run(queue, "approve", proposal_id, "--revision", "1", "--digest", digest)
    assert result.returncode == 1
    assert "already executed by a run of agent, approved by bob" in result.stderr, result.stderr


def test_an_untrusted_certificate_is_said_so_and_a_ca_file_trusts_it(tmp_path: Path) -> None:
    """A queue behind TLS with a private CA: without the CA, "does not trust" (not "did not answer");
    with `--ca-file`, `SSL_CERT_FILE` or `REQUESTS_CA_BUNDLE`, the request reaches the queue."""
    with tls_queue(tmp_path) as (url, ca_file, token):
        base = {"REVIEWER_QUEUE": url, "REVIEWER_TOKEN": token}
        untrusted = run_plain(["list"], base)
        assert "does not trust" in untrusted.stderr and "--ca-file" in untrusted.stderr
        assert "did not answer" not in untrusted.stderr
        for args, extra in (
            (["list", "--ca-file", str(ca_file)], {}),
            (["list"], {"SSL_CERT_FILE": str(ca_file)}),
            (["list"], {"REQUESTS_CA_BUNDLE": str(ca_file)}),
        ):
            trusted = run_plain(args, {**base, **extra})
            assert trusted.returncode == 0, trusted.stderr
            assert "nothing waits" in trusted.stdout


def run_plain(args: list[str], environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "REVIEWER_CA_FILE", "XDG_CONFIG_HOME")
    }
    env.update(environ, XDG_CONFIG_HOME="/nonexistent-config")
    return run_reviewer(reviewer_command(*args), capture_output=True, text=True, env=env, timeout=60)


def test_login_with_no_input_says_what_is_wrong(queue: tuple[Service, Actors]) -> None:
    service, _ = queue
    result = run(queue, "login", "--queue", service.url, REVIEWER_TOKEN="")
    assert result.returncode == 2
    assert "no token was given (the input ended" in result.stderr


def test_login_reads_the_queue_from_reviewer_queue_as_every_command_does(
    queue: tuple[Service, Actors], tmp_path: Path
) -> None:
    """`run` sets REVIEWER_QUEUE to the service; without it and --queue, login says what to give."""
    result = run(queue, "login", XDG_CONFIG_HOME=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "as alice (reviewer)" in result.stdout
    unnamed = run(queue, "login", REVIEWER_QUEUE="", XDG_CONFIG_HOME=str(tmp_path / "other"))
    assert unnamed.returncode == 2
    assert unnamed.stderr == "reviewer login: name the queue: --queue URL, or REVIEWER_QUEUE\n"


def test_login_takes_the_token_from_reviewer_token(queue: tuple[Service, Actors], tmp_path: Path) -> None:
    service, actors = queue
    result = run(queue, "login", "--queue", service.url, XDG_CONFIG_HOME=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "using the token in REVIEWER_TOKEN" in result.stderr and "as alice (reviewer)" in result.stdout
    assert actors.tokens["alice"] not in result.stdout + result.stderr


@contextmanager
def tls_queue(tmp_path: Path) -> Iterator[tuple[str, Path, str]]:
    """`reviewer serve` over HTTPS with a self-signed certificate (its own CA, as a private CA's
    certificate is to a machine that does not trust it): the URL, the CA file, a reviewer's token."""
    cert, key, db = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "q.sqlite3"
    openssl = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1"
    names = ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)]
    subprocess.run([*openssl.split(), *names], check=True, capture_output=True)
    port = free_port()
    process = reviewer_process(
        reviewer_command(
            "serve", "--db", str(db), "--port", str(port), "--tls-cert", str(cert), "--tls-key", str(key)
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            try:
                httpx.get(f"{url}/v1/whoami", verify=ssl.create_default_context(cafile=cert), timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and process.poll() is None, "the HTTPS queue did not start"
                time.sleep(0.1)
        yield url, cert, mint_tokens(db, {"alice": "reviewer"})["alice"]
    finally:
        process.terminate()
        process.wait(10)


HOSTILE = "\x1b[2J\x1b]0;owned\x07[bold red]all fine[/] \u202etxt.exe"
"""A refusal's words as a compromised executor might send them: a screen clear, a title change,
Rich markup and a bidi override."""


def refuse(
    client: httpx.Client, proposal_id: str, digest: str, key: str, **changes: object
) -> httpx.Response:
    refusal = {"revision": 1, "plan_sha256": digest, "kind": "ledger", "message": HOSTILE, **changes}
    return client.post(
        f"/v1/proposals/{proposal_id}/refusals", json=refusal, headers={"Idempotency-Key": key}
    )


def test_show_prints_an_executors_refusal_with_its_hostile_words_inert(queue: tuple[Service, Actors]) -> None:
    """Only the proposal's own agent reports a refusal of it; `show` prints who refused, why and when,
    every control character escaped and the markup as plain brackets; `--json` carries it too."""
    _, actors = queue
    proposal_id = unique_id("refused")
    digest = submit(actors.agent, proposal_id)["plan_sha256"]
    assert decide(actors.alice, proposal_id, 1, digest).status_code == 201
    assert refuse(actors.other_agent, proposal_id, digest, "r1").status_code == 404
    assert refuse(actors.alice, proposal_id, digest, "r1").status_code == 403
    assert refuse(actors.agent, proposal_id, "0" * 64, "r1").status_code == 412
    assert refuse(actors.agent, proposal_id, digest, "r1", kind="shrug").status_code == 422
    assert refuse(actors.agent, proposal_id, digest, "r1", message="").status_code == 422
    unkeyed = {"revision": 1, "plan_sha256": digest, "kind": "trail", "message": "m"}
    assert actors.agent.post(f"/v1/proposals/{proposal_id}/refusals", json=unkeyed).status_code == 400
    stored = refuse(actors.agent, proposal_id, digest, "r1")
    assert stored.status_code == 201, stored.text
    assert stored.json()["state"] == "approved"
    shown = run(queue, "show", proposal_id, columns=400)
    assert shown.returncode == 0, shown.stderr
    [line] = [line for line in shown.stdout.splitlines() if "refused by executor" in line]
    assert line.startswith("! refused by executor agent (ledger), 20")
    assert "\\x1b[2J\\x1b]0;owned\\x07[bold red]all fine[/] \\u202etxt.exe" in line
    assert "it claimed nothing and ran nothing" in line
    assert not any(character in shown.stdout for character in "\x1b\x07\u202e")
    scripted = json.loads(run(queue, "show", proposal_id, "--json").stdout)
    [refused] = scripted["refusals"]
    assert (refused["kind"], refused["message"], refused["refused_by"]) == ("ledger", HOSTILE, "agent")


def test_show_prints_outcome_unknown_for_a_run_that_never_reported(tmp_path: Path) -> None:
    """A claim whose lease ended without a report: the run may have written, and `show` says so."""
    with contextlib.ExitStack() as stack:
        service = start_service(tmp_path, "--claim-lease", "0")
        stack.callback(service.stop)
        actors = make_actors(service)
        stack.callback(actors.close)
        proposal_id = unique_id("lost-run")
        digest = submit(actors.agent, proposal_id)["plan_sha256"]
        assert decide(actors.alice, proposal_id, 1, digest).status_code == 201
        shown_before = run((service, actors), "show", proposal_id, columns=400).stdout
        claimed_report(actors.agent, proposal_id, 1, digest)
        shown = run((service, actors), "show", proposal_id, columns=400)
    assert "outcome unknown" not in shown_before
    assert shown.returncode == 0, shown.stderr
    assert f"{proposal_id} revision 1 of 1: claimed" in shown.stdout
    assert (
        "! outcome unknown: the run claimed by agent did not report by the end of its lease; it may have "
        "written, and never runs again"
    ) in shown.stdout


def test_a_refusal_with_a_nul_is_refused_as_invalid_and_stores_nothing(queue: tuple[Service, Actors]) -> None:
    """PostgreSQL's text holds no NUL: such words are a 422 on every store, never a failure inside."""
    _, actors = queue
    proposal_id = unique_id("nul")
    digest = submit(actors.agent, proposal_id)["plan_sha256"]
    answer = refuse(actors.agent, proposal_id, digest, "n1", message="Trail\x00Refused")
    assert answer.status_code == 422 and answer.json()["error"] == "invalid", answer.text
    assert actors.alice.get(f"/v1/proposals/{proposal_id}/decision").json().get("refusals", []) == []


def test_the_shell_commands_load_no_pydantic_and_no_event_loop(queue: tuple[Service, Actors]) -> None:
    """`list`, `show`, `approve` and `reject` run once and exit: what they load before their first
    request is what a phone's SSH session waits for, so they read the queue's answers with msgspec
    views over a synchronous client (the app's models and asyncio cost more than the requests), and
    httpx's own command line (click, rich, pygments) is not loaded with httpx."""
    approving, rejecting = unique_id("loads-approve"), unique_id("loads-reject")
    answer = submit_sample(queue[1], "k8s-shop-scale-down.server.json", approving)
    submit_sample(queue[1], "deskline-merge.server.json", rejecting)
    commands = {
        "list": ["list"],
        "show": ["show", approving],
        "approve": ["approve", approving, "--revision", "1", "--digest", answer["plan_sha256"]],
        "reject": ["reject", rejecting, "--revision", "1", "--reason", "not now"],
    }
    for name, args in commands.items():
        ran = run(queue, *args, PYTHONPROFILEIMPORTTIME="1")
        assert ran.returncode == 0, ran.stderr[-2000:]
        loaded = {line.rsplit("|", 1)[-1].strip() for line in ran.stderr.splitlines() if "|" in line}
        assert "reviewer.queue.shell_client" in loaded, name
        assert not loaded & {"pydantic", "asyncio", "reviewer.queue.messages"}, name
        assert not loaded & {"httpx._main", "click", "pygments", "rich"}, "httpx's own command line"


def test_a_typed_id_no_id_could_hold_is_refused_before_any_request(queue: tuple[Service, Actors]) -> None:
    """Too long, or outside the ids' characters (a newline's `$` passed a pattern once): one line, exit
    2, as for a malformed id, never the queue's validation of a list word nor a traceback."""
    for typed in ("x" * 129, "abc\n", "=abc\n", "a b"):
        result = run(queue, "show", typed)
        assert result.returncode == 2, (typed, result.stderr)
        assert "is not a proposal id" in result.stderr and "Traceback" not in result.stderr, result.stderr
