"""The real queue service for tests: `python -m reviewer serve` on a free loopback port (forked from
a Python that has imported it, where nothing tells a fork from a start: `tests.forked_commands`),
its tokens minted the way an operator mints them, and the requests every test makes of it.

A plain module, imported by the test folders that need a queue; the fixtures that start one per
module are in `tests/service/conftest.py`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from reviewer.service.auth import hash_token, mint_token
from reviewer.service.store import DEFAULT_APPROVAL_TTL, DEFAULT_PENDING_TTL
from reviewer.service.store.opener import open_store
from tests.builders import proposal_document
from tests.forked_commands import reviewer_process
from tests.service.ports import free_port

PYTHON = sys.executable
STARTUP_TIMEOUT = 90.0
"""A bound, not a wait: on a loaded machine a service took 20 s to import and start."""
KEEPALIVE_EXPIRY = 0.5
"""Seconds a test's client keeps an idle connection for reuse: under the service's keep-alive (5 s,
or its header deadline when shorter, never under 1 s), so no request goes down a connection the
service is closing at that moment (that race reset a reviewer's GET sent 5 s after the last)."""


def reviewer_command(*args: str) -> list[str]:
    return [PYTHON, "-m", "reviewer", *args]


class PortTaken(RuntimeError):
    """The service could not bind its port: another process took it after the probe."""


def wait_until_serving(url: str, process: subprocess.Popen[bytes], log: Callable[[], str]) -> None:
    """Return once this process says it listens and the service answers HTTP at all (a 401 from
    `/v1/whoami`: nothing it must compute first, unlike the OpenAPI document, which took longer than a
    probe's timeout on a loaded machine). Without the first, an answer from another run's service on
    the same port would pass for this one's. `log` is this process's output so far."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = log()
            error = PortTaken if "Address already in use" in output else RuntimeError
            raise error(f"the service exited with {process.returncode}:\n{output}")
        if "listening on" not in log():
            time.sleep(0.05)
            continue
        try:
            httpx.get(f"{url}/v1/whoami", timeout=STARTUP_TIMEOUT)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise RuntimeError(f"the service did not start within {STARTUP_TIMEOUT} s:\n{log()}")


def mint_tokens(db: Path | str, roles: dict[str, str]) -> dict[str, str]:
    """A token for each name, with its role, minted as `reviewer token create` mints it (through the
    store of the queue's database) but in this process: run as commands, the suite's 136 tokens
    cost 90 CPU-seconds of Python start-ups. The command itself is tested in
    `tests/service/commands/test_command_line.py`."""
    store = open_store(
        db, clock=time.time, pending_ttl=DEFAULT_PENDING_TTL, approval_ttl=DEFAULT_APPROVAL_TTL, create=False
    )
    try:
        minted = {name: mint_token() for name in roles}
        for name, role in roles.items():
            store.create_token(name, role, hash_token(minted[name]))
    finally:
        store.close()
    return minted


@dataclass
class Service:
    """One `reviewer serve` process and its database (a file or a PostgreSQL URL); can be killed and
    started again on the same database."""

    db: Path | str
    log_path: Path
    serve_args: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(default_factory=dict)
    """Set in the process's environment besides the test's own (a fake clock's)."""
    prefix: tuple[str, ...] = ()
    """A command the service runs under (`unshare`, to give it a small disk of its own)."""
    python: tuple[str, ...] = (PYTHON,)
    """The interpreter that runs `reviewer serve`: another release's (`tests.service.previous_release`)."""
    process: subprocess.Popen[bytes] | None = None
    served: bool = False
    """Whether it has served once: its port is then known to clients and never changes."""
    _log_offset: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start it and wait until it serves; a first start whose port another process took after the
        probe starts again on another port."""
        for attempt in range(3):
            self.launch()
            try:
                self.wait_until_serving()
                return
            except PortTaken:
                if self.served or attempt == 2:
                    raise
                self.port = free_port()
            except RuntimeError:
                self.kill()
                raise

    def launch(self) -> None:
        """Start the process and return at once (`wait_until_serving` waits for it)."""
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        command = [*self.prefix, *self.python, "-m", "reviewer", "serve", "--db", str(self.db)]
        command += ["--port", str(self.port), *self.serve_args]
        with self.log_path.open("ab") as log:  # forked where nothing tells a fork from a start
            self.process = reviewer_process(
                command, stdout=log, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
            )

    def wait_until_serving(self) -> None:
        assert self.process is not None
        wait_until_serving(self.url, self.process, self.log_since_launch)
        self.served = True

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        returncode = self.process.wait(timeout)
        self.process = None
        return returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_since_launch(self) -> str:
        """What the running process has written (a restart appends to the same log)."""
        with self.log_path.open("rb") as log:
            log.seek(self._log_offset)
            return log.read().decode(errors="replace")

    def token(self, name: str, role: str) -> str:
        return self.tokens({name: role})[name]

    def tokens(self, roles: dict[str, str]) -> dict[str, str]:
        return mint_tokens(self.db, roles)

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        kwargs.setdefault("limits", httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY))
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)


def start_together(*services: Service) -> None:
    """Start every service at once, as replicas behind a load balancer come up, and wait for all."""
    for service in services:
        service.launch()
    for service in services:
        service.wait_until_serving()


def start_service(tmp: Path, *serve_args: str) -> Service:
    service = Service(db=tmp / "queue.sqlite3", log_path=tmp / "service.log", serve_args=serve_args)
    service.start()
    return service


@dataclass
class Actors:
    """HTTP clients of two reviewers and two agents, each with its own token."""

    alice: httpx.Client
    bob: httpx.Client
    agent: httpx.Client
    other_agent: httpx.Client
    tokens: dict[str, str]

    def close(self) -> None:
        for client in (self.alice, self.bob, self.agent, self.other_agent):
            client.close()


def make_actors(service: Service) -> Actors:
    tokens = service.tokens({"alice": "reviewer", "bob": "reviewer", "agent": "agent", "other": "agent"})
    return Actors(
        alice=service.client(tokens["alice"]),
        bob=service.client(tokens["bob"]),
        agent=service.client(tokens["agent"]),
        other_agent=service.client(tokens["other"]),
        tokens=tokens,
    )


def served_with_actors(folder: Path) -> Iterator[tuple[Service, Actors]]:
    """A module's queue: a service in `folder` and its four actors, closed and stopped after."""
    service = start_service(folder)
    actors = make_actors(service)
    yield service, actors
    actors.close()
    service.stop()


_counter = iter(range(1, 1_000_000))


def unique_id(prefix: str = "p") -> str:
    return f"{prefix}-{os.getpid()}-{next(_counter)}"


def proposal(
    proposal_id: str, revision: int = 1, *, calls: int = 2, title: str = "Merge tickets"
) -> dict[str, Any]:
    """A valid proposal; `calls` and `revision` vary the plan and so its digest."""
    return proposal_document(
        [
            {
                "tool": "update_ticket",
                "effect": "update",
                "args": {"id": f"t{seq}", "status": "closed", "revision": revision},
                "outcome": {"status": "ok", "http_status": 200},
            }
            for seq in range(1, calls + 1)
        ],
        proposal_id=proposal_id,
        revision=revision,
        title=title,
        agent={"name": "deskline-agent", "run_id": "run-7"},
        target={"api": "deskline", "base_url": "http://127.0.0.1:8080", "environment": "staging"},
        dry_run={"via": "server", "write_requests": calls, "writes_kept": 0},
    )


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


def submit(client: httpx.Client, proposal_id: str, revision: int = 1, **kwargs: Any) -> dict[str, Any]:
    """Submit a proposal that must be accepted; the answer's JSON."""
    response = client.post("/v1/proposals", content=body(proposal(proposal_id, revision, **kwargs)))
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


def decide(
    client: httpx.Client,
    proposal_id: str,
    revision: int,
    plan_sha256: str,
    decision: str = "approve",
    key: str | None = None,
    reason: str = "",
) -> httpx.Response:
    return client.post(
        f"/v1/proposals/{proposal_id}/decisions",
        json={"revision": revision, "plan_sha256": plan_sha256, "decision": decision, "reason": reason},
        headers={"Idempotency-Key": key or unique_id("key")},
    )


def claim(
    client: httpx.Client, proposal_id: str, revision: int, plan_sha256: str, key: str | None = None
) -> httpx.Response:
    return client.post(
        f"/v1/proposals/{proposal_id}/claims",
        json={"revision": revision, "plan_sha256": plan_sha256},
        headers={"Idempotency-Key": key or unique_id("claim")},
    )


def claimed_report(
    client: httpx.Client, proposal_id: str, revision: int, plan_sha256: str, **report: Any
) -> dict[str, Any]:
    """Claim the approval (which must succeed) and return a report body that names the claim."""
    response = claim(client, proposal_id, revision, plan_sha256)
    assert response.status_code == 201, response.text
    return {
        "revision": revision,
        "plan_sha256": plan_sha256,
        "claim_id": response.json()["claim_id"],
        "calls": [],
        **report,
    }


class AnswerLostOnce(httpx.AsyncBaseTransport):
    """Sends each request to the real service, but drops the first answer as a cut connection would."""

    def __init__(self) -> None:
        self.real = httpx.AsyncHTTPTransport()
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        response = await self.real.handle_async_request(request)
        if len(self.sent) == 1:
            await response.aread()
            await response.aclose()
            raise httpx.ReadError("connection reset by peer", request=request)
        return response

    async def aclose(self) -> None:
        await self.real.aclose()
