"""`reviewer run`'s gate with a server dry run: what a dry write minted reaches the child as a
placeholder, a later request that carries the minted value itself (learned from a refusal's message)
records the placeholder in its path, query and body, and the replay sends the real run's own id, even
after another client took the dry run's."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from reviewer.agent import execute_approved, local_approval
from reviewer.agent.backends import ServerBackend
from reviewer.agent.runs import Recording
from reviewer.plan.proposal import Agent
from reviewer.reading.analysis import Analysis, Verdict
from reviewer.run.gate import DryMode, HttpGate
from reviewer.run.serving import serving
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi, sample_api_in_thread

FROM_CALL_1 = "<id from call 1>"


@pytest.fixture(scope="module")
def _api_server() -> Iterator[RunningSampleApi]:
    with sample_api_in_thread() as running:
        yield running


@pytest.fixture
def api_server(_api_server: RunningSampleApi) -> RunningSampleApi:
    """The sample API as the scenario starts: t1, t2, t3 open, the next ticket tk-4."""
    with _api_server.store.lock:
        _api_server.store.reset()
    return _api_server


@pytest.mark.anyio
async def test_a_minted_id_the_child_learned_by_value_is_recorded_as_its_placeholder_and_replayed_real(
    api_server: RunningSampleApi,
) -> None:
    async with httpx.AsyncClient(base_url=api_server.base_url) as api:
        recording = Recording(ServerBackend(api, {"dryRun": "All"}), client=api)
        http_gate = HttpGate(api, api_server.base_url, mode=DryMode(recording))
        async with serving(http_gate) as url, httpx.AsyncClient(base_url=url) as child:
            await recording.start()
            created = await child.post("/v1/tickets", json={"title": "Printer on fire"})
            ticket = created.json()
            merged = await child.patch(
                "/v1/tickets/t1", json={"status": "closed", "mergedInto": ticket["id"]}
            )
            learned = merged.json()["detail"].rsplit(" ", 1)[-1]  # "mergedInto names no ticket: tk-4"
            renamed = await child.patch(
                f"/v1/tickets/{learned}",
                params={"notify": learned},
                json={"title": "Printer still on fire", "links": [{"ticket": learned}]},
            )
            await recording.finish()
        assert ticket == {
            "id": "rvw--id--from-call-1--",
            "title": "Printer on fire",
            "status": "rvw--status--from-call-1--",
        }
        assert learned == "tk-4" and renamed.status_code == 404  # the dry run's own id, which names nothing
        proposal = recording.to_proposal(
            proposal_id="gate-minted",
            title="merge",
            agent=Agent(name="child"),
            target=tools.target(api_server.base_url),
        )
        rename = proposal.calls[2]
        assert rename.request is not None
        assert rename.request.path == f"/v1/tickets/{FROM_CALL_1}"
        assert rename.request.query == {"notify": FROM_CALL_1, "dryRun": "All"}
        assert rename.request.body == {"title": "Printer still on fire", "links": [{"ticket": FROM_CALL_1}]}
        analysis = Analysis(proposal)
        assert [analysis.row(index).verdict for index in (1, 2)] == [Verdict.CHAIN_NOISE] * 2
        assert "minted_values" not in analysis.alarm_names and analysis.ratios.real_refusals == 0

        taken = httpx.post(f"{api_server.base_url}/v1/tickets", json={"title": "someone else's"}).json()["id"]
        execution = await execute_approved(None, local_approval(proposal), client=api)
    assert execution.ok, execution.summary()
    created_id = execution.real_results[1]["id"]
    assert (taken, created_id) == ("tk-4", "tk-5")
    tickets = api_server.store.tickets
    assert tickets["t1"]["mergedInto"] == created_id
    assert tickets[created_id]["title"] == "Printer still on fire"
    assert tickets[taken]["title"] == "someone else's"
    real_patch = [entry for entry in api_server.store.request_log if "dryRun" not in entry["query"]][-1]
    assert real_patch["query"] == {"notify": created_id}
    assert real_patch["body"]["links"] == [{"ticket": created_id}]


@pytest.mark.anyio
async def test_a_minted_value_hidden_in_a_hostile_string_spoils_the_dry_run_in_printable_words(
    api_server: RunningSampleApi,
) -> None:
    async with httpx.AsyncClient(base_url=api_server.base_url) as api:
        recording = Recording(ServerBackend(api, {"dryRun": "All"}), client=api)
        http_gate = HttpGate(api, api_server.base_url, mode=DryMode(recording))
        async with serving(http_gate) as url, httpx.AsyncClient(base_url=url) as child:
            await child.post("/v1/tickets", json={"title": "Printer on fire"})
            hostile = "\x1b[2J\u202e" + "x" * 500_000 + " merged into tk-4 \x07"
            refused = await child.patch("/v1/tickets/t1", json={"\x1b]0;owned\x07note": hostile})
            later = await child.patch("/v1/tickets/t2", json={"status": "closed"})
    assert refused.status_code == 502 and later.status_code == 409
    spoiled = http_gate.spoiled or ""
    assert "call 2 (PATCH /v1/tickets/t1) carries 'tk-4' at args." in spoiled
    assert "inside a longer string" in spoiled and "Nothing was submitted" in spoiled
    assert spoiled.isprintable() and len(spoiled) < 2_000
    assert len(recording.calls) == 1
