"""What the `reviewer run` tests share: the sample API started for real (`reviewer sample-api`, writes
need a credential), a real queue, and `reviewer run` itself as a process driven the way a user drives it.
The fixtures that start them per module are in `conftest.py`."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from tests.forked_commands import reviewer_process
from tests.queue_harness import Service, decide, reviewer_command
from tests.service.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
API_TOKEN = "sample-api-write-secret-7f3c"
"""The sample API's write credential: the gate holds it, the child must never see it."""
WAITS = re.compile(r"plan (\S+) revision (\d+) .* waits at ")


@dataclass
class SampleApi:
    """`reviewer sample-api --write-token-env API_TOKEN` on a loopback port."""

    url: str
    process: subprocess.Popen[bytes]

    def reset(self) -> None:
        httpx.post(f"{self.url}/v1/reset", timeout=10).raise_for_status()

    def audit(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = httpx.get(f"{self.url}/v1/audit", timeout=10).json()["entries"]
        return entries

    def requests(self) -> list[dict[str, Any]]:
        received: list[dict[str, Any]] = httpx.get(f"{self.url}/v1/requests", timeout=10).json()["requests"]
        return received

    def real_requests(self) -> list[dict[str, Any]]:
        """Write requests the API received without its dry-run parameter."""
        return [request for request in self.requests() if "dryRun" not in request["query"]]


def start_sample_api(log: Path) -> SampleApi:
    port = free_port()
    process = reviewer_process(
        reviewer_command("sample-api", "--port", str(port), "--write-token-env", "API_TOKEN"),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "API_TOKEN": API_TOKEN},
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(400):
        if process.poll() is not None:
            raise RuntimeError(log.read_text(errors="replace"))
        try:
            httpx.get(f"{url}/v1/stats", timeout=1)
            return SampleApi(url, process)
        except httpx.TransportError:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(0.05)
    process.kill()
    raise RuntimeError("the sample API did not start")


@dataclass
class Queue:
    service: Service
    agent_token: str
    reviewer: httpx.Client

    @property
    def url(self) -> str:
        return self.service.url


@dataclass
class RunProcess:
    """One `reviewer run` process; its stderr read line by line as it comes."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    def wait_for_plan(self) -> tuple[str, int]:
        """Read stderr until the line saying where the plan waits; its proposal id and revision."""
        stderr: IO[str] | None = self.process.stderr
        assert stderr is not None
        for line in stderr:
            self.lines.append(line)
            found = WAITS.search(line)
            if found:
                return found.group(1), int(found.group(2))
        raise AssertionError(f"reviewer run ended without submitting:\n{''.join(self.lines)}")

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        _, rest = self.process.communicate(timeout=timeout)
        return self.process.returncode, "".join(self.lines) + rest


def run_arguments(queue: Queue, api: SampleApi, *options: str, command: list[str]) -> list[str]:
    """`reviewer run`'s arguments against `api` and `queue`, the credential from `env:API_TOKEN`."""
    return [
        "run",
        "--api",
        api.url,
        "--queue",
        queue.url,
        "--api-header",
        "Authorization: Bearer env:API_TOKEN",
        *options,
        "--",
        *command,
    ]


def start_run(
    queue: Queue,
    api: SampleApi,
    *options: str,
    command: list[str],
    cwd: Path = ROOT,
    environment: dict[str, str] | None = None,
    writable: Path | None = None,
) -> RunProcess:
    """`reviewer run` as a user starts it, the API's credential and the agent token in its environment
    (with `environment`'s variables too); COMMAND may write `writable` besides its working directory."""
    if writable is not None:
        options = ("--writable", str(writable), *options)
    environment = {
        **os.environ,
        **(environment or {}),
        "API_TOKEN": API_TOKEN,
        "REVIEWER_AGENT_TOKEN": queue.agent_token,
        "PYTHONUNBUFFERED": "1",
    }
    arguments = run_arguments(queue, api, "--poll-interval", "0.1", *options, command=command)
    return launch_run(arguments, environment, cwd)


def launch_run(arguments: list[str], environment: dict[str, str], cwd: Path = ROOT) -> RunProcess:
    """`python -m reviewer ARGUMENTS` (a `run`), its stdout and stderr piped, in `environment`; forked
    where nothing tells a fork from a start (`tests/forked_commands.py`)."""
    process = reviewer_process(
        reviewer_command(*arguments),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=cwd,
    )
    return RunProcess(process)


def proposal(queue: Queue, proposal_id: str, revision: int = 1) -> dict[str, Any]:
    response = queue.reviewer.get(f"/v1/proposals/{proposal_id}/revisions/{revision}")
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document


def reviewer_decides(queue: Queue, proposal_id: str, decision: str = "approve", reason: str = "") -> None:
    """A reviewer decides through the queue's API with their own token, as the app does."""
    state = queue.reviewer.get(f"/v1/proposals/{proposal_id}/decision").json()
    response = decide(
        queue.reviewer, proposal_id, state["revision"], state["plan_sha256"], decision, reason=reason
    )
    assert response.status_code in (200, 201), response.text
