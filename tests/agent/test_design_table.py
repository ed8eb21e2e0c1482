"""The reference scenario's table, cell by cell, from the real sample API on loopback."""

from __future__ import annotations

import asyncio
from typing import Any

from reviewer.agent import local_approval, placeholder
from reviewer.plan.proposal import Call, Outcome, Request
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.helpers import dry_proposal, real_execution

DEPENDS_ON_CREATE = placeholder("id", 1)


def outcome(call: Call) -> Outcome:
    assert call.outcome is not None
    return call.outcome


def request(call: Call) -> Request:
    assert call.request is not None
    return call.request


def args(call: Call) -> dict[str, Any]:
    return call.args or {}


def outcomes(calls: list[Call]) -> list[tuple[str, int | None]]:
    return [(outcome(call).status, outcome(call).http_status) for call in calls]


def test_server_dry_run_column(sample_api: RunningSampleApi) -> None:
    """ok with id tk-4, 422, 422, 409; 4 write requests, 0 kept; the 422s name the create's id."""
    proposal = asyncio.run(dry_proposal(sample_api, "server"))
    assert proposal.dry_run.via == "server"
    assert outcomes(proposal.calls) == [("ok", 201), ("refused", 422), ("refused", 422), ("refused", 409)]
    assert outcome(proposal.calls[0]).result["id"] == "tk-4"
    assert [outcome(call).message for call in proposal.calls[1:]] == [
        "mergedInto names no ticket: tk-4",
        "mergedInto names no ticket: tk-4",
        "close the ticket before deleting it",
    ]
    assert (proposal.dry_run.write_requests, proposal.dry_run.writes_kept) == (4, 0)
    # The plan keeps the dependency, not the dry run's value: the two 422s are chain noise.
    assert args(proposal.calls[1])["mergedInto"] == DEPENDS_ON_CREATE
    assert request(proposal.calls[1]).query == {"dryRun": "All"}
    assert sample_api.store.stats() == {"write_requests": 4, "dry_run_requests": 4, "writes_kept": 0}
    assert sorted(sample_api.store.tickets) == ["t1", "t2", "t3"]


def test_fake_column(sample_api: RunningSampleApi) -> None:
    """ok with a minted id, ok, ok, ok (the 409 is missed); nothing reached the API."""
    first = asyncio.run(dry_proposal(sample_api, "fake"))
    second = asyncio.run(dry_proposal(sample_api, "fake"))
    assert first.dry_run.via == "fake"
    assert outcomes(first.calls) == [("ok", 201), ("ok", 200), ("ok", 200), ("ok", 200)]
    minted = outcome(first.calls[0]).result["id"]
    assert minted != "tk-4" and minted != outcome(second.calls[0]).result["id"]
    assert outcome(first.calls[1]).result["mergedInto"] == minted  # state is carried
    assert (first.dry_run.write_requests, first.dry_run.writes_kept) == (0, 0)
    assert sample_api.store.stats()["write_requests"] == 0


def test_transport_column_runs_no_rule_either(sample_api: RunningSampleApi) -> None:
    proposal = asyncio.run(dry_proposal(sample_api, "transport"))
    assert [outcome(call).status for call in proposal.calls] == ["ok"] * 4
    assert outcome(proposal.calls[3]).http_status == 204
    assert (proposal.dry_run.write_requests, proposal.dry_run.writes_kept) == (0, 0)
    assert sample_api.store.stats()["write_requests"] == 0


def test_record_column(sample_api: RunningSampleApi) -> None:
    """recorded four times, placeholders where only a real write knows the value; nothing sent."""
    proposal = asyncio.run(dry_proposal(sample_api, "record"))
    assert outcomes(proposal.calls) == [("recorded", None)] * 4
    assert [args(call).get("mergedInto") for call in proposal.calls] == [
        None,
        DEPENDS_ON_CREATE,
        DEPENDS_ON_CREATE,
        None,
    ]
    assert request(proposal.calls[1]).body == {"status": "closed", "mergedInto": DEPENDS_ON_CREATE}
    assert (proposal.dry_run.write_requests, proposal.dry_run.writes_kept) == (0, 0)
    assert sample_api.store.stats()["write_requests"] == 0


def test_real_run_column(sample_api: RunningSampleApi) -> None:
    """ok with id tk-4, ok, ok, 409; 4 write requests, 3 kept: only the server dry run foresaw the 409."""
    proposal = asyncio.run(dry_proposal(sample_api, "server"))
    execution = asyncio.run(real_execution(sample_api, local_approval(proposal)))
    assert execution.stop is None
    assert outcomes(execution.executed_calls()) == [("ok", 201), ("ok", 200), ("ok", 200), ("refused", 409)]
    assert execution.executed[0].answer.result["id"] == "tk-4"
    assert execution.executed[1].args["mergedInto"] == "tk-4"
    assert (execution.write_requests, execution.writes_kept) == (4, 3)
    assert sample_api.store.stats() == {"write_requests": 8, "dry_run_requests": 4, "writes_kept": 3}
    assert execution.audit_match is not None
    assert [call.verdict for call in execution.audit_match.calls] == [
        "matched",
        "matched",
        "matched",
    ], "the refused delete is not looked for in a log of kept writes"


def test_an_api_that_ignores_the_dry_run_parameter_shows_writes_kept(sample_api: RunningSampleApi) -> None:
    """The most dangerous finding: the server dropped dryRun, so the 'dry' run wrote for real."""
    sample_api.store.ignore_dry_run = True
    proposal = asyncio.run(dry_proposal(sample_api, "server"))
    assert (proposal.dry_run.write_requests, proposal.dry_run.writes_kept) == (4, 3)
    assert outcomes(proposal.calls)[:3] == [("ok", 201), ("ok", 200), ("ok", 200)]
    assert sample_api.store.tickets["t1"]["mergedInto"] == "tk-4"
