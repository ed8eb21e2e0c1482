"""Each docs page's recommended set-up, deployed with the page's own commands as written (read from
the page by `documented_block`, never copied here) against a queue served on loopback, then the
outcome the page promises checked. The one change to a command is where it listens: a port of the
test's instead of 8470 and 8480, and a placeholder of the page (`ID`, `db.internal`) replaced by what
this test made."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters

from reviewer.sample_api.server import RunningSampleApi
from reviewer.signing.sshsig import NAMESPACE, PublicKey
from tests.agent.fixtures import Queue
from tests.agent.helpers import received, reviewer_decides, reviewer_decides_next
from tests.audit.gated import gated_run
from tests.audit.nginx import NGINX
from tests.mcp_gate.test_official import answer
from tests.mcp_gate.test_official import server as official_server
from tests.policies import TWO_APPROVALS
from tests.queue_harness import body, decide, mint_tokens, proposal, submit
from tests.run.harness import WAITS, RunProcess
from tests.service.notifications.receiver import Receiver
from tests.service.ports import free_port
from tests.service.postgres import Cluster
from tests.service.tls import self_signed
from tests.signing.ssh import make_key
from tests.system.documented import ROOT, Shell, as_run, documented_block, fenced, page_function
from tests.system.test_production_setup import wait_for_delivered

STARTED = re.compile(r"listening on")
POLICY_FILE = fenced("policies.md", "# policy.toml", "toml")
"""policies.md's whole file, the policy `serve --policy policy.toml` reads in these set-ups."""


def shell_in(folder: Path) -> Shell:
    """A shell in `folder`, the user's data and config folders in it too."""
    return Shell(
        folder, env={"XDG_DATA_HOME": str(folder / "data"), "XDG_CONFIG_HOME": str(folder / "config")}
    )


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    started = shell_in(tmp_path)
    yield started
    started.close()


def serve(shell: Shell, command: str, port: int, started: re.Pattern[str] = STARTED) -> str:
    """Start a documented `reviewer serve` (or `sample-api`) line on `port` and wait until its output
    says it listens (failing at once if it exits); its URL."""
    log = shell.start(f"{command.rstrip(' &')} --port {port} &")
    process = shell.background[-1]
    deadline = time.monotonic() + 60
    while not started.search(log.read_text(errors="replace")):
        assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}"


def client(url: str, token: str, **kwargs: Any) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30, **kwargs)


def submitted(url: str, token: str, document: dict[str, Any]) -> dict[str, Any]:
    with client(url, token) as agent:
        answer = agent.post("/v1/proposals", content=body(document))
    assert answer.status_code == 201, answer.text
    state: dict[str, Any] = answer.json()
    return state


def test_operating_s_sqlite_queue_and_its_tokens_work_as_the_page_says(shell: Shell) -> None:
    """docs/operating.md: `reviewer serve` (the platform data dir), then the team's file with a
    policy, and every token command; each token then does what its line says."""
    (shell.folder / "policy.toml").write_text(POLICY_FILE)
    make_key(shell.folder, "alice")
    default, with_policy = documented_block("operating.md", "reviewer serve")
    serve(shell, default.text, free_port())
    assert (shell.folder / "data" / "reviewer" / "queue.sqlite3").exists()
    url = serve(shell, with_policy.text, free_port())

    printed = [
        shell.run(as_run(command, {})).stdout.strip()
        for command in documented_block(
            "operating.md", "reviewer token create --db queue.sqlite3 --name alice"
        )
    ]
    alice, agent, prometheus, listing, rotated, _ = printed
    stored = (shell.folder / "queue.sqlite3").read_bytes()
    assert not any(token.encode() in stored for token in (alice, agent, prometheus, rotated))
    assert not any(token in listing for token in (alice, agent, prometheus, rotated))
    assert [line.split("\t")[:2] for line in listing.splitlines()] == [
        ["alice", "reviewer"],
        ["my-agent", "agent"],
        ["prometheus", "metrics"],
    ]
    assert rotated != agent
    with httpx.Client(base_url=url, timeout=30) as anyone:

        def status(token: str, path: str = "/v1/whoami") -> int:
            return anyone.get(path, headers={"Authorization": f"Bearer {token}"}).status_code

        assert status(alice) == 401, "revoked"
        assert (status(rotated), status(agent)) == (200, 200), "the old secret works for --grace"
        assert (status(prometheus, "/metrics"), status(prometheus, "/v1/proposals")) == (200, 403)
    # --pending-ttl 3600: a proposal waits an hour, not the default day.
    state = submitted(url, rotated, proposal("ttl-1"))
    with client(url, rotated) as reader:
        expires = reader.get("/v1/proposals/ttl-1/decision").json()["expires_at"]
    waits = time.mktime(time.strptime(expires[:19], "%Y-%m-%dT%H:%M:%S")) - time.mktime(time.gmtime())
    assert state["state"] == "pending" and 3500 < waits <= 3600, expires


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed (the TLS certificate)")
def test_operating_s_postgresql_queue_serves_tls_and_restores_from_its_dump(
    shell: Shell, postgres_cluster: Cluster
) -> None:
    """docs/operating.md: `createdb`, `serve` on PostgreSQL over TLS on every address, a token; then
    the backup block: `pg_dump`, `createdb`, `pg_restore`, and the restored queue holds the token."""
    shell.env.update(PGHOST="127.0.0.1", PGPORT=str(postgres_cluster.port), PGUSER="postgres")
    cert = shell.folder / "queue.pem"
    self_signed(cert, shell.folder / "queue-key.pem")
    at_the_cluster = {
        "postgresql://reviewer@db.internal:5432/reviewer_queue": postgres_cluster.url("reviewer_queue")
    }
    create_database, served, create_token = documented_block(
        "operating.md", "pip install 'reviewer-gate[postgres]'"
    )
    shell.run(as_run(create_database, {}))
    port = free_port()
    serve(shell, as_run(served, at_the_cluster), port)
    token = shell.run(as_run(create_token, at_the_cluster)).stdout.strip()
    with client(f"https://127.0.0.1:{port}", token, verify=ssl.create_default_context(cafile=cert)) as alice:
        assert alice.get("/v1/whoami").json()["name"] == "alice"

    for command in documented_block("operating.md", "pg_dump --format=custom"):
        shell.run(
            as_run(
                command,
                {
                    "postgresql://reviewer@db.internal/reviewer_queue": at_the_cluster[
                        "postgresql://reviewer@db.internal:5432/reviewer_queue"
                    ]
                }
                if "db.internal" in command.text
                else {},
            )
        )
    restored = shell.run(f"reviewer token list --db {postgres_cluster.url('reviewer_queue_restored')}").stdout
    assert [line.split("\t")[:2] for line in restored.splitlines()] == [["alice", "reviewer"]]


def test_policies_page_s_file_decides_as_the_page_says_and_explains_its_samples(shell: Shell) -> None:
    """docs/policies.md: `serve` with the page's file and a key of the queue's own; a one-ticket
    staging plan is approved by the policy, a plan whose dry run kept writes rejected, a delete in
    production needs two approvals; `policy check` passes the file and `policy explain` prints what
    the page shows."""
    (shell.folder / "policy.toml").write_text(POLICY_FILE)
    key = make_key(shell.folder, "queue_ed25519")
    (served,) = documented_block("policies.md", "reviewer serve --policy policy.toml --policy-key")
    url = serve(shell, as_run(served, {"/etc/reviewer/queue_ed25519": str(key.private)}), free_port())
    agent = mint_tokens(shell.folder / "data" / "reviewer" / "queue.sqlite3", {"my-agent": "agent"})[
        "my-agent"
    ]

    one_ticket = proposal("one-ticket", calls=1)
    one_ticket["target"] = {"api": "deskline", "base_url": "https://api.staging.example/v1"}
    one_ticket["calls"][0].update(tool="create_ticket", effect="create", args={"title": "Printer on fire"})
    kept = proposal("kept")
    kept["dry_run"] = {"via": "server", "write_requests": 2, "writes_kept": 1}
    deletes = proposal("deletes", calls=1)
    deletes["target"] = {"api": "deskline", "base_url": "https://api.prod.example/v1"}
    deletes["calls"][0]["effect"] = "delete"
    states = [submitted(url, agent, document) for document in (one_ticket, kept, deletes)]
    with client(url, agent) as reader:
        decided = [reader.get(f"/v1/proposals/{state['proposal_id']}/decision").json() for state in states]
    assert [(state["state"], state.get("decided_by")) for state in decided] == [
        ("approved", "policy:one staging ticket"),
        ("rejected", "policy:kept writes"),
        ("pending", None),
    ]
    assert (decided[2]["approvals_required"], decided[2]["signatures_required"]) == (2, True)

    check, explain = documented_block("policies.md", "reviewer policy check policy.toml")
    (shell.folder / "sample_proposals").symlink_to(ROOT / "sample_proposals")
    # The rules timed on 2,000 calls, not the default 200,000 (3.7 s of the test's CPU):
    # tests/policy/test_cost.py times them.
    shell.run(as_run(check, {}) + " --calls 2000")
    explained = shell.run(as_run(explain, {})).stdout
    assert fenced("policies.md", "k8s-shop-scale-down") in explained


@pytest.fixture(scope="module")
def served_queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A queue the module's tests share (`queue.sqlite3` in a folder of its own), with a reviewer
    alice and an agent; each test uses its own proposal ids."""
    queue_shell = shell_in(tmp_path_factory.mktemp("queue"))
    url = serve(queue_shell, "reviewer serve --db queue.sqlite3", free_port())
    yield url, mint_tokens(queue_shell.folder / "queue.sqlite3", {"alice": "reviewer", "my-agent": "agent"})
    queue_shell.close()


def document_digest(shown_json: str) -> str:
    digest: str = json.loads(shown_json)["plan_sha256"]
    return digest


def test_reviewing_from_the_command_line_after_login_approves_with_the_line_show_prints(
    shell: Shell, served_queue: tuple[str, dict[str, str]]
) -> None:
    """docs/reviewing.md: `reviewer login` (the token from REVIEWER_TOKEN, as a script gives it),
    then `list`, `show ID` and `show ID --json`, whose approve_command approves the plan."""
    url, tokens = served_queue
    with client(url, tokens["my-agent"]) as agent:
        submit(agent, "review-0001")
    (login,) = documented_block("reviewing.md", "reviewer login --queue")
    shell.run(f"REVIEWER_TOKEN={tokens['alice']} " + as_run(login, {"https://queue.example:8470": url}))
    ids = {"ID": "review-0001", "k3j5": "review-0"}  # the page's id, and the start of one
    said = {
        command.text.split("#")[0].strip(): shell.run(
            as_run(command, {word: ids[word] for word in ids if word in command.text})
        ).stdout
        for command in documented_block("reviewing.md", "reviewer list")
    }
    listed, every, narrowed, for_a_script, shown, as_json, by_prefix, exactly = said.values()
    assert "review-0001" in listed and "review-0001" in every
    assert "review-0001" not in narrowed  # a staging plan with no delete, of a minute ago
    assert json.loads(for_a_script) == []  # no agent of that name
    assert document_digest(as_json) in by_prefix
    assert document_digest(as_json) in exactly
    document = json.loads(as_json)
    assert document["plan_sha256"] in shown
    approve = subprocess.run(
        document["approve_command"],
        cwd=shell.folder,
        env=shell.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert approve.returncode == 0, approve.stderr
    with client(url, tokens["alice"]) as alice:
        assert alice.get("/v1/proposals/review-0001/decision").json()["state"] == "approved"


@pytest.mark.skipif(
    shutil.which("jq") is None, reason="jq is not installed (the page's check by hand; .ci/run installs it)"
)
def test_signing_and_policies_set_up_signs_each_decision_and_ssh_keygen_verifies_it(shell: Shell) -> None:
    """docs/signing-and-policies.md: keys registered by the page's commands, the page's policy, a
    production plan's revision 2 approved signed by alice (one of two approvals) and rejected signed
    by bob, and alice's signature checked by hand with curl, jq and `ssh-keygen -Y verify`."""
    alice_key, bob_key = make_key(shell.folder, "alice"), make_key(shell.folder, "bob")
    (shell.folder / "policy.toml").write_text(
        fenced("signing-and-policies.md", "# Who must approve what", "toml")
    )
    url = serve(shell, "reviewer serve --db queue.sqlite3 --policy policy.toml", free_port())
    bob_fingerprint = PublicKey.from_file(bob_key.public_file).fingerprint
    keys = documented_block("signing-and-policies.md", "reviewer token create --db queue.sqlite3")
    alice = shell.run(as_run(keys[0], {})).stdout.strip()
    bob = [
        shell.run(as_run(command, {"SHA256:8r3v...": bob_fingerprint} if "SHA256" in command.text else {}))
        for command in keys[1:]
    ][0].stdout.strip()
    shell.run(as_run(keys[2], {}))  # bob's key again, so he can sign his rejection
    agent = mint_tokens(shell.folder / "queue.sqlite3", {"my-agent": "agent"})["my-agent"]

    for revision in (1, 2):
        document = proposal("deskline-merge-0042", revision)
        document["target"]["environment"] = "production"
        state = submitted(url, agent, document)
    approve, reject = documented_block("signing-and-policies.md", "reviewer approve deskline-merge-0042")
    shell.env.update(REVIEWER_QUEUE=url)
    approved = shell.run(
        f"REVIEWER_TOKEN={alice} REVIEWER_SIGNING_KEY={alice_key.private} "
        + as_run(approve, {"5be1…(all 64 hex digits)": state["plan_sha256"]})
    ).stdout
    assert approved.strip() == approve.expected.replace("5be1c0d2a9f3", state["plan_sha256"][:12])

    signer = alice_key.public_file.read_text().split()
    (shell.folder / "allowed_signers").write_text(f'alice namespaces="{NAMESPACE}" {signer[0]} {signer[1]}\n')
    shell.env.update(REVIEWER_TOKEN=alice, QUEUE=url)
    for command in documented_block("signing-and-policies.md", "curl -s -H"):
        shell.run(as_run(command, {"ID": "deskline-merge-0042"} if "/ID/" in command.text else {}))
    assert shell.output[-2].startswith('Good "reviewer-decision@v1" signature for alice')

    shell.run(f"REVIEWER_TOKEN={bob} REVIEWER_SIGNING_KEY={bob_key.private} " + as_run(reject, {}))
    with client(url, alice) as reader:
        state = reader.get("/v1/proposals/deskline-merge-0042/decision").json()
    assert (state["state"], state["decided_by"], state["reason"]) == (
        "rejected",
        "bob",
        "t3 is still referenced",
    )
    assert [signature["reviewer"] for signature in state["signatures"]] == ["alice", "bob"]


def test_notifications_webhook_set_up_signs_each_event_and_notify_list_shows_it_delivered(
    shell: Shell,
) -> None:
    """docs/notifications.md: the secret file and `serve --notify URL --notify-secret-file` as the
    page writes them; a submission reaches the receiver signed so that the page's Stripe snippet
    accepts it with the secret the page says to read, and `notify list` shows it delivered."""
    receiver = Receiver().start()
    try:
        make_secret, served = documented_block("notifications.md", "head -c 32 /dev/urandom")
        shell.run(as_run(make_secret, {}))
        url = serve(shell, as_run(served, {"https://hooks.example/reviewer": receiver.url}), free_port())
        db = shell.folder / "data" / "reviewer" / "queue.sqlite3"
        agent = mint_tokens(db, {"my-agent": "agent"})["my-agent"]
        submitted(url, agent, proposal("merge-0001"))
        (arrival,) = receiver.wait_for(1)
    finally:
        receiver.stop()
    verified_event = page_function("notifications.md", "import stripe", "verified_event")
    secret = (shell.folder / "notify-secret").read_text().strip()
    event = verified_event(arrival.body, arrival.headers["reviewer-signature"], secret)
    assert (event["event"], event["proposal_id"], event["id"]) == (
        "proposal.waiting",
        "merge-0001",
        arrival.delivery,
    )

    wait_for_delivered(str(db), 1)
    (listed,) = documented_block("notifications.md", "reviewer notify list")
    rows = shell.run(as_run(listed, {"postgresql://queue@db.internal/reviewer": str(db)})).stdout
    assert [row.split("\t")[1:5:3] for row in rows.splitlines()] == [["proposal.waiting", "delivered"]]


@pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not installed (the Node example needs node 18 or later)"
)
def test_any_language_node_agent_runs_its_approved_plan_and_reports_as_the_page_shows(shell: Shell) -> None:
    """docs/any-language.md: the queue, the agent's token, the sample API with a write credential and
    `reviewer run ... -- node examples/node_agent.mjs`, each as the page writes it; the dry run prints
    the page's lines, alice approves, and the run ends with the page's line."""
    # A copy, not a link: the sandbox shows COMMAND its working folder, not what a link there points to.
    shutil.copytree(ROOT / "examples", shell.folder / "examples")
    queue_line, *exports, api_line, run_line = documented_block("any-language.md", "reviewer serve &")
    queue = serve(shell, queue_line.text, free_port())
    for export in exports:
        shell.run(as_run(export, {}))
    api = serve(shell, api_line.text, free_port(), re.compile("Uvicorn running on"))
    alice = mint_tokens(shell.folder / "data" / "reviewer" / "queue.sqlite3", {"alice": "reviewer"})["alice"]
    run = RunProcess(
        shell.popen(
            as_run(
                run_line,
                {"reviewer run --api http://127.0.0.1:8480": f"reviewer run --queue {queue} --api {api}"},
            )
        )
    )
    try:
        proposal_id, revision = run.wait_for_plan()
        with client(queue, alice) as reviewer:
            digest = reviewer.get(f"/v1/proposals/{proposal_id}/decision").json()["plan_sha256"]
            answer = decide(reviewer, proposal_id, revision, digest)
            assert answer.status_code == 201, answer.text
        stdout, rest = run.process.communicate(timeout=60)
        status, output = run.process.returncode, "".join(run.lines) + rest
    finally:
        run.process.kill()
    dry_run = fenced("any-language.md", "GET /v1/tickets -> 200").splitlines()
    for line in dry_run[:-1]:
        assert line.replace(",...]}", "") in stdout + output
    assert WAITS.search(dry_run[-1])
    ended, audited = fenced("any-language.md", "reviewer run: approved by").splitlines()
    assert status == 1 and ended in output and audited in output, output


def nginx_as_the_page_configures_it(shell: Shell, backend: str) -> tuple[str, Path]:
    """docs/audit-logs.md's `http` block, as written but for its two ports and its log's folder; the
    proxy's URL and the log it writes once it answers."""
    port, folder = free_port(), shell.folder / "nginx"
    http = fenced("audit-logs.md", "http {")
    for placeholder, value in {
        "127.0.0.1:8080": f"127.0.0.1:{port}",
        "/var/log/nginx/": f"{folder}/",
        "http://127.0.0.1:3000": backend,
    }.items():
        assert placeholder in http
        http = http.replace(placeholder, value)
    return nginx_serving(shell, folder, http, f"http://127.0.0.1:{port}/v1/stats"), folder / "api-access.log"


def nginx_serving(shell: Shell, folder: Path, http: str, probe: str) -> str:
    """nginx running `http` as a test's (no daemon, its pid and temporary files in `folder`), once
    `probe` answers 200 through it; the proxy's URL."""
    if NGINX is None:
        pytest.skip("nginx is not installed (Debian's package `nginx`; .ci/run installs it)")
    (folder / "temp").mkdir(parents=True)
    temp = "".join(
        f"{kind}_temp_path {folder}/temp/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (folder / "nginx.conf").write_text(
        f"daemon off; master_process off; pid {folder}/nginx.pid; error_log {folder}/error.log warn;\n"
        f"events {{ worker_connections 64; }}\n{http.replace('http {', 'http { ' + temp, 1)}"
    )
    shell.start(f"{NGINX} -p {folder} -c {folder}/nginx.conf &")
    deadline = time.monotonic() + 15
    while not answers(probe):
        assert time.monotonic() < deadline, (folder / "error.log").read_text()
        time.sleep(0.02)
    return probe[: probe.index("/", len("http://"))]


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def test_audit_logs_nginx_set_up_verifies_a_gated_run_call_by_call(
    shell: Shell, served_queue: tuple[str, dict[str, str]], sample_api: RunningSampleApi
) -> None:
    """docs/audit-logs.md: nginx configured as the page shows in front of the sample API, a gated run
    through it, and the page's `reviewer verify` line: each call matched by its request id, as the
    page's output shows, and no write the run did not make."""
    url, tokens = served_queue
    proxy, access_log = nginx_as_the_page_configures_it(shell, sample_api.base_url)
    gated_run(Queue(url, Path(), tokens["my-agent"], tokens["alice"]), proxy, "merge-0001")
    (verify,) = documented_block("audit-logs.md", "reviewer verify merge-0001")
    shell.env.update(REVIEWER_QUEUE=url, REVIEWER_TOKEN=tokens["alice"])
    lines = shell.run(as_run(verify, {"/var/log/nginx/": f"{access_log.parent}/"})).stdout.splitlines()
    shown = fenced("audit-logs.md", "call 1 create_ticket").splitlines()
    calls = [line for line in lines if line.startswith("call ")]
    assert [line.split(": ")[0] for line in calls] == [line.split(": ")[0] for line in shown[:4]]
    assert all(line.endswith(", by request id") for line in calls), calls
    assert lines[-1] == "audit: 4 of 4 calls matched; 0 writes in the audit log no approved call made"


def test_operating_s_nginx_block_passes_a_long_poll_held_by_the_queue(
    shell: Shell, served_queue: tuple[str, dict[str, str]]
) -> None:
    """docs/operating.md's `location /` block in front of the queue: a long poll through nginx is
    held by the queue and comes back as the queue answered it, a 304 with the same ETag when its wait
    runs out, and the approval when a reviewer approves."""
    url, tokens = served_queue
    port = free_port()
    upstream = url.removeprefix("http://")
    location = fenced("operating.md", "location / {", "nginx")
    server = f"server {{ listen 127.0.0.1:{port}; {location} }}"
    http = f"http {{ upstream reviewer_queue {{ server {upstream}; }} {server} }}"
    proxy = nginx_serving(shell, shell.folder / "nginx", http, f"http://127.0.0.1:{port}/healthz")
    with client(proxy, tokens["my-agent"]) as agent, client(proxy, tokens["alice"]) as alice:
        digest = submit(agent, "held-0001")["plan_sha256"]
        path = "/v1/proposals/held-0001/decision"
        etag = agent.get(path).headers["etag"]
        started = time.monotonic()
        held = agent.get(path, params={"wait": 1}, headers={"If-None-Match": etag})
        assert time.monotonic() - started >= 1
        assert (held.status_code, held.headers["etag"]) == (304, etag)
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(agent.get, path, params={"wait": 30}, headers={"If-None-Match": etag})
            assert decide(alice, "held-0001", 1, digest).status_code == 201
            answered = waiting.result(timeout=40)
    assert (answered.status_code, answered.json()["state"]) == (200, "approved")


def test_decisions_a_request_for_changes_closes_the_revision_and_the_next_one_counts_its_own_quorum(
    shell: Shell,
) -> None:
    """docs/decisions.md: under two approvals, alice approves revision 1 and bob asks for changes,
    which closes it (`proposal.changes_requested` sent); revision 2 starts with no approval, so bob's
    approval alone leaves it pending (alice's vote stayed with revision 1)."""
    (shell.folder / "policy.toml").write_text(TWO_APPROVALS)
    (shell.folder / "secret").write_text("a shared secret")
    (shell.folder / "secret").chmod(0o600)
    receiver = Receiver().start()
    try:
        notified = f"--notify {receiver.url} --notify-secret-file secret"
        url = serve(shell, f"reviewer serve --db queue.sqlite3 --policy policy.toml {notified}", free_port())
        roles = {"agent": "agent", "alice": "reviewer", "bob": "reviewer"}
        agent, alice, bob = (
            client(url, token) for token in mint_tokens(shell.folder / "queue.sqlite3", roles).values()
        )
        first = submit(agent, "merge-0001")
        assert decide(alice, "merge-0001", 1, first["plan_sha256"]).json()["state"] == "pending"
        changes = decide(bob, "merge-0001", 1, first["plan_sha256"], "request_changes", reason="keep t3 open")
        assert changes.json()["state"] == "changes_requested", changes.text
        assert decide(alice, "merge-0001", 1, first["plan_sha256"]).status_code == 409, "closed"
        second = submit(agent, "merge-0001", revision=2)
        state = decide(bob, "merge-0001", 2, second["plan_sha256"]).json()
        assert (state["state"], state["approvals"], state["approvals_required"]) == ("pending", ["bob"], 2)
        for each in (agent, alice, bob):
            each.close()
        arrived = receiver.wait_for(3)
    finally:
        receiver.stop()
    changed = [arrival.document for arrival in arrived if arrival.event == "proposal.changes_requested"]
    assert [(document["decided_by"], document["reason"]) for document in changed] == [("bob", "keep t3 open")]


@pytest.mark.skipif(
    shutil.which("npx") is None and shutil.which("node") is None, reason="node is not installed"
)
def test_mcp_gate_host_configuration_gates_the_filesystem_server_until_a_reviewer_approves(
    shell: Shell, served_queue: tuple[str, dict[str, str]]
) -> None:
    """docs/mcp-gate.md: the host's JSON as the page writes it (the queue, `--name`, `--environment`,
    the page's `--tools` file, the official filesystem server), driven by an MCP host: the file's read
    passes, the write is recorded and waits, and runs once alice approves."""
    url, tokens = served_queue
    root = shell.folder / "docs"
    root.mkdir()
    (root / "notes.txt").write_text("old notes\n")
    tools = shell.folder / "mcp-tools.toml"
    tools.write_text(fenced("mcp-gate.md", "# mcp-tools.toml", "toml"))
    (host_entry,) = json.loads(fenced("mcp-gate.md", "{", "json"))["mcpServers"].values()
    arguments = " ".join(host_entry["args"])
    for placeholder, value in {
        "https://queue.example.internal": url,
        "/etc/reviewer/mcp-tools.toml": str(tools),
        "/opt/mcp-servers/node_modules/.bin/mcp-server-filesystem": official_server("mcp-server-filesystem"),
        "/opt/mcp-servers": str(Path(official_server("mcp-server-filesystem")).parents[2]),
        "/srv/docs": str(root),
    }.items():
        assert placeholder in arguments, placeholder
        arguments = arguments.replace(placeholder, value)
    assert host_entry["env"] == {"REVIEWER_AGENT_TOKEN": "<an agent token>"}
    parameters = StdioServerParameters(
        command=host_entry["command"],
        args=arguments.split(),
        env={"REVIEWER_AGENT_TOKEN": tokens["my-agent"], "PATH": shell.env["PATH"]},
    )

    async def scenario() -> tuple[Any, dict[str, Any]]:
        async with Client(parameters, read_timeout_seconds=60) as host:
            read = await host.call_tool("read_text_file", {"path": str(root / "notes.txt")})
            assert read.structured_content == {"content": "old notes\n"}, "a read the file names passes"
            await host.call_tool("write_file", {"path": str(root / "notes.txt"), "content": "new notes\n"})
            submitted = answer(await host.call_tool("reviewer_submit_plan", {"title": "rewrite the notes"}))
            assert (root / "notes.txt").read_text() == "old notes\n", "nothing written before approval"
            seen = await reviewer_decides(url, tokens["alice"], submitted["proposal_id"], "approve")
            status = {"proposal_id": submitted["proposal_id"]}
            return seen, answer(await host.call_tool("reviewer_plan_status", status))

    seen, executed = asyncio.run(scenario())
    assert (seen.target.api, seen.target.environment) == ("mcp:docs-files", "production")
    assert [(call.tool, call.effect) for call in seen.calls] == [("write_file", "update")]
    assert (executed["state"], executed["ended"]) == ("executed", "completed"), executed
    assert (root / "notes.txt").read_text() == "new notes\n"


def test_agents_page_s_server_dry_run_with_the_api_s_audit_log_runs_the_approved_write_once(
    served_queue: tuple[str, dict[str, str]], sample_api: RunningSampleApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/agents.md: the page's write tool and its server-dry-run Gate (the documented dry-run
    parameter, the API's audit log), as the page writes them, with API and QUEUE this test's: the dry
    run reaches the API asking for a dry run and keeps nothing, alice approves, the write runs once,
    and the audit log matches it."""
    url, tokens = served_queue
    monkeypatch.setenv("REVIEWER_AGENT_TOKEN", tokens["my-agent"])
    page: dict[str, Any] = {"API": sample_api.base_url, "QUEUE": url}
    exec(fenced("agents.md", "from reviewer.agent import HttpRequest", "python"), page)

    async def task() -> None:
        await page["close_ticket"](id="t1")

    async def scenario() -> Any:
        exec(fenced("agents.md", "from reviewer.agent import KUBERNETES_DRY_RUN_QUERY", "python"), page)
        async with page["gate"] as gate:
            decided = asyncio.create_task(reviewer_decides_next(url, tokens["alice"], "agent"))
            result = await gate.run(task, title="Close t1")
            await decided
        return result

    result = asyncio.run(scenario())
    result.raise_for_stop()
    dry_run = result.proposal.dry_run
    assert (dry_run.via, dry_run.write_requests, dry_run.writes_kept) == ("server", 1, 0)
    assert [(entry["method"], entry["path"], entry["query"]) for entry in received(sample_api)] == [
        ("PATCH", "/v1/tickets/t1", {"dryRun": "All"}),
        ("PATCH", "/v1/tickets/t1", {}),
    ]
    verification = result.verification
    assert verification is not None and [check.status for check in verification.checks] == ["same"]
    assert result.audit is not None and [call.verdict for call in result.audit.calls] == ["matched"]
