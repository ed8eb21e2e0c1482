"""The real run sends only what the approved plan lists, checked before each request leaves."""

from __future__ import annotations

import asyncio

import httpx
import msgspec
import pytest

from reviewer.agent import (
    Approval,
    Execution,
    NoApproval,
    NotApproved,
    NoTarget,
    PlanStop,
    TargetMismatch,
    dry_run,
    execute_approved,
    local_approval,
    placeholder,
    sdk_tool,
)
from reviewer.agent.execution import off_target, same_base_url
from reviewer.plan.proposal import Proposal
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.helpers import dry_proposal, real_execution, received


def real_writes(sample_api: RunningSampleApi) -> list[tuple[str, str]]:
    return [(request["method"], request["path"]) for request in received(sample_api) if not request["query"]]


def test_placeholders_resolved_from_the_real_results_count_as_the_same(sample_api: RunningSampleApi) -> None:
    """The plan says mergedInto <id from call 1>; the real run sends tk-4, which call 1 really created."""
    proposal = asyncio.run(dry_proposal(sample_api, "record"))
    execution = asyncio.run(real_execution(sample_api, local_approval(proposal)))
    assert execution.stop is None
    assert execution.real_values == {placeholder("id", 1): "tk-4"}
    assert [call.seq for call in execution.executed] == [1, 2, 3, 4]


def test_execution_stops_at_the_first_mismatch_and_sends_nothing_after_it(
    sample_api: RunningSampleApi,
) -> None:
    """A fresh sample deletes t2 where the plan closes it: calls 1-2 run, call 3 is stopped unsent,
    and call 4, which the task tries after swallowing the stop, is stopped too."""
    proposal = asyncio.run(dry_proposal(sample_api, "server"))
    attempts: list[str] = []

    async def fresh_sample() -> None:
        ticket = await tools.create_ticket(title=tools.REFERENCE_TITLE)
        await tools.update_ticket(id="t1", status="closed", mergedInto=ticket["id"])
        try:
            attempts.append("delete t2")
            await tools.delete_ticket(id="t2")
        except PlanStop:
            pass  # a careless agent swallows the stop and carries on
        attempts.append("delete t3")
        await tools.delete_ticket(id="t3")

    execution = asyncio.run(real_execution(sample_api, local_approval(proposal), fresh_sample))
    assert attempts == ["delete t2", "delete t3"]
    assert execution.stop is not None and execution.stop.position == 3
    assert "the plan's call 3 is update_ticket" in execution.stop.reason
    assert real_writes(sample_api) == [("POST", "/v1/tickets"), ("PATCH", "/v1/tickets/t1")]
    assert [call.seq for call in execution.unexecuted] == [3, 4]
    assert sorted(sample_api.store.tickets) == ["t1", "t2", "t3", "tk-4"]


def test_a_changed_argument_is_named_in_the_stop(sample_api: RunningSampleApi) -> None:
    proposal = asyncio.run(dry_proposal(sample_api, "server"))

    async def other_title() -> None:
        await tools.create_ticket(title="Printer on fire!")

    execution = asyncio.run(real_execution(sample_api, local_approval(proposal), other_title))
    assert execution.stop is not None
    assert "args.title: plan 'Printer on fire', this call 'Printer on fire!'" in execution.stop.reason
    assert real_writes(sample_api) == []


def test_a_call_beyond_the_plan_is_stopped(sample_api: RunningSampleApi) -> None:
    proposal = asyncio.run(dry_proposal(sample_api, "record"))

    async def one_more() -> None:
        await tools.reference_task()
        await tools.create_ticket(title="one more")

    execution = asyncio.run(real_execution(sample_api, local_approval(proposal), one_more))
    assert execution.stop is not None and execution.stop.position == 5
    assert "the approved plan has 4 calls" in execution.stop.reason
    assert len(real_writes(sample_api)) == 4


def test_a_placeholder_from_a_call_that_produced_nothing_stops_the_dependent_call(
    sample_api: RunningSampleApi,
) -> None:
    """The real create is refused (a blank title), so nothing resolves <id from call 1>: the merge
    that guesses tk-4 anyway is stopped, though tk-4 exists."""

    async def plan_with_blank_title() -> None:
        ticket = await tools.create_ticket(title=" ")
        await tools.update_ticket(id="t1", status="closed", mergedInto=ticket["id"])

    async def guess_after_refusal() -> None:
        answer = await tools.create_ticket(title=" ")
        assert answer.status == "refused"
        await tools.update_ticket(id="t1", status="closed", mergedInto="tk-4")

    async def record() -> Approval:
        async with dry_run("record") as recording:
            await plan_with_blank_title()
        proposal = recording.to_proposal(
            proposal_id="blank", title="blank", agent=tools.AGENT, target=tools.target(sample_api.base_url)
        )
        return local_approval(proposal)

    approval = asyncio.run(record())
    sample_api.store.tickets["tk-4"] = {"id": "tk-4", "title": "someone else's", "status": "open"}
    execution = asyncio.run(real_execution(sample_api, approval, guess_after_refusal))
    assert execution.stop is not None and execution.stop.position == 2
    assert "<id from call 1>" in execution.stop.reason
    assert real_writes(sample_api) == [("POST", "/v1/tickets")]
    assert sample_api.store.tickets["t1"]["status"] == "open"


def test_a_tool_whose_declared_effect_changed_since_the_plan_is_stopped_unsent() -> None:
    """Approved: an SDK tool `archive` that updates. Run: a tool of the same name and arguments that
    now declares a delete. An SDK call has no request to compare, so the effect is what tells them
    apart: stopped before the SDK is called."""
    written: list[str] = []

    @sdk_tool(effect="update")
    def archive(id: str) -> dict[str, str]:
        written.append(f"update {id}")
        return {"id": id}

    async def record() -> Approval:
        async with dry_run("record") as recording:
            await archive(id="t1")
        proposal = recording.to_proposal(
            proposal_id="archive",
            title="archive",
            agent=tools.AGENT,
            target=tools.target("https://payments.example"),
        )
        return local_approval(proposal)

    approval = asyncio.run(record())
    assert [call.effect for call in approval.proposal.calls] == ["update"]

    @sdk_tool(effect="delete", name="archive")
    def archive_now_deleting(id: str) -> dict[str, str]:
        written.append(f"delete {id}")
        return {"id": id}

    async def task() -> None:
        await archive_now_deleting(id="t1")

    execution = asyncio.run(execute_approved(task, approval, client=None))
    assert execution.stop is not None and execution.stop.position == 1
    assert "the plan's call 1 has effect update, this one delete" in execution.stop.reason
    assert written == []


def test_a_plan_changed_after_approval_cannot_run_under_it(sample_api: RunningSampleApi) -> None:
    proposal = asyncio.run(dry_proposal(sample_api, "server"))
    approval = local_approval(proposal)
    tampered = msgspec.structs.replace(
        proposal,
        calls=[*proposal.calls[:3], msgspec.structs.replace(proposal.calls[3], args={"id": "t1"})],
    )
    with pytest.raises(NotApproved, match="digest"):
        Approval(tampered, approval.plan_sha256, approval.approved_by)


def _approved_for(proposal: Proposal, base_url: str | None) -> Approval:
    target = msgspec.structs.replace(proposal.target, base_url=base_url)
    return local_approval(msgspec.structs.replace(proposal, target=target))


def test_a_client_pointed_elsewhere_than_the_approved_target_sends_nothing(
    sample_api: RunningSampleApi,
) -> None:
    """Approved for staging, run with a client on the sample API (production here): refused before
    the task starts, naming both URLs."""
    approval = _approved_for(asyncio.run(dry_proposal(sample_api, "record")), "https://staging.example")
    started: list[str] = []

    async def task() -> None:
        started.append("task")
        await tools.reference_task()

    with pytest.raises(TargetMismatch) as refused:
        asyncio.run(real_execution(sample_api, approval, task))
    assert isinstance(refused.value, NoApproval)
    assert "approved for https://staging.example" in str(refused.value)
    assert f"the client is pointed at {sample_api.base_url}" in str(refused.value)
    assert started == []
    assert real_writes(sample_api) == []
    assert sorted(sample_api.store.tickets) == ["t1", "t2", "t3"]


def test_the_approved_target_matches_however_its_url_is_spelled(sample_api: RunningSampleApi) -> None:
    """Case, a trailing slash and an explicit default port do not make another target; a plan with
    no base_url runs only when the runner allows any target, and then against its client."""
    proposal = asyncio.run(dry_proposal(sample_api, "record"))
    url = httpx.URL(sample_api.base_url)
    execution = asyncio.run(
        real_execution(sample_api, _approved_for(proposal, f"HTTP://{url.host.upper()}:{url.port}/"))
    )
    assert execution.stop is None
    assert len(real_writes(sample_api)) == 4
    with pytest.raises(NoTarget, match="allow_any_target"):
        asyncio.run(real_execution(sample_api, _approved_for(proposal, None)))

    async def anywhere() -> Execution:
        async with httpx.AsyncClient(base_url=sample_api.base_url) as api:
            return await execute_approved(
                None, _approved_for(proposal, None), client=api, audit=tools.AUDIT, allow_any_target=True
            )

    sample_api.store.reset()
    assert asyncio.run(anywhere()).ended == "completed"
    assert len(real_writes(sample_api)) == 4
    assert same_base_url("https://staging.example:443", httpx.URL("https://staging.example/"))
    assert not same_base_url("https://staging.example", httpx.URL("http://staging.example"))
    assert not same_base_url("https://staging.example/v2", httpx.URL("https://staging.example"))


APPROVED = "https://api.example/v1"


@pytest.mark.parametrize(
    ("path", "url", "refused_for"),
    [
        ("/v1", "https://api.example/v1", None),
        ("/v1/tickets", "https://api.example/v1/tickets?x=1", None),
        ("/v1/tickets", "https://API.example:443/v1/tickets", None),
        ("/v10/tickets", "https://api.example/v10/tickets", "outside the approved /v1"),
        ("/v1x", "https://api.example/v1x", "outside the approved /v1"),
        ("/v1/tickets", "https://api.example:8443/v1/tickets", "not to https://api.example/v1"),
        ("/v1/tickets", "http://api.example/v1/tickets", "not to https://api.example/v1"),
        ("/v1/tickets", "http://api.example:443/v1/tickets", "not to https://api.example/v1"),
        ("/v1/tickets", "https://api.example:80/v1/tickets", "not to https://api.example/v1"),
        ("/v1/tickets", "https://api.example.evil/v1/tickets", "not to https://api.example/v1"),
        ("//evil.example/v1", "https://evil.example/v1", "not relative to the base URL"),
    ],
)
def test_off_target_keeps_a_request_under_the_approved_scheme_host_port_and_path(
    path: str, url: str, refused_for: str | None
) -> None:
    """`/v10` is not under `/v1` (a sibling, not a child); another port or scheme is another API
    (443 is https's own); checked on its own, not only behind `check_target`."""
    reason = off_target(path, httpx.URL(url), APPROVED)
    if refused_for is None:
        assert reason is None
    else:
        assert reason is not None and refused_for in reason
