"""What must never reach the API: an unknown backend's write, a model's dryRun, a fake's live client."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from reviewer.agent import (
    DryRunParameterUnknown,
    Gate,
    HttpRequest,
    LiveClientRefused,
    LiveClientRequired,
    ToolArgumentError,
    ToolDefinitionError,
    UnknownBackend,
    dry_run,
    local_approval,
    make_backend,
    path_with,
    real_run,
    write_tool,
)
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.helpers import dry_proposal, real_execution, received

SERVER: dict[str, Any] = {"dry_run_query": tools.DRY_RUN_QUERY}
"""The sample API's documented dry-run parameter, for a server dry run."""


@pytest.mark.parametrize("name", ["sever", "real", "none", "", "SERVER", None, 0])
def test_an_unknown_backend_raises_and_nothing_reaches_the_api(
    sample_api: RunningSampleApi, name: object
) -> None:
    async def attempt() -> None:
        async with httpx.AsyncClient(base_url=sample_api.base_url) as api, dry_run(name, client=api):  # type: ignore[arg-type]
            await tools.reference_task()

    with pytest.raises(UnknownBackend, match="choose one of server, fake, transport, record"):
        asyncio.run(attempt())
    assert received(sample_api) == []
    assert sorted(sample_api.store.tickets) == ["t1", "t2", "t3"]


def test_a_dry_run_argument_the_model_adds_is_dropped_in_a_dry_run(sample_api: RunningSampleApi) -> None:
    """The model says dryRun=False; the runner's flag still decides, and the argument is not sent."""

    async def model_driven() -> list:
        async with (
            httpx.AsyncClient(base_url=sample_api.base_url) as api,
            dry_run("server", client=api, **SERVER) as recording,
        ):
            await tools.update_ticket(**{"id": "t1", "status": "closed", "dryRun": False, "dry_run": "no"})
        return recording.calls

    calls = asyncio.run(model_driven())
    assert calls[0].args == {"id": "t1", "status": "closed"}
    assert calls[0].dropped_args == ("dryRun", "dry_run")
    assert received(sample_api) == [
        {
            "method": "PATCH",
            "path": "/v1/tickets/t1",
            "query": {"dryRun": "All"},
            "body": {"status": "closed"},
        }
    ]
    assert sample_api.store.tickets["t1"]["status"] == "open"


def test_a_dry_run_argument_the_model_adds_never_reaches_the_api_in_a_real_run(
    sample_api: RunningSampleApi,
) -> None:
    """A model that thinks dryRun=All makes its call safe must not get a request carrying it."""
    proposal = asyncio.run(dry_proposal(sample_api, "record"))

    async def model_adds_dry_run() -> None:
        ticket = await tools.create_ticket(title=tools.REFERENCE_TITLE, dryRun="All")
        await tools.update_ticket(id="t1", status="closed", mergedInto=ticket["id"], dryRun=True)
        await tools.update_ticket(id="t2", status="closed", mergedInto=ticket["id"], validate_only=True)
        await tools.delete_ticket(id="t3", **{"dry-run": "true"})

    sample_api.store.reset()
    execution = asyncio.run(real_execution(sample_api, local_approval(proposal), model_adds_dry_run))
    assert execution.stop is None
    for request in received(sample_api):
        assert request["query"] == {}
        assert "dryRun" not in (request["body"] or {})
    assert [call.dropped_args for call in execution.executed] == [
        ("dryRun",),
        ("dryRun",),
        ("validate_only",),
        ("dry-run",),
    ]


def test_a_tool_cannot_declare_the_dry_run_flag_as_its_own_argument() -> None:
    with pytest.raises(ToolDefinitionError, match="belongs to the runner"):

        @write_tool(effect="update")
        def sneaky(id: str, dryRun: bool = False) -> HttpRequest:
            return HttpRequest("PATCH", f"/v1/tickets/{id}")

    with pytest.raises(ToolDefinitionError, match="declare every argument"):

        @write_tool(effect="update")
        def anything_goes(**arguments: object) -> HttpRequest:
            return HttpRequest("PATCH", "/v1/tickets/t1")

    with pytest.raises(ToolDefinitionError, match="read tools stay ordinary functions"):
        write_tool(effect="read")


def test_a_required_argument_the_model_left_out_is_an_error_not_a_call(sample_api: RunningSampleApi) -> None:
    async def attempt() -> None:
        async with (
            httpx.AsyncClient(base_url=sample_api.base_url) as api,
            dry_run("server", client=api, **SERVER),
        ):
            await tools.update_ticket(status="closed")

    with pytest.raises(ToolArgumentError, match="update_ticket"):
        asyncio.run(attempt())
    assert received(sample_api) == []


def test_the_model_sees_only_declared_arguments_in_the_schema() -> None:
    schema = tools.update_ticket.spec.schema()
    assert schema["parameters"]["required"] == ["id"]
    assert schema["parameters"]["additionalProperties"] is False
    assert set(schema["parameters"]["properties"]) == {"id", "status", "mergedInto", "title"}
    assert schema["parameters"]["properties"]["status"] == {"enum": ["open", "closed"]}


@pytest.mark.parametrize("backend", ["fake", "transport"])
def test_a_fake_backend_refuses_a_live_client(sample_api: RunningSampleApi, backend: str) -> None:
    async def attempt(client: object) -> None:
        async with dry_run(backend, client=client):
            await tools.reference_task()

    async def with_live_httpx_client() -> None:
        async with httpx.AsyncClient(base_url=sample_api.base_url) as api:
            await attempt(api)

    with pytest.raises(LiveClientRefused, match="live AsyncClient"):
        asyncio.run(with_live_httpx_client())
    with pytest.raises(LiveClientRefused, match="live base URL"):
        asyncio.run(attempt(sample_api.base_url))
    with pytest.raises(LiveClientRefused):
        make_backend(backend, httpx.Client(base_url=sample_api.base_url))
    assert received(sample_api) == []


def test_a_fake_backend_accepts_a_client_that_cannot_leave_the_process() -> None:
    mock = httpx.AsyncClient(transport=httpx.MockTransport(lambda request: httpx.Response(500)))
    assert make_backend("fake", mock).via == "fake"
    assert make_backend("transport", mock).via == "transport"


def test_a_server_dry_run_or_a_real_run_without_a_live_client_says_what_to_pass() -> None:
    with pytest.raises(LiveClientRequired, match="pass client=httpx.AsyncClient"):
        make_backend("server", **SERVER)
    mock = httpx.AsyncClient(transport=httpx.MockTransport(lambda request: httpx.Response(500)))
    proposal = asyncio.run(dry_proposal_without_api())

    async def attempt() -> None:
        async with real_run(local_approval(proposal), client=mock):
            pass

    with pytest.raises(LiveClientRequired, match="a real run"):
        asyncio.run(attempt())


def test_a_server_dry_run_without_the_apis_dry_run_parameter_is_refused_before_any_request(
    sample_api: RunningSampleApi,
) -> None:
    """Never guessed: an API that does not know the parameter drops it and performs the write."""

    async def attempt() -> None:
        async with (
            httpx.AsyncClient(base_url=sample_api.base_url) as api,
            dry_run("server", client=api),
        ):
            await tools.reference_task()

    with pytest.raises(DryRunParameterUnknown, match=r"dry_run_query=\{'dryRun': 'All'\} \(Kubernetes\)"):
        asyncio.run(attempt())
    with pytest.raises(DryRunParameterUnknown, match="the 'record' backend"):
        Gate(api=sample_api.base_url, queue="http://127.0.0.1:1", token="unused", backend="server")
    assert received(sample_api) == []


async def dry_proposal_without_api():  # type: ignore[no-untyped-def]
    async with dry_run("record") as recording:
        await tools.delete_ticket(id="t3")
    return recording.to_proposal(
        proposal_id="no-api", title="no api", agent=tools.AGENT, target=tools.target("http://x")
    )


@write_tool(effect="update")
def patch_unencoded(id: str) -> HttpRequest:
    """A tool that puts its argument into the path as it is (no path_with)."""
    return HttpRequest("PATCH", f"/v1/tickets/{id}", body={"status": "closed"})


@pytest.mark.parametrize(
    ("tool", "ticket"),
    [
        (tools.delete_ticket, "#4"),  # path_with encodes it to %23: still a fragment to a server that decodes
        (tools.delete_ticket, "t1?force=true"),
        (patch_unencoded, "#4"),  # httpx would cut the path here: DELETE /v1/tickets/, the collection
        (patch_unencoded, "t1%3Fforce=true"),
    ],
)
def test_a_model_supplied_query_or_fragment_in_a_path_is_refused_and_nothing_is_sent(
    sample_api: RunningSampleApi, tool: Any, ticket: str
) -> None:
    async def attempt() -> Any:
        async with (
            httpx.AsyncClient(base_url=sample_api.base_url) as api,
            dry_run("server", client=api, **SERVER) as recording,
        ):
            with pytest.raises(ToolArgumentError, match="may not hold"):
                await tool(id=ticket)
        return recording

    recording = asyncio.run(attempt())
    assert recording.calls == [] and received(sample_api) == []


def test_a_path_argument_is_one_segment_and_the_dry_run_parameter_is_added_to_the_query() -> None:
    """`a/b` cannot walk the path; a write's own query is kept beside the dry-run parameter."""
    assert path_with("/v1/tickets/{id}", id="a/b c") == "/v1/tickets/a%2Fb%20c"
    assert path_with("/v1/tickets/{id}", id="<id from call 1>") == "/v1/tickets/<id from call 1>"
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={})

    async def dry() -> None:
        async with httpx.AsyncClient(
            base_url="http://api.test", transport=httpx.MockTransport(answer)
        ) as api:
            backend = make_backend("server", api, dry_run_query={"dryRun": "All"})
            await backend.answer(HttpRequest("PATCH", "/v1/tickets/a%2Fb", {"force": "true"}, {}))
            refused, nothing = await backend.answer(HttpRequest("PATCH", "/v1/x", {"dryRun": "no"}, {}))
            assert refused.status == "error" and "already holds 'dryRun'" in (refused.message or "")
            assert nothing is None

    asyncio.run(dry())
    assert [request.url.raw_path for request in sent] == [b"/v1/tickets/a%2Fb?force=true&dryRun=All"]
