"""The idle poll's short way, in process: an unchanged poll costs one statement, reads the token
every time, and answers only what the ordinary way would."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import httpx
import pytest

from reviewer.service.app import create_app
from reviewer.service.auth import hash_token, mint_token
from reviewer.service.store.sqlite import SQLiteStore
from tests.queue_harness import body, proposal


def test_an_unchanged_poll_is_one_statement_and_a_revocation_refuses_the_next(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app(tmp_path / "q.sqlite3", every_access_line=True)  # a 304 logged, by its caller
    store = app.state.store
    assert isinstance(store, SQLiteStore)
    tokens = {name: mint_token() for name in ("alice", "agent")}
    store.create_token("alice", "reviewer", hash_token(tokens["alice"]))
    store.create_token("agent", "agent", hash_token(tokens["agent"]))
    statements: list[str] = []

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://queue") as client:
            as_alice = {"Authorization": f"Bearer {tokens['alice']}"}
            submitted = await client.post(
                "/v1/proposals",
                content=body(proposal("polled")),
                headers={"Authorization": f"Bearer {tokens['agent']}"},
            )
            assert submitted.status_code == 201
            etag = (await client.get("/v1/proposals", headers=as_alice)).headers["etag"]
            unchanged = {**as_alice, "If-None-Match": etag}
            # every store call runs in a worker thread, each with its own connection: each is traced
            opened = store._connection

            def traced() -> sqlite3.Connection:
                connection = opened()
                connection.set_trace_callback(statements.append)
                return connection

            monkeypatch.setattr(store, "_connection", traced)
            with caplog.at_level(logging.INFO, logger="reviewer.service.access"):
                for _ in range(3):
                    polled = await client.get("/v1/proposals", headers=unchanged)
                    assert (polled.status_code, polled.headers["etag"], polled.content) == (304, etag, b"")
            assert len(statements) == 3, statements
            assert [record.getMessage().split()[:4] for record in caplog.records] == [
                ["GET", "/v1/proposals", "304", "alice"]
            ] * 3
            assert tokens["alice"] not in caplog.text
            assert store.revoke_token("alice")
            refused = await client.get("/v1/proposals", headers=unchanged)
            assert (refused.status_code, refused.json()["error"]) == (401, "unauthorized")

    asyncio.run(scenario())
