"""Values a dry-run write minted never leave the dry run unannounced: a create declared without
`produces` still answers placeholders, a later call carrying the minted value (by value, in a path
segment, a query, a list) records the placeholder, and the real run resolves it from its own answer,
even when another client took the dry run's id between the dry run and the approval."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
import msgspec
import pytest

from reviewer.agent import (
    Gate,
    GateResult,
    HttpRequest,
    MintedValueUnsafe,
    QueueAgent,
    QueueClient,
    Recording,
    RunStopped,
    dry_run,
    execute_approved,
    local_approval,
    path_with,
    placeholder,
    sdk_tool,
    write_tool,
)
from reviewer.plan.proposal import Agent, Call, DryRun, Outcome, Proposal, Request
from reviewer.queue.messages import ExecutionReport
from reviewer.queue.refusals import NotFound
from reviewer.reading.analysis import Analysis, Verdict
from reviewer.reading.verification import compare_execution
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.forked_commands import run_reviewer
from tests.queue_harness import reviewer_command

FROM_CALL_1 = placeholder("id", 1)


@write_tool(effect="create")
def create_ticket(title: str) -> HttpRequest:
    """Open a ticket, as docs/agents.md writes one: no `produces`."""
    return HttpRequest("POST", "/v1/tickets", body={"title": title})


@write_tool(effect="update")
def merge_ticket(id: str, into: str, watchers: list[dict[str, Any]] | None = None) -> HttpRequest:
    """Close `id` into `into`; `watchers` ride along in the body (the API keeps only what it knows),
    and `into` also goes in the query, so a minted value sits in a path, a query and a list at once."""
    body: dict[str, Any] = {"status": "closed", "mergedInto": into}
    if watchers is not None:
        body["watchers"] = watchers
    return HttpRequest("PATCH", path_with("/v1/tickets/{id}", id=id), query={"notify": into}, body=body)


@write_tool(effect="update")
def rename_ticket(id: str, title: str) -> HttpRequest:
    return HttpRequest("PATCH", path_with("/v1/tickets/{id}", id=id), body={"title": title})


async def docs_task() -> None:
    """The docs' agent shape: the update names the created ticket by `ticket["id"]`."""
    ticket = await create_ticket(title="Printer on fire")
    await tools.update_ticket(id="t2", status="closed", mergedInto=ticket["id"])


def proposal_of(recording: Recording, base_url: str, proposal_id: str) -> Proposal:
    return recording.to_proposal(
        proposal_id=proposal_id,
        title="merge",
        agent=Agent(name="test-agent"),
        target=tools.target(base_url),
    )


async def dry(sample_api: RunningSampleApi, backend: str, task: Any, proposal_id: str) -> Proposal:
    async with httpx.AsyncClient(base_url=sample_api.base_url) as api:
        options: dict[str, Any] = {"dry_run_query": tools.DRY_RUN_QUERY} if backend == "server" else {}
        client = api if backend == "server" else None
        async with dry_run(backend, client=client, **options) as recording:
            await task(recording)
    return proposal_of(recording, sample_api.base_url, proposal_id)


def another_client_creates(sample_api: RunningSampleApi) -> str:
    """Someone else opens a ticket between the dry run and the approval: it takes the next id."""
    answer = httpx.post(f"{sample_api.base_url}/v1/tickets", json={"title": "someone else's"})
    assert answer.status_code == 201
    return str(answer.json()["id"])


async def replay(sample_api: RunningSampleApi, proposal: Proposal, task: Any = None) -> Any:
    async with httpx.AsyncClient(base_url=sample_api.base_url) as api:
        return await execute_approved(task, local_approval(proposal), client=api)


def test_docs_shape_under_a_server_dry_run_merges_into_the_ticket_the_real_run_created(
    sample_api: RunningSampleApi, queue: Queue
) -> None:
    """Through a real queue: the reviewer sees `<id from call 1>` and chain noise; another client opens
    a ticket (taking the dry run's tk-4) before the approval; t2 is merged into the real run's ticket."""
    seen: list[Any] = []

    async def task() -> None:
        ticket = await create_ticket(title="Printer on fire")
        seen.append(ticket["id"])
        await tools.update_ticket(id="t2", status="closed", mergedInto=ticket["id"])

    async def reviewer() -> Proposal:
        async with QueueClient(queue.url, queue.reviewer_token) as client:
            while True:  # until the agent has submitted (the gate's own decision timeout bounds it)
                try:
                    latest = (await client.get_proposal("minted-server")).latest
                    break
                except NotFound:
                    await asyncio.sleep(0.025)
            shown = await client.get_revision("minted-server", latest.revision)
            another_client_creates(sample_api)
            await client.decide("minted-server", latest.revision, latest.plan_sha256, "approve", "ok")
            return shown

    async def run() -> tuple[GateResult, Proposal]:
        async with Gate(
            api=sample_api.base_url,
            queue=queue.url,
            token=queue.agent_token,
            backend="server",
            dry_run_query=tools.DRY_RUN_QUERY,
            poll_interval=0.05,
            decision_timeout=20,
        ) as gate:
            return await asyncio.gather(
                gate.run(task, title="merge", proposal_id="minted-server"), reviewer()
            )

    result, shown = asyncio.run(run())
    create, update = shown.calls
    assert seen == [FROM_CALL_1]  # the model never saw tk-4
    assert create.outcome is not None and create.outcome.result["id"] == "tk-4"
    assert update.args == {"id": "t2", "status": "closed", "mergedInto": FROM_CALL_1}
    assert update.request is not None and update.request.body == {
        "status": "closed",
        "mergedInto": FROM_CALL_1,
    }
    analysis = Analysis(shown)
    row = analysis.row(1)
    assert row.verdict is Verdict.CHAIN_NOISE and row.depends_on == (1,)
    assert [p.provenance() for p in row.placeholders] == ["⟨id from #1 create_ticket⟩"]
    assert "minted_values" not in analysis.alarm_names and analysis.ratios.real_refusals == 0

    assert result.ok and result.execution is not None, result
    created = result.execution.real_results[1]["id"]
    assert created == "tk-5"  # tk-4 went to the other client
    assert sample_api.store.tickets["t2"]["mergedInto"] == created
    assert "mergedInto" not in sample_api.store.tickets["tk-4"]
    assert result.verification is not None
    assert result.verification.summary == "naive: 1 of 2 identical; placeholders resolved: 2 of 2 match"


def test_a_value_learned_outside_the_answer_is_found_by_value_in_a_path_a_query_and_a_list(
    sample_api: RunningSampleApi,
) -> None:
    """The model got the minted id some other way (here: the backend's raw answer, as a message or a
    read could give it) and passes the value itself: the plan still records the placeholder."""

    async def task(recording: Recording) -> None:
        await create_ticket(title="Printer on fire")
        minted = recording.calls[0].answer.result["id"]
        await merge_ticket(id="t1", into=minted, watchers=[{"ticket": minted, "role": "lead"}])
        await rename_ticket(id=minted, title="Printer still on fire")

    for backend in ("server", "fake", "transport"):
        sample_api.store.reset()
        proposal = asyncio.run(dry(sample_api, backend, task, f"minted-{backend}"))
        merge, rename = proposal.calls[1:]
        assert merge.args == {
            "id": "t1",
            "into": FROM_CALL_1,
            "watchers": [{"ticket": FROM_CALL_1, "role": "lead"}],
        }
        assert merge.request is not None and rename.request is not None
        assert merge.request.query is not None and merge.request.query["notify"] == FROM_CALL_1
        assert merge.request.body["watchers"] == [{"ticket": FROM_CALL_1, "role": "lead"}]
        assert rename.request.path == f"/v1/tickets/{FROM_CALL_1}"
        assert rename.args == {"id": FROM_CALL_1, "title": "Printer still on fire"}, backend
        if backend != "server":
            # The fake carried state under the dry run's own id: the rename reached the created ticket.
            assert rename.outcome is not None and rename.outcome.status == "ok", backend

        taken = another_client_creates(sample_api)
        execution = asyncio.run(replay(sample_api, proposal))
        assert execution.ok, (backend, execution.summary())
        created = execution.real_results[1]["id"]
        assert created != taken
        sent = [
            entry
            for entry in sample_api.store.request_log
            if entry["method"] == "PATCH" and "dryRun" not in entry["query"]
        ]
        assert [entry["path"] for entry in sent] == ["/v1/tickets/t1", f"/v1/tickets/{created}"]
        assert sent[0]["query"]["notify"] == created
        assert sent[0]["body"]["watchers"] == [{"ticket": created, "role": "lead"}]
        assert sample_api.store.tickets["t1"]["mergedInto"] == created
        assert sample_api.store.tickets[created]["title"] == "Printer still on fire"
        assert sample_api.store.tickets[taken]["title"] == "someone else's"


@pytest.mark.parametrize(
    ("carried", "problem"),
    [
        (lambda minted: f"merged into {minted} by the agent", "inside a longer string"),
        (lambda minted: {minted: "lead"}, "as an object's key"),
    ],
)
def test_a_minted_value_no_placeholder_can_stand_for_stops_the_dry_run_before_submitting(
    sample_api: RunningSampleApi, carried: Any, problem: str
) -> None:
    async def task(recording: Recording) -> None:
        await create_ticket(title="Printer on fire")
        minted = recording.calls[0].answer.result["id"]
        with pytest.raises(MintedValueUnsafe) as stopped:
            await merge_ticket(id="t1", into="t2", watchers=[{"note": carried(minted)}])
        assert "call 2 (merge_ticket)" in str(stopped.value) and minted in str(stopped.value)
        assert "args.watchers.0.note" in str(stopped.value) and problem in str(stopped.value)
        with pytest.raises(MintedValueUnsafe):  # stopped for good: nothing else is recorded
            await rename_ticket(id="t3", title="x")

    async def run() -> None:
        async with dry_run("fake") as recording:
            await task(recording)
        assert len(recording.calls) == 1
        with pytest.raises(MintedValueUnsafe):
            proposal_of(recording, sample_api.base_url, "never-submitted")

    asyncio.run(run())


def test_a_short_minted_value_carried_whole_stops_the_dry_run(sample_api: RunningSampleApi) -> None:
    """An id `a1` cannot be told apart from any other `a1` a later call carries; an id 7 from the text
    "7" a path would carry (a placeholder would send the number)."""

    def numbered(request: httpx.Request) -> httpx.Response:
        return httpx.Response(201 if request.method == "POST" else 200, json={"id": "a1", "number": 7})

    async def run() -> None:
        async with dry_run("transport", handler=numbered):
            ticket = await create_ticket(title="Printer on fire")
            assert ticket["id"] == FROM_CALL_1
            with pytest.raises(MintedValueUnsafe, match="carries 'a1' at args.id.*too short"):
                await rename_ticket(id="a1", title="x")

        async with dry_run("transport", handler=numbered):
            await create_ticket(title="Printer on fire")
            with pytest.raises(MintedValueUnsafe, match="carries 7 at args.id.*integer"):
                await rename_ticket(id="7", title="x")

    asyncio.run(run())


def test_a_create_without_produces_never_answers_a_bare_key_error() -> None:
    @sdk_tool(effect="create")
    def open_invoice(customer: str) -> dict[str, Any]:
        raise AssertionError("a dry run never calls the real write")

    async def run() -> None:
        async with dry_run("fake"):
            ticket = await create_ticket(title="Printer on fire")
            invoice = await open_invoice(customer="cus_1")
        assert ticket["id"] == FROM_CALL_1 and ticket["title"] == "Printer on fire"
        assert invoice["id"] == placeholder("id", 2)  # recorded only: its real write will say
        assert ticket.get("number") == placeholder("number", 1)

    asyncio.run(run())


def test_a_stable_field_is_passed_on_as_it_is() -> None:
    def slugged(request: httpx.Request) -> httpx.Response:
        return httpx.Response(201, json={"id": "mock-99", "slug": "printer-on-fire-2026"})

    @write_tool(effect="create", stable=("slug",))
    def create_page(title: str) -> HttpRequest:
        return HttpRequest("POST", "/v1/pages", body={"title": title})

    async def run() -> Recording:
        async with dry_run("transport", handler=slugged) as recording:
            page = await create_page(title="Printer on fire")
            assert page["slug"] == "printer-on-fire-2026" and page["id"] == FROM_CALL_1
            await rename_ticket(id=page["slug"], title="x")
        return recording

    recording = asyncio.run(run())
    assert recording.calls[1].args["id"] == "printer-on-fire-2026"


# --- a hand-written plan that hard-codes the dry run's id ---------------------------------------------


def hand_written(base_url: str, proposal_id: str) -> Proposal:
    """What the agent of the report submitted: the server dry run's `tk-4` written into the merge."""
    merge = {"status": "closed", "mergedInto": "tk-4"}
    return Proposal(
        format="reviewer.proposal/v1",
        proposal_id=proposal_id,
        revision=1,
        title="Merge t2 into a new ticket",
        agent=Agent(name="hand"),
        created_at="2026-12-04T10:00:00Z",
        target=tools.target(base_url),
        dry_run=DryRun(via="server", write_requests=2, writes_kept=0),
        calls=[
            Call(
                seq=1,
                tool="create_ticket",
                effect="create",
                args={"title": "Printer on fire"},
                request=Request("POST", "/v1/tickets", {"dryRun": "All"}, {"title": "Printer on fire"}),
                outcome=Outcome(
                    "ok", 201, None, {"id": "tk-4", "title": "Printer on fire", "status": "open"}
                ),
            ),
            Call(
                seq=2,
                tool="update_ticket",
                effect="update",
                args={"id": "t2", **merge},
                request=Request("PATCH", "/v1/tickets/t2", {"dryRun": "All"}, merge),
                outcome=Outcome("refused", 422, "mergedInto names no ticket: tk-4"),
            ),
        ],
    )


async def approved(queue: Queue, proposal: Proposal) -> tuple[QueueAgent, Any, QueueClient]:
    """The proposal submitted and approved by a reviewer; the agent, its approval and its client."""
    client = QueueClient(queue.url, queue.agent_token)
    async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
        agent = QueueAgent(client, poll_interval=0.05)
        answer = await agent.submit(proposal)
        await reviewer.decide(proposal.proposal_id, 1, answer.plan_sha256, "approve", "looks right")
    return agent, await agent.wait_for_decision(proposal.proposal_id, 1, timeout=10), client


def test_a_hand_written_plan_that_hard_codes_a_minted_id_is_flagged_and_never_writes_elsewhere(
    sample_api: RunningSampleApi, queue: Queue
) -> None:
    """The review flags it, its 422 reads as chain noise; approved anyway, the real run stops before
    the merge, since its own create answered tk-5 while the plan would merge into tk-4."""
    proposal = hand_written(sample_api.base_url, "minted-hand-0001")
    analysis = Analysis(proposal)
    assert analysis.alarm_names[0] == "minted_values", analysis.alarm_names
    assert analysis.alarms[0].startswith(
        "call 2 (update_ticket) carries 'tk-4' at args.mergedInto, "
        "a value only the dry run minted (call 1's id)"
    )
    assert analysis.row(1).verdict is Verdict.CHAIN_NOISE  # never "the real run will be refused too"
    assert analysis.ratios.real_refusals == 0

    taken = another_client_creates(sample_api)

    async def approve_and_run() -> RunStopped:
        agent, approval, client = await approved(queue, proposal)
        async with client, httpx.AsyncClient(base_url=sample_api.base_url) as api:
            with pytest.raises(RunStopped) as stopped:
                await agent.execute(approval, client=api)
        return stopped.value

    stopped = asyncio.run(approve_and_run())
    assert "would write to another resource" in str(stopped) and "'tk-5'" in str(stopped)
    assert [call.seq for call in stopped.execution.executed] == [1]
    assert "mergedInto" not in sample_api.store.tickets["t2"]
    assert "mergedInto" not in sample_api.store.tickets[taken]


def test_a_run_that_wrote_to_the_resource_the_dry_run_imagined_is_different_and_not_verified(
    sample_api: RunningSampleApi, queue: Queue
) -> None:
    """A runner that is not this library (or an older one) sent the hand-written plan as written: its
    report shows t2 merged into the other client's tk-4 while its own create answered tk-5. The `v`
    view reads the merge as different, and `reviewer verify` does not verify the run."""
    proposal = hand_written(sample_api.base_url, "minted-hand-0002")
    taken = another_client_creates(sample_api)

    async def run_by_hand() -> list[Call]:
        agent, approval, client = await approved(queue, proposal)
        async with client, httpx.AsyncClient(base_url=sample_api.base_url) as api:
            claim = await client.claim(proposal.proposal_id, 1, approval.plan_sha256)
            calls = []
            for planned in proposal.calls:
                assert planned.request is not None
                answer = await api.request(
                    planned.request.method, planned.request.path, json=planned.request.body
                )
                request = Request(planned.request.method, planned.request.path, None, planned.request.body)
                outcome = Outcome("ok", answer.status_code, None, answer.json())
                calls.append(Call(planned.seq, planned.tool, planned.effect, planned.args, request, outcome))
            report = ExecutionReport(
                revision=1,
                plan_sha256=approval.plan_sha256,
                claim_id=claim.claim_id,
                ended="completed",
                calls=[msgspec.to_builtins(call) for call in calls],
            )
            await client.report_execution(proposal.proposal_id, report)
        return calls

    calls = asyncio.run(run_by_hand())
    assert calls[0].outcome is not None and calls[0].outcome.result["id"] == "tk-5"
    assert sample_api.store.tickets["t2"]["mergedInto"] == taken  # what the plan said: the wrong ticket
    verification = compare_execution(proposal, calls)
    assert verification.checks[1].status == "different"
    assert "another resource" in verification.checks[1].fields[0].note
    assert verification.summary.startswith("naive: 1 of 2 identical; placeholders resolved: 1 of 2 match")

    result = run_reviewer(
        reviewer_command(
            "verify",
            proposal.proposal_id,
            "--audit",
            f"sample:{sample_api.base_url}/v1/audit",
            "--queue",
            queue.url,
        ),
        capture_output=True,
        text=True,
        env={**os.environ, "REVIEWER_TOKEN": queue.reviewer_token},
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    # This runner reported no request ids: the other client's create is never taken for the run's.
    (create_line,) = [line for line in result.stdout.splitlines() if line.startswith("call 1 create_ticket ")]
    assert create_line.startswith(
        "call 1 create_ticket POST /v1/tickets: ambiguous, not verified: 2 entries of the same method, path "
        "and query could each be it"
    ), result.stdout
    assert (
        "call 2 update_ticket: differs at args.mergedInto: sent 'tk-4', a value only the dry run of call 1 "
        "minted (id); the real call 1 answered 'tk-5': this write went to another resource"
    ) in result.stdout
    assert "the run is not verified" in result.stdout


def test_a_fakes_later_answer_never_hands_the_agent_a_minted_value_bare() -> None:
    """The fake carries state: an update's answer repeats the created id, and a second create that
    names the first echoes it. Both show the agent the placeholder; the echo mints nothing new, so
    the id stays unambiguous."""

    @write_tool(effect="create")
    def create_child(parent: str, title: str) -> HttpRequest:
        return HttpRequest("POST", "/v1/tickets", body={"parent": parent, "title": title})

    async def run() -> None:
        async with dry_run("fake") as recording:
            ticket = await create_ticket(title="Printer on fire")
            merged = await tools.update_ticket(id="t1", status="closed", mergedInto=ticket["id"])
            child = await create_child(parent=ticket["id"], title="toner")
            assert merged["mergedInto"] == FROM_CALL_1
            assert child["parent"] == FROM_CALL_1 and child["id"] == placeholder("id", 3)
            minted = recording.calls[0].answer.result["id"]
            await rename_ticket(id=minted, title="x")  # found by value: unambiguous
        assert recording.calls[1].answer.result["mergedInto"] == minted  # the plan's outcome keeps it
        assert recording.calls[3].args["id"] == FROM_CALL_1

    asyncio.run(run())
