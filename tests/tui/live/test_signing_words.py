"""The approve dialog says how the decision will be signed, and never promises an agent that is not there."""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import Static

from reviewer.signing.sshsig import AgentSigner
from tests.tui.live.fake_queue import FakeQueue
from tests.tui.live.helpers import open_proposal, until
from tests.tui.live.test_snapshots import SIGNING_KEY, live_app, loaded


def approve_dialog_words() -> str:
    """The approve dialog's body for a proposal, signing through ssh-agent with a fixed key."""
    fake = FakeQueue()
    fake.add("deskline-merge-0042", title="Merge t1 and t2, delete t3")
    app = live_app(fake.transport(), signer=AgentSigner(SIGNING_KEY))
    words = ""

    async def scenario() -> None:
        nonlocal words
        async with app.run_test(size=(100, 30)) as pilot:
            await loaded(1)(pilot)
            await open_proposal(pilot, app, "deskline-merge-0042")
            await pilot.press("a")
            await until(pilot, lambda: bool(app.screen.query(".dialog-body Static")), "the dialog")
            words = str(app.screen.query_one(".dialog-body Static", Static).render())

    asyncio.run(scenario())
    return words


def test_no_agent_is_said_so_instead_of_promising_to_sign_through_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    words = " ".join(approve_dialog_words().split())
    assert "cannot be signed" in words and "SSH_AUTH_SOCK is not set" in words
    assert "signed with" not in words


def test_a_socket_that_is_gone_is_said_so(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.gone"))
    words = " ".join(approve_dialog_words().split())
    assert "names no socket" in words and "signed with" not in words


def test_a_running_agent_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    socket = tmp_path / "agent.sock"
    socket.touch()
    monkeypatch.setenv("SSH_AUTH_SOCK", str(socket))
    words = " ".join(approve_dialog_words().split())
    assert "through ssh-agent" in words and "cannot be signed" not in words


def test_a_digest_the_queue_does_not_hold_is_said_not_to_match(monkeypatch: pytest.MonkeyPatch) -> None:
    """The queue answers 412 naming the same revision: the digest sent is not its digest, which the
    app says (it said "the agent re-planned" and reopened the same revision)."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    fake = FakeQueue()
    fake.add("deskline-merge-0042", title="Merge t1 and t2, delete t3")
    app = live_app(fake.transport())

    async def scenario() -> str:
        async with app.run_test(size=(100, 30)) as pilot:
            await loaded(1)(pilot)
            await open_proposal(pilot, app, "deskline-merge-0042")
            item = app.items["deskline-merge-0042"]
            await until(pilot, lambda: 1 in item.verified, "the plan checked")
            item.digests[1] = "0" * 64  # as if the queue's record had been misread
            await pilot.press("a", "y")
            banner = app.screen.query_one("#decision", Static)
            await until(pilot, lambda: bool(banner.display), "the answer")
            return str(banner.render())

    words = " ".join(asyncio.run(scenario()).split())
    assert "does not match revision 1's" in words and "re-planned" not in words
