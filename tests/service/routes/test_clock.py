"""Expiry under an injected clock (in-process ASGI): the states and the list's ETag move with time alone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from reviewer.service.app import create_app
from reviewer.service.auth import hash_token, mint_token
from tests.queue_harness import body, proposal


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


def test_a_claim_outlives_its_approval_and_its_late_report_is_stored(tmp_path: Path) -> None:
    """The claim fixes the approval: it does not expire under the run; past the lease reviewers see
    an unknown outcome (never approved again), and a report arriving after that is still stored."""
    now = [1_800_000_000.0]
    app = create_app(tmp_path / "q.sqlite3", clock=lambda: now[0], approval_ttl=60, claim_lease=300)
    tokens = {name: mint_token() for name in ("alice", "agent")}
    app.state.store.create_token("alice", "reviewer", hash_token(tokens["alice"]))
    app.state.store.create_token("agent", "agent", hash_token(tokens["agent"]))

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://queue") as client:

            def auth(name: str, key: str | None = None) -> dict[str, str]:
                extra = {"Idempotency-Key": key} if key else {}
                return {"Authorization": f"Bearer {tokens[name]}", **extra}

            async def state() -> dict[str, object]:
                answer = await client.get("/v1/proposals/late/decision", headers=auth("alice"))
                return dict(answer.json())

            submitted = await client.post(
                "/v1/proposals", content=body(proposal("late")), headers=auth("agent")
            )
            named = {"revision": 1, "plan_sha256": submitted.json()["plan_sha256"]}
            await client.post(
                "/v1/proposals/late/decisions",
                json={**named, "decision": "approve"},
                headers=auth("alice", "d"),
            )
            now[0] += 59
            claimed = await client.post("/v1/proposals/late/claims", json=named, headers=auth("agent", "c"))
            assert claimed.status_code == 201
            now[0] += 120  # the approval alone would have expired
            assert (await state())["state"] == "claimed"
            now[0] += 300  # past the lease, and no report yet
            unknown = await state()
            assert (unknown["state"], unknown["outcome_unknown"]) == ("claimed", True)
            listed = (await client.get("/v1/proposals", headers=auth("alice"))).json()["proposals"][0]
            assert (listed["state"], listed["outcome_unknown"]) == ("claimed", True)
            again = await client.post("/v1/proposals/late/claims", json=named, headers=auth("agent", "c2"))
            assert again.status_code == 409, "an unknown outcome is never re-runnable"
            replan = await client.post(
                "/v1/proposals", content=body(proposal("late", 2)), headers=auth("agent")
            )
            assert replan.status_code == 201, "past the lease, a new revision may ask for a new decision"
            report = {**named, "claim_id": claimed.json()["claim_id"], "ended": "completed", "calls": []}
            stored = await client.post("/v1/proposals/late/executions", json=report, headers=auth("agent"))
            assert stored.status_code == 201, stored.text
            assert (stored.json()["state"], stored.json()["revision"]) == ("pending", 2)
            history = (await client.get("/v1/proposals/late", headers=auth("alice"))).json()["history"]
            assert [(event["event"], event["revision"]) for event in history][-2:] == [
                ("submitted", 2),
                ("executed", 1),
            ]

    asyncio.run(scenario())
