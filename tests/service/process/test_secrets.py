"""A canary token, even pasted into a path, a query or a JSON field, never reaches a log line, an
error body or a repr; SIGTERM stops the service cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import stat
from pathlib import Path

import httpx
import pytest

from reviewer.queue.client import QueueClient
from reviewer.queue.refusals import QueueRefused
from reviewer.service.auth import mint_token, redact_tokens
from tests.queue_harness import Service, body, decide, proposal, start_service, submit, unique_id


def misplaced_canaries(
    reviewer: httpx.Client, agent: httpx.Client, proposal_id: str, canary: str
) -> list[httpx.Response]:
    """A token pasted where it does not belong: a path segment, a query value, a JSON field."""
    with_canary_via = proposal(unique_id())
    with_canary_via["dry_run"]["via"] = canary
    return [
        reviewer.get(f"/v1/proposals/{canary}"),
        reviewer.get(f"/v1/proposals/{canary}/decision"),
        agent.get(f"/v1/proposals/{canary}/revisions/1"),
        reviewer.get(f"/v1/{canary}"),
        reviewer.get(f"/v1/proposals/{proposal_id}/revisions/{canary}"),
        reviewer.get("/v1/proposals", params={"state": canary}),
        reviewer.get("/v1/proposals", params={"cursor": canary}),
        reviewer.get("/v1/proposals", params={"limit": canary}),
        agent.post("/v1/proposals", content=body(with_canary_via)),
        agent.post("/v1/proposals", content=body({**proposal(unique_id()), canary: 1})),
        reviewer.post(
            f"/v1/proposals/{proposal_id}/decisions",
            json={"revision": 1, "plan_sha256": canary, "decision": canary, "reason": "", canary: 1},
            headers={"Idempotency-Key": unique_id("key")},
        ),
        reviewer.post(
            f"/v1/proposals/{proposal_id}/decisions",
            content=f'{{"revision": 1, "{canary}'.encode(),
            headers={"Idempotency-Key": unique_id("key")},
        ),
    ]


@pytest.mark.slow
def test_a_canary_token_appears_nowhere_and_sigterm_is_a_clean_stop(tmp_path: Path) -> None:
    service = start_service(tmp_path)
    canary = service.token("canary", "reviewer")
    agent_token = service.token("agent", "agent")
    unknown_canary = "rvw_CANARY-unknown-token-5f1e"
    seen: list[str] = []
    try:
        with service.client(canary) as reviewer, service.client(agent_token) as agent:
            answer = submit(agent, unique_id())
            responses = [
                reviewer.get("/v1/whoami"),
                reviewer.get("/v1/proposals"),
                reviewer.post("/v1/proposals", content=body(proposal(unique_id()))),
                decide(reviewer, answer["proposal_id"], 1, "0" * 64),
                decide(reviewer, answer["proposal_id"], 1, answer["plan_sha256"]),
                decide(reviewer, answer["proposal_id"], 1, answer["plan_sha256"], "reject"),
                reviewer.post(f"/v1/proposals/{answer['proposal_id']}/decisions", content=b"{"),
                reviewer.get("/v1/proposals", params={"token": canary}),
                reviewer.get("/v1/whoami", headers={"Authorization": f"Bearer {unknown_canary}"}),
                reviewer.get("/v1/whoami", headers={"Authorization": f"Token {canary}"}),
                *misplaced_canaries(reviewer, agent, answer["proposal_id"], canary),
                *misplaced_canaries(reviewer, agent, answer["proposal_id"], unknown_canary),
            ]
            assert {response.status_code for response in responses} >= {200, 201, 401, 403, 409, 412}
            seen += [response.text + str(response.headers) for response in responses]

        async def client_errors() -> None:
            for token in (canary, unknown_canary):
                client = QueueClient(service.url, token)
                seen.append(repr(client))
                async with client:
                    try:
                        await client.decide(answer["proposal_id"], 1, "0" * 64, "approve")
                    except QueueRefused as error:
                        seen.extend([str(error), repr(error), repr(error.body)])

        asyncio.run(client_errors())
        # uvicorn finishes the requests in flight, runs the shutdown, then re-raises SIGTERM on itself.
        assert service.stop(signal.SIGTERM) in (0, -signal.SIGTERM), service.log()
    finally:
        if service.process is not None:
            service.kill()
    log = service.log()
    assert log.count("/v1/") >= len(responses), "one line per request"
    assert "Application shutdown complete" in log
    for text in [log, *seen]:
        assert canary not in text
        assert unknown_canary not in text
        assert canary[4:20] not in text
    with sqlite3.connect(service.db) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_redaction_replaces_the_token_and_keeps_the_rest() -> None:
    token = mint_token()
    assert redact_tokens(f"/v1/proposals/{token}/decision") == "/v1/proposals/[redacted]/decision"
    assert redact_tokens(f"'{token}'; `{token.upper()}`") == "'[redacted]'; `[redacted]`"
    assert redact_tokens("/v1/proposals/p-1/revisions/2") == "/v1/proposals/p-1/revisions/2"


def test_the_database_and_its_wal_and_shm_are_readable_by_the_owner_alone(tmp_path: Path) -> None:
    """The file holds every proposal and the token hashes: 0600 even under a umask of 022.

    `serve` is the one command that creates a database (token commands refuse a missing one).
    """
    previous_umask = os.umask(0o022)
    try:
        service = Service(db=tmp_path / "queue.sqlite3", log_path=tmp_path / "service.log")
        service.start()
        agent_token = service.token("agent", "agent")
    finally:
        os.umask(previous_umask)
    try:
        with service.client(agent_token) as agent:
            submit(agent, unique_id())
        files = [service.db, service.db.with_name(service.db.name + "-wal")]
        files.append(service.db.with_name(service.db.name + "-shm"))
        modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in files}
        assert modes == dict.fromkeys(modes, 0o600)
    finally:
        service.stop()
