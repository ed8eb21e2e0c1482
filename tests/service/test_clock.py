"""Expiry under an injected clock (in-process ASGI): the states and the list's ETag move with time alone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from reviewer.service.app import create_app
from reviewer.service.auth import hash_token, mint_token
from tests.service.conftest import body, proposal


def test_pending_then_approved_then_expired_as_the_clock_moves(tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    app = create_app(tmp_path / "q.sqlite3", clock=lambda: now[0], pending_ttl=600, approval_ttl=60)
    tokens = {name: mint_token() for name in ("alice", "agent")}
    app.state.store.create_token("alice", "reviewer", hash_token(tokens["alice"]))
    app.state.store.create_token("agent", "agent", hash_token(tokens["agent"]))

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://queue") as client:

            def auth(name: str) -> dict[str, str]:
                return {"Authorization": f"Bearer {tokens[name]}"}

            submitted = await client.post(
                "/v1/proposals", content=body(proposal("clocked")), headers=auth("agent")
            )
            digest = submitted.json()["plan_sha256"]
            etag = (await client.get("/v1/proposals", headers=auth("alice"))).headers["etag"]
            now[0] += 599
            same = await client.get("/v1/proposals", headers={**auth("alice"), "If-None-Match": etag})
            assert same.status_code == 304
            decision = {"revision": 1, "plan_sha256": digest, "decision": "approve"}
            approved = await client.post(
                "/v1/proposals/clocked/decisions",
                json=decision,
                headers={**auth("alice"), "Idempotency-Key": "1"},
            )
            assert approved.json()["state"] == "approved"
            etag = (await client.get("/v1/proposals", headers=auth("alice"))).headers["etag"]
            now[0] += 59.9
            assert (await client.get("/v1/proposals/clocked/decision", headers=auth("agent"))).json()[
                "state"
            ] == ("approved")
            now[0] += 0.1
            state = (await client.get("/v1/proposals/clocked/decision", headers=auth("agent"))).json()
            assert (state["state"], state["decided_by"]) == ("expired", "alice")
            moved = await client.get("/v1/proposals", headers={**auth("alice"), "If-None-Match": etag})
            assert moved.status_code == 200
            assert moved.json()["proposals"][0]["state"] == "expired"

    asyncio.run(scenario())
