"""A canary token never reaches a log line, an error body or a repr; SIGTERM stops the service cleanly."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import pytest

from reviewer.client import QueueClient, QueueRefused
from tests.service.conftest import body, decide, proposal, start_service, submit, unique_id


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
