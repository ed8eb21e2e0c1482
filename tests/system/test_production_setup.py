"""The production set-up the docs recommend, run as one system: `reviewer serve` with docs/policies.md's
policy file (its CEL rules, its escalation steps), docs/notifications.md's Slack-and-pager line
(each service replaced by a
receiver on loopback: Apprise's `json://` for Slack, a webhook for the pager, its event filter kept)
and a signed webhook for every event with the secret file made by the page's own command, reviewers
signed in through the team's OpenID provider as docs/operating.md sets it up (npm's `oidc-provider`,
one for the module), and the trail signed with a key made by docs/trail.md's `ssh-keygen` line; on
SQLite, and on PostgreSQL with two replicas. Agents keep minted tokens; alice signs in with `reviewer
login`, taking the device grant's steps at the provider, and her key is bound to the name the provider
gives her (`reviewer keys add alice@example.com`). The README's Python agent and a `reviewer run` agent
(a Python child in its sandbox, with the sandbox's defaults; its run verified against the API's audit
log; approved with `reviewer approve` on her stored session, signing with her key held only in a real
ssh-agent) and an `mcp-gate` agent (an MCP host over stdio, in front of tests/mcp_gate's upstream
server) run through to `executed`, each executor keeping its state in a folder of its own, and a plan
whose dry run kept writes, put on the queue with `reviewer submit FILE`, is rejected by the policy's
CEL rule.

It asserts what a team relies on: the run ends executed with its report stored, each decision named
as the provider names alice (`alice@example.com`, in the queue, the signed approval, the webhook and
the chat line), and alice's app (`reviewer review` on her stored session, driven by Textual's pilot)
shows after `v` every call of each run matching its plan, the `reviewer run` call matched to the
API's audit line; each target gets exactly its events, each once under its delivery id, the webhook's
checked by the page's Stripe snippet, each waiting event's `links.review` opening its review page (each
replica serving pages with `--web-origin`); `reviewer notify list` shows every delivery delivered; the trail
page's `reviewer trail checkpoint` (from one replica), `export` (from the other) and `verify --key
trail_key.pub --checkpoint` hold over everything the test did, the export names each of alice's
decisions `oidc:ISSUER#alice`, and the checkpoint each executor remembered is one the export extends;
no token, secret, URL secret or line of the trail's private key in any line any process it started
wrote (the replicas' logs, the agents', the `mcp-gate`'s stderr, `reviewer login`, `reviewer approve`,
`keys add`, `notify list`, the trail commands): neither the agents' and the auditor's minted tokens
nor alice's identity and refresh tokens from the provider.

Not run here yet: the pager's own events (`run.unknown` waits out a lease and the 5 s sweep;
`tests/service/notifications/test_serve_notify.py` delivers it to a filtered target); the escalation
steps' pages (the first is ten minutes away; `tests/service/notifications/test_escalation.py` and
`test_serve_escalation.py` page them on a moved clock); executors
refusing a trail that went backwards (`tests/service/routes/test_trail.py`).

This file runs it on SQLite; `test_production_replicas.py` on PostgreSQL with two replicas, a file of
its own because a file goes to one worker whole, and each store takes a minute or two on a loaded
machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shlex
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from textual.events import Paste
from textual.widgets import DataTable

from reviewer.plan.format_fields import proposal_fields
from reviewer.queue.config import CONFIG_FILE_NAME, TOKEN_FILE_NAME, load_settings, read_credential
from reviewer.queue.messages import AuditVerification
from reviewer.queue.sign_in import ProviderSession
from reviewer.reading.verification import Verification
from reviewer.sample_api.server import RunningSampleApi
from reviewer.service.notifications.chat import WORD_JOINER
from reviewer.service.store import SCHEMA_VERSION
from reviewer.service.store.opener import open_store
from reviewer.trail.memory import memory_file
from reviewer.tui.app import ReviewerApp
from reviewer.tui.model.queue_source import QueueSource
from tests.adapters.test_readme_example import shortest_example
from tests.agent.fixtures import Queue
from tests.agent.helpers import received, reviewer_decides, reviewer_decides_next
from tests.forked_commands import reviewer_process, run_reviewer
from tests.mcp_gate.test_server import answer, gate, upstream_writes
from tests.queue_harness import Service, proposal, reviewer_command, start_together, unique_id
from tests.run.harness import RunProcess
from tests.service.notifications.receiver import Arrival, Receiver
from tests.service.oidc import Provider, reviewer_login, running_provider
from tests.service.ports import free_port
from tests.service.postgres import Cluster
from tests.signing.ssh import Agent, SshKey, make_key
from tests.system.documented import Command, Shell, as_run, documented_block, fenced, page_function
from tests.tui.live.helpers import until

pytest.importorskip("apprise", reason="the notify extra: pip install 'reviewer-gate[notify]'")

APPROVED_RUN = ["proposal.waiting", "proposal.decided", "run.ended"]
EVENTS = [*APPROVED_RUN * 3, "proposal.decided"]
"""What happens: the approved runs of the README's agent, a `reviewer run` agent and an `mcp-gate`
agent, then a plan the policy rejects."""
RUN_CHILD = textwrap.dedent(
    """\
    import json, os, urllib.request
    request = urllib.request.Request(
        os.environ["REVIEWER_API_URL"] + "/v1/tickets",
        data=json.dumps({"title": "Printer on fire"}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request) as answer:
        print("created", answer.status)
    """
)
"""`reviewer run`'s child: a plain Python agent that opens one ticket through the gate, in its sandbox."""


def documented_serve_arguments(db: str, slack: str, pager: str) -> list[str]:
    """docs/notifications.md's production `reviewer serve` line, as written, with its database and
    its two services' URLs pointed at this test's (each `EVENTS=` filter kept as the page has it)."""
    (command,) = documented_block("notifications.md", "pip install 'reviewer-gate[notify]'")
    words = shlex.split(command.text)
    assert words[:2] == ["reviewer", "serve"], words
    replaced = []
    for word in words[2:]:
        events, _, url = word.partition("=") if "=" in word.split("://")[0] else ("", "", word)
        if url.startswith("slack://"):
            word = slack
        elif url.startswith("pagerduty://"):
            word = f"{events}={pager}"
        elif url.startswith("postgresql://"):
            word = db
        replaced.append(word)
    return replaced


def serve_options(command: Command, replacements: dict[str, str]) -> list[str]:
    """The options of a page's `reviewer serve --db queue.sqlite3 ...` line (Service gives --db and
    --port itself), its placeholders replaced by this test's."""
    words = shlex.split(as_run(command, replacements))
    assert words[:4] == ["reviewer", "serve", "--db", "queue.sqlite3"], words
    return words[4:]


@dataclass(frozen=True)
class Signer:
    """Alice's signing key, its private half only in her running ssh-agent's keeping."""

    key: SshKey
    agent: Agent


@dataclass(frozen=True)
class Alice:
    """Alice as the provider signed her in with `reviewer login`: her configuration folder (which
    holds the session every `reviewer` command renews), the identity token it holds (what the app
    and this test's own requests send) and her signing key."""

    home: Path
    session: ProviderSession
    signer: Signer

    @property
    def token(self) -> str:
        return self.session.id_token


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    """The team's OpenID provider (npm's `oidc-provider`), one for the module."""
    with running_provider(tmp_path_factory.mktemp("provider")) as running:
        yield running


@pytest.fixture
def receivers() -> Iterator[dict[str, Receiver]]:
    started = {name: Receiver().start() for name in ("webhook", "chat", "pager")}
    yield started
    for receiver in started.values():
        receiver.stop()


def run_the_readme_agent(
    sample_api: RunningSampleApi,
    agent_queue: str,
    reviewer_queue: str,
    agent_token: str,
    alice: Alice,
    state: Path,
) -> tuple[str, str]:
    """The README's shortest gated agent, as printed but for its two URLs (its state, the trail
    checkpoints it saw, in `state`), approved by alice (through `reviewer_queue`, another replica
    where there are two); the proposal's id and what it printed."""
    code = shortest_example().replace("http://127.0.0.1:8480", sample_api.base_url)
    code = code.replace("http://127.0.0.1:8470", agent_queue)
    agent = subprocess.Popen(
        [sys.executable, "-c", code],
        env={**os.environ, "REVIEWER_AGENT_TOKEN": agent_token, "XDG_STATE_HOME": str(state)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        decided = asyncio.run(reviewer_decides_next(reviewer_queue, alice.token, "agent", "approve"))
        output, errors = agent.communicate(timeout=60)
    finally:
        agent.kill()
    assert agent.returncode == 0, errors
    return decided.proposal_id, output + errors


def decision_of(queue: str, token: str, proposal_id: str) -> dict[str, Any]:
    with httpx.Client(base_url=queue, headers={"Authorization": f"Bearer {token}"}) as reviewer:
        state: dict[str, Any] = reviewer.get(f"/v1/proposals/{proposal_id}/decision").json()
    return state


def alice_approves_signed(queue: str, alice: Alice, proposal_id: str, revision: int) -> str:
    """`reviewer approve` as alice runs it, signed in through the provider (the session `reviewer
    login` stored, no token given), her key only in her ssh-agent (`--key` names the `.pub`); what it
    printed, after checking the queue took the approval as signed under the provider's name for her."""
    digest = decision_of(queue, alice.token, proposal_id)["plan_sha256"]
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REVIEWER_SIGNING_KEY", "XDG_CONFIG_HOME", "REVIEWER_TOKEN")
    }
    approve = run_reviewer(
        reviewer_command(
            "approve",
            proposal_id,
            "--revision",
            str(revision),
            "--digest",
            digest,
            "--queue",
            queue,
            "--key",
            str(alice.signer.key.public_file),
        ),
        capture_output=True,
        text=True,
        timeout=60,
        env={**environment, "SSH_AUTH_SOCK": alice.signer.agent.socket, "XDG_CONFIG_HOME": str(alice.home)},
    )
    assert approve.returncode == 0 and approve.stdout.rstrip().endswith("(signed)"), approve
    state = decision_of(queue, alice.token, proposal_id)
    assert [signature["reviewer"] for signature in state["signatures"]] == ["alice@example.com"], state
    return approve.stdout + approve.stderr


def run_a_reviewer_run_agent(
    sample_api: RunningSampleApi,
    agent_queue: str,
    reviewer_queue: str,
    agent_token: str,
    alice: Alice,
    state: Path,
) -> tuple[str, str]:
    """`reviewer run` (its child sandboxed, its dry run recorded, its state in `state`) submitting
    through `agent_queue`, approved by alice through `reviewer_queue` with her signature; the
    proposal's id and everything it and the approval printed, after checking it exited 0 with its run
    verified against the API's audit log."""
    arguments = ("--api", sample_api.base_url, "--queue", agent_queue, "--audit", "api:/v1/audit")
    run = RunProcess(
        reviewer_process(
            reviewer_command(
                "run",
                *arguments,
                "--title",
                "open one ticket",
                "--poll-interval",
                "0.1",
                "--",
                sys.executable,
                "-c",
                RUN_CHILD,
            ),
            env={**os.environ, "REVIEWER_AGENT_TOKEN": agent_token, "XDG_STATE_HOME": str(state)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    try:
        proposal_id, revision = run.wait_for_plan()
        approved = alice_approves_signed(reviewer_queue, alice, proposal_id, revision)
        status, output = run.finish()
    finally:
        run.process.kill()
    assert status == 0, output
    output += approved
    # The API is shared: the README agent's approved PATCH, seconds earlier, may fall in this run's
    # windows, and is then said as a write this run did not make. Nothing else may be.
    assert "audit: 1 of 1 calls matched;" in output, output
    around = [line for line in output.splitlines() if "unplanned" in line and ": PATCH" in line]
    assert all("PATCH /v1/tickets/t1 200" in line for line in around), output
    assert len(around) == sum("unplanned" in line and "200 at" in line for line in output.splitlines()), (
        output
    )
    return proposal_id, output


def run_an_mcp_gate_agent(
    agent_queue: str, reviewer_queue: str, agent_token: str, alice: Alice, folder: Path, state: Path
) -> tuple[str, str]:
    """An MCP host driving `reviewer mcp-gate` over stdio (its state in `state`) in front of the test
    upstream server (as tests/mcp_gate drives it): one ticket opened, the plan submitted through
    `agent_queue`, approved by alice through `reviewer_queue`, run by the gate; the proposal's id and
    what the gate wrote on stderr, after checking its run."""
    queue = Queue(agent_queue, Path(), agent_token, alice.token)
    log, stderr = folder / "upstream.log", folder / "mcp-gate.stderr"

    async def scenario() -> tuple[str, dict[str, Any]]:
        with stderr.open("w") as errlog:
            async with gate(queue, log, errlog=errlog, state_home=state) as host:
                await host.call_tool("open_ticket", {"title": "Printer on fire"})
                submitted = answer(await host.call_tool("reviewer_submit_plan", {"title": "open one ticket"}))
                await reviewer_decides(reviewer_queue, alice.token, submitted["proposal_id"], "approve")
                status = {"proposal_id": submitted["proposal_id"]}
                return submitted["proposal_id"], answer(await host.call_tool("reviewer_plan_status", status))

    proposal_id, executed = asyncio.run(scenario())
    assert (executed["state"], executed.get("ended")) == ("executed", "completed"), executed
    assert upstream_writes(log) == [{"tool": "open_ticket", "title": "Printer on fire", "id": "tk-3"}]
    return proposal_id, stderr.read_text()


def verified_with_v(
    queue: str, alice: Alice, proposal_ids: list[str]
) -> dict[str, tuple[Verification, AuditVerification | None]]:
    """What the reviewer's app shows after `v` on each executed proposal: the app on `queue` as
    `reviewer review` runs it (signed in with the session alice's `reviewer login` stored, renewed as
    it ends), each proposal found in the list with `/` and its id (pasted, as a terminal hands over a
    copied id: typed, each of its letters would wait for the app to settle), opened, its real run
    fetched, `v` pressed, then back to the whole list (`escape` clears the filter)."""
    from reviewer.tui.screens.verification import VerificationScreen

    folder = alice.home / "reviewer"
    settings = load_settings(
        queue, {}, config_path=folder / CONFIG_FILE_NAME, token_path=folder / TOKEN_FILE_NAME
    )
    assert settings.session is not None, settings

    async def scenario() -> dict[str, tuple[Verification, AuditVerification | None]]:
        app = ReviewerApp(QueueSource(settings.queue_url, settings.credential(), poll_interval=60))
        shown: dict[str, tuple[Verification, AuditVerification | None]] = {}
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: set(proposal_ids) <= set(app.items), "the executed proposals listed")
            for proposal_id in proposal_ids:
                await pilot.press("slash")
                app.post_message(Paste(proposal_id))  # as the terminal hands over an id she copied
                await pilot.press("enter")
                found = app.items[proposal_id]
                await until(pilot, lambda: app.queue_screen.highlighted_item() is found, "found with /")  # noqa: B023
                await pilot.press("enter")
                await until(pilot, lambda: getattr(app.screen, "item", None) is found, "its review")  # noqa: B023
                await until(pilot, lambda: 1 in app.items[proposal_id].executions, "its real run")  # noqa: B023
                await until(pilot, lambda: 1 in app.items[proposal_id].verified, "its digest checked")  # noqa: B023
                await pilot.press("v")
                await until(pilot, lambda: isinstance(app.screen, VerificationScreen), "the verification")
                screen = app.screen
                await until(pilot, lambda: screen.verification is not None, "the comparison")  # noqa: B023
                shown[proposal_id] = screen.verification, screen.audited
                await pilot.press("escape", "escape")
                await until(pilot, lambda: app.screen is app.queue_screen, "the list again")
                await pilot.press("escape")
                table = app.queue_screen.query_one("#queue", DataTable)
                await until(pilot, lambda: table.row_count == len(app.items), "the whole list again")  # noqa: B023
        return shown

    return asyncio.run(scenario())


def submit_a_plan_whose_dry_run_kept_writes(queue: str, token: str, folder: Path) -> str:
    """A plan whose dry run the API did not honour, as an agent without the Python gate (which
    refuses to send one) puts it on the queue, with `reviewer submit FILE`: the policy's `kept writes`
    rule rejects it at once. What the command printed."""
    document = proposal(unique_id("kept"))
    document["dry_run"] = {"via": "server", "write_requests": 2, "writes_kept": 1}
    plan = folder / "kept-writes.json"
    plan.write_text(json.dumps(document))
    submitted = run_reviewer(
        reviewer_command("submit", str(plan), "--queue", queue),
        capture_output=True,
        text=True,
        env={**os.environ, "REVIEWER_AGENT_TOKEN": token},
        timeout=60,
    )
    assert submitted.returncode == 0, submitted.stderr
    assert submitted.stdout.splitlines()[0].endswith(", rejected"), submitted.stdout
    with httpx.Client(base_url=queue, headers={"Authorization": f"Bearer {token}"}) as agent:
        state = agent.get(f"/v1/proposals/{document['proposal_id']}/decision").json()
    assert state["decided_by"] == "policy:kept writes", state
    return submitted.stdout + submitted.stderr


def notify_list(db: str) -> list[list[str]]:
    listing = run_reviewer(
        reviewer_command("notify", "list", "--db", db), capture_output=True, text=True, check=True
    ).stdout
    return [line.split("\t") for line in listing.splitlines()]


def wait_for_delivered(db: str, expected: int, timeout: float = 30) -> None:
    """Return once `expected` deliveries are delivered (a bounded poll of the outbox, in this process:
    the command that lists them is run once, after)."""
    store = open_store(db, clock=time.time, pending_ttl=3600, approval_ttl=3600, create=False)
    deadline = time.monotonic() + timeout
    try:
        while sum(row.state == "delivered" for row in store.list_deliveries()) < expected:
            if time.monotonic() > deadline:
                raise AssertionError(f"not {expected} delivered: {store.list_deliveries()}")
            time.sleep(0.05)
    finally:
        store.close()


def once_each(arrivals: list[Arrival]) -> list[str]:
    """The events of `arrivals`, in order, after checking that no delivery id arrived twice."""
    ids = [arrival.delivery for arrival in arrivals]
    assert len(ids) == len(set(ids)), f"a delivery id arrived twice: {ids}"
    return sorted(arrival.event for arrival in arrivals)


def alice_signs_in(queue: str, folder: Path, signer: Signer) -> tuple[Alice, str]:
    """`reviewer login` as alice runs it, her steps taken at the provider; her, and what it printed."""
    home = folder / "alice"
    code, out, err, page = reviewer_login(queue, home, "alice")
    assert (code, page) == (0, "Sign-in Success"), err
    session = read_credential(home / "reviewer" / "token")
    assert isinstance(session, ProviderSession), session
    return Alice(home, session, signer), out + err


def remembered_checkpoint(state: Path, queue: str, folder: Path) -> Path:
    """The newest checkpoint of `queue`'s trail an executor kept in its state folder, as a file."""
    kept = json.loads(memory_file(queue, state / "reviewer" / "trail").read_text())
    path = folder / f"{state.name}.checkpoint"
    path.write_text(kept["checkpoint"])
    return path


def exported_leaves(export: Path) -> list[dict[str, Any]]:
    header, *entries = (json.loads(line) for line in export.read_text().splitlines())
    assert header["since"] == 0 and header["size"] == len(entries), header
    return [entry["leaf"] for entry in entries]


def review_pages_open(arrived: list[Arrival], ports: list[int]) -> None:
    """Each waiting event links to its revision's review page, which opens (a GET, deciding nothing)
    and shows the run's end: `executed`, no button."""
    waiting = [
        event
        for event in map(json.loads, (arrival.body for arrival in arrived))
        if event["event"] == "proposal.waiting"
    ]
    assert len(waiting) == 3, waiting
    for event in waiting:
        link = event["links"]["review"]
        origin = next(
            f"http://localhost:{port}" for port in ports if link.startswith(f"http://localhost:{port}/")
        )
        assert link.startswith(f"{origin}/review/{event['proposal_id']}/1?key="), link
        page = httpx.get(link.replace("localhost", "127.0.0.1", 1))
        assert page.status_code == 200 and "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert '<span class="badge">executed</span>' in page.text and ">Approve<" not in page.text


def runs_each_kind_of_agent_to_executed(
    store: Literal["sqlite", "postgresql"], request: pytest.FixtureRequest
) -> None:
    """The whole set-up on `store`, from the fixtures of the test that asks (a module of its own
    imports this one's `provider` and `receivers`)."""
    tmp_path: Path = request.getfixturevalue("tmp_path")
    sample_api: RunningSampleApi = request.getfixturevalue("sample_api")
    receivers: dict[str, Receiver] = request.getfixturevalue("receivers")
    agent: Agent = request.getfixturevalue("agent")
    provider: Provider = request.getfixturevalue("provider")
    shell = Shell(tmp_path)
    # The secret file, made by the page's own command; the policy file, the page's own; the trail's
    # key, made by its page's command.
    make_secret = fenced("notifications.md", "head -c 32 /dev/urandom").splitlines()[0]
    subprocess.run(["bash", "-c", make_secret], cwd=tmp_path, check=True)
    secret_file = tmp_path / "notify-secret"
    policy = tmp_path / "policy.toml"
    policy.write_text(fenced("policies.md", "# policy.toml", "toml"))
    trail_key = {"/etc/reviewer/trail_key": str(tmp_path / "trail_key")}
    keygen, serve_signing, make_auditor = documented_block("trail.md", "ssh-keygen -t ed25519")
    [serve_signing_in] = documented_block("operating.md", "reviewer serve --db queue.sqlite3 --oidc-issuer")
    shell.run(as_run(keygen, trail_key))
    url_secret = secrets.token_hex(12)
    webhook = f"{receivers['webhook'].url}/{url_secret}"
    chat = f"json://127.0.0.1:{receivers['chat'].port}/chat-{url_secret}"
    pager = f"{receivers['pager'].url}?key={url_secret}"
    if store == "sqlite":
        db, replicas = str(tmp_path / "queue.sqlite3"), 1
    else:
        cluster: Cluster = request.getfixturevalue("postgres_cluster")
        db, replicas = cluster.fresh_database(), 2
    arguments = documented_serve_arguments(db, chat, pager)
    serve_args = (
        *arguments[arguments.index("--db") + 2 :],  # Service gives --db and --port itself
        *("--notify", webhook, "--notify-secret-file", str(secret_file), "--policy", str(policy)),
        *serve_options(serve_signing_in, {"https://sso.example.com/realms/platform": provider.issuer}),
        *serve_options(serve_signing, trail_key),
    )
    ports = [free_port() for _ in range(replicas)]  # each replica serves the review pages at its own origin
    services = [
        Service(
            db=db,
            log_path=tmp_path / f"replica-{number}.log",
            port=port,
            serve_args=(*serve_args, "--web-origin", f"http://localhost:{port}"),
        )
        for number, port in enumerate(ports)
    ]
    if store == "sqlite":
        services[0].start()
    else:
        start_together(*services)
    states = {name: tmp_path / "state" / name for name in ("readme-agent", "reviewer-run", "mcp-gate")}
    try:
        tokens = services[0].tokens({"my-agent": "agent"})  # a machine keeps its minted token
        # Each replica says what it reads, as an agent asks it before submitting (`GET /v1`).
        for service in services:
            said = httpx.get(f"{service.url}/v1").json()
            assert said["schema_version"] == SCHEMA_VERSION
            assert said["proposal_fields"] == list(proposal_fields())
        signer = Signer(make_key(tmp_path, "alice"), agent)
        signer.agent.add(signer.key)
        signer.key.private.unlink()  # only the agent holds it now
        alice, signed_in = alice_signs_in(services[-1].url, tmp_path, signer)
        # Her key is bound to the name the provider gives her, after her first sign-in.
        keys_added = run_reviewer(
            reviewer_command("keys", "add", "alice@example.com", str(signer.key.public_file), "--db", db),
            check=True,
            capture_output=True,
            text=True,
        )
        agent_token = tokens["my-agent"]
        readme_id, readme_output = run_the_readme_agent(
            sample_api, services[0].url, services[-1].url, agent_token, alice, states["readme-agent"]
        )
        run_id, run_output = run_a_reviewer_run_agent(
            sample_api, services[0].url, services[-1].url, agent_token, alice, states["reviewer-run"]
        )
        mcp_id, mcp_gate_stderr = run_an_mcp_gate_agent(
            services[0].url, services[-1].url, agent_token, alice, tmp_path, states["mcp-gate"]
        )
        outputs = [
            readme_output,
            run_output,
            mcp_gate_stderr,
            keys_added.stdout,
            keys_added.stderr,
            signed_in,
        ]
        with httpx.Client(
            base_url=services[-1].url, headers={"Authorization": f"Bearer {alice.token}"}
        ) as reviewer:
            for proposal_id in (readme_id, run_id, mcp_id):
                state = reviewer.get(f"/v1/proposals/{proposal_id}/decision").json()
                (run,) = reviewer.get(f"/v1/proposals/{proposal_id}/executions").json()["executions"]
                assert state["state"] == "executed" and state["decided_by"] == "alice@example.com", state
                assert (run["ended"], len(run["calls"])) == ("completed", 1), run
        # Each run, verified as alice verifies it: `v` in the app.
        shown = verified_with_v(services[-1].url, alice, [readme_id, run_id, mcp_id])
        for proposal_id, (verification, _) in shown.items():
            assert [check.status for check in verification.checks] == ["same"], (proposal_id, verification)
            assert (verification.planned, verification.not_executed) == (1, ()), (proposal_id, verification)
        # `reviewer run --audit` held its run against the API's log, by request id: `v` shows the verdict.
        audited = shown[run_id][1]
        assert audited is not None and audited["source"] == "api:/v1/audit", audited
        assert [call["verdict"] for call in audited["calls"]] == ["matched"] and audited["complete"], audited
        # Both agents record their dry run: only the two approved runs reach the API.
        assert [entry["query"] for entry in received(sample_api)] == [{}, {}]
        outputs.append(submit_a_plan_whose_dry_run_kept_writes(services[-1].url, agent_token, tmp_path))

        wait_for_delivered(db, 2 * len(EVENTS))
        review_pages_open(receivers["webhook"].accepted(), ports)
        rows = notify_list(db)
        outputs += ["\t".join(row) for row in rows]
        assert [row[4] for row in rows] == ["delivered"] * 2 * len(EVENTS), rows
        assert not any(row[3].startswith(f"http://127.0.0.1:{receivers['pager'].port} ") for row in rows), (
            "the pager gets only run.unknown and proposal.reminder"
        )

        # The trail, checked as its page says: the checkpoint kept (from one replica), the export
        # taken (from the other) and verified against it, and against each executor's remembered one.
        minted = shell.run(as_run(make_auditor, {"queue.sqlite3": db}))
        shell.env["REVIEWER_TOKEN"] = audit_token = minted.stdout.strip()
        checkpoint, export, verify, _prove, _verify_entry = documented_block(
            "trail.md", "reviewer trail checkpoint"
        )
        shell.run(as_run(checkpoint, {"https://queue.example": services[0].url}))
        shell.run(as_run(export, {"https://queue.example": services[-1].url}))
        leaves = exported_leaves(tmp_path / "trail.jsonl")
        verified = shell.run(as_run(verify, {})).stdout
        assert f"verified: {len(leaves)} entries from entry 0" in verified, verified
        assert "extends the checkpoint seen before" in verified, verified
        for name, state_folder in states.items():
            kept = remembered_checkpoint(state_folder, services[0].url, tmp_path)
            extends = shell.run(as_run(verify, {"2026-12-04.checkpoint": str(kept)})).stdout
            assert "extends the checkpoint seen before" in extends, (name, extends)
    finally:
        for service in services:
            service.stop()
    outputs += [text for text in shell.output if text != minted.stdout]  # printed once, as asked

    # The trail names each decision as the provider names alice, and how she signed in.
    approvals = [leaf for leaf in leaves if leaf["event"] == "approved"]
    assert {(leaf["actor"], leaf["identity"]) for leaf in approvals} == {
        ("alice@example.com", f"oidc:{provider.issuer}#alice")
    }, approvals
    assert sorted(leaf["proposal_id"] for leaf in approvals) == sorted([readme_id, run_id, mcp_id])
    assert [leaf["signed"] is not None for leaf in approvals].count(True) == 1  # `reviewer approve`'s

    # Each target got exactly its events, once per delivery id; the pager none of these.
    arrived = receivers["webhook"].accepted()
    assert once_each(arrived) == sorted(EVENTS)
    chat_titles = sorted(  # as a reader sees them: without the word joiners that keep a name no link
        json.loads(arrival.body)["title"].replace(WORD_JOINER, "").split(":")[0]
        for arrival in receivers["chat"].accepted()
    )
    assert chat_titles == sorted(
        ["Approved by alice@example.com", "Run completed", "Waiting for review"] * 3 + ["Rejected by policy"]
    )
    assert receivers["pager"].arrivals == []

    # The webhook's deliveries pass the page's Stripe check with the secret the page says to read.
    verified_event = page_function("notifications.md", "import stripe", "verified_event")
    secret = secret_file.read_text().strip()
    for arrival in arrived:
        event = verified_event(arrival.body, arrival.headers["reviewer-signature"], secret)
        assert event["id"] == arrival.delivery
    assert sorted(
        arrival.document["decided_by"] for arrival in arrived if arrival.event == "proposal.decided"
    ) == ["alice@example.com"] * 3 + ["policy:kept writes"]
    ended = [arrival.document for arrival in arrived if arrival.event == "run.ended"]
    assert sorted(document["proposal_id"] for document in ended) == sorted([readme_id, run_id, mcp_id])
    for document in ended:
        assert (document["ended"], document["calls_sent"], document["calls_kept"]) == ("completed", 1, 1)

    # No token, secret or private key in any log line.
    logs = "\n".join(outputs) + "".join(service.log() for service in services)
    private_key = [
        line for line in (tmp_path / "trail_key").read_text().splitlines() if not line.startswith("-----")
    ]
    assert private_key
    last_session = read_credential(alice.home / "reviewer" / "token")
    assert isinstance(last_session, ProviderSession), last_session
    for name, value in {
        **tokens,
        "audit token": audit_token,
        **{
            f"alice's {kind} token ({when})": token or ""
            for when, session in (("at sign-in", alice.session), ("as last renewed", last_session))
            for kind, token in (("identity", session.id_token), ("refresh", session.refresh_token))
        },
        "notify secret": secret,
        "URL secret": url_secret,
        **{f"trail key line {number}": line for number, line in enumerate(private_key)},
    }.items():
        assert value and value not in logs, f"{name} is in a log"
    assert "notifying http://127.0.0.1" in logs and "only proposal.reminder, run.unknown" in logs
    assert "escalates after 10m, 30m" in logs, "the page's production escalation, loaded"
    # The documented policy's change window is on: the runs above, none in production, were not kept.
    assert "window deny 'year-end freeze': 0 0 24 12 * for 9d, Europe/Berlin" in logs


def test_the_documented_production_setup_runs_each_kind_of_agent_to_executed(
    request: pytest.FixtureRequest,
) -> None:
    runs_each_kind_of_agent_to_executed("sqlite", request)
