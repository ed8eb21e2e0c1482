"""The gate in-process, in front of the sample API (writes need a credential): what a read carries on,
what comes back, and what never leaves."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from reviewer.agent.backends import RecordBackend, ServerBackend
from reviewer.agent.runs import Recording
from reviewer.run.gate import DryMode, HttpGate
from reviewer.run.serving import serving
from reviewer.sample_api.server import RunningSampleApi, sample_api_in_thread

SECRET = "gate-test-secret"
MINTED_1 = "rvw--id--from-call-1--"
"""`<id from call 1>` as the child is handed it."""


@pytest.fixture(scope="module")
def api_server() -> Iterator[RunningSampleApi]:
    with sample_api_in_thread(write_token=SECRET) as running:
        yield running


@pytest.fixture
async def gate(api_server: RunningSampleApi) -> AsyncIterator[tuple[httpx.AsyncClient, HttpGate, Recording]]:
    with api_server.store.lock:
        api_server.store.reset()
    async with httpx.AsyncClient(
        base_url=api_server.base_url, headers={"Authorization": f"Bearer {SECRET}"}, follow_redirects=False
    ) as api:
        recording = Recording(ServerBackend(api, {"dryRun": "All"}), client=api)
        http_gate = HttpGate(api, api_server.base_url, mode=DryMode(recording))
        async with serving(http_gate) as url, httpx.AsyncClient(base_url=url) as child:
            yield child, http_gate, recording


@pytest.mark.anyio
async def test_a_dry_write_carries_the_gates_credential_and_its_id_comes_back_as_a_placeholder(
    gate: tuple[httpx.AsyncClient, HttpGate, Recording], api_server: RunningSampleApi
) -> None:
    child, _, recording = gate
    created = await child.post("/v1/tickets", json={"title": "Printer on fire"})
    assert created.status_code == 201
    assert created.json()["id"] == MINTED_1
    assert created.headers["reviewer-dry-run"] == "server"
    assert "Nothing was written" in created.headers["reviewer-note"]
    # A read that names the placeholder reaches the API with the dry run's own value.
    read = await child.get(f"/v1/tickets/{MINTED_1}")
    assert read.json() == {"detail": "no ticket tk-4"}
    assert [call.request.query for call in recording.calls if call.request] == [{"dryRun": "All"}]
    assert api_server.store.audit == []


@pytest.mark.anyio
async def test_the_childs_own_authorization_never_replaces_the_gates(
    gate: tuple[httpx.AsyncClient, HttpGate, Recording], api_server: RunningSampleApi
) -> None:
    child, _, _ = gate
    answer = await child.patch(
        "/v1/tickets/t1", json={"status": "closed"}, headers={"Authorization": "Bearer child-guess"}
    )
    assert answer.status_code == 200, "the gate's credential was sent, not the child's"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "path",
    [
        "/v1/%2e%2e/admin",
        "/v1/%2E%2E%5Cadmin",
        "/v1/..;/admin",
        "/v1/%252e%252e/admin",
        "//evil.example/v1/tickets",
    ],
)
async def test_a_path_that_leaves_the_api_is_refused_and_not_sent(
    gate: tuple[httpx.AsyncClient, HttpGate, Recording], api_server: RunningSampleApi, path: str
) -> None:
    child, _, recording = gate
    under_secret = child.base_url.raw_path.rstrip(b"/") + path.encode()
    answer = await child.send(child.build_request("POST", httpx.URL(child.base_url, raw_path=under_secret)))
    assert answer.status_code in (400, 404)
    assert recording.calls == [] and api_server.store.request_log == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    "path", ["/v1/tickets/%23t4", "/v1/tickets/t1%3Fforce=true", "/v1/tickets/t1%253Fforce=true"]
)
async def test_a_write_whose_path_holds_a_query_or_a_fragment_is_refused_and_not_sent(
    gate: tuple[httpx.AsyncClient, HttpGate, Recording], api_server: RunningSampleApi, path: str
) -> None:
    """Decoded, `%23` cut the URL (DELETE /v1/tickets/ went to the collection) and `%3F` put a query the
    dry run's own parameter replaced: the request approved would not be the one that runs."""
    child, _, recording = gate
    request = child.build_request(
        "DELETE", httpx.URL(child.base_url, raw_path=child.base_url.raw_path.rstrip(b"/") + path.encode())
    )
    answer = await child.send(request)
    assert answer.status_code == 400 and "may not hold ? or #" in answer.json()["detail"]
    assert recording.calls == [] and api_server.store.request_log == []


@pytest.mark.anyio
async def test_an_encoded_slash_is_recorded_and_sent_as_the_child_sent_it(
    gate: tuple[httpx.AsyncClient, HttpGate, Recording], api_server: RunningSampleApi
) -> None:
    child, _, recording = gate
    raw_path = b"/v1/tickets/t1%2Fx"
    await child.send(
        child.build_request(
            "PATCH",
            httpx.URL(child.base_url, raw_path=child.base_url.raw_path.rstrip(b"/") + raw_path),
            json={},
        )
    )
    assert [call.request.path for call in recording.calls if call.request] == ["/v1/tickets/t1%2Fx"]
    assert [call.sent.path for call in recording.calls if call.sent] == ["/v1/tickets/t1%2Fx"]


@pytest.mark.anyio
@pytest.mark.parametrize("guess", ["none", "wrong", "longer", "shorter", "upper"])
async def test_a_request_without_the_runs_secret_gets_403_and_reaches_nothing(
    gate: tuple[httpx.AsyncClient, HttpGate, Recording], api_server: RunningSampleApi, guess: str
) -> None:
    child, http_gate, recording = gate
    real = child.base_url.raw_path.rstrip(b"/").decode()
    path = {"none": "", "wrong": "/wrong", "longer": real + "x", "shorter": real[:-1], "upper": real.upper()}[
        guess
    ]
    for method in ("GET", "POST"):
        url = httpx.URL(child.base_url, raw_path=f"{path}/v1/tickets".encode())
        answer = await child.send(child.build_request(method, url, json={"title": "x"}))
        assert answer.status_code == 403, path
    assert recording.calls == [] and api_server.store.request_log == [] and http_gate.late_requests == []
    assert (await child.get("/v1/tickets")).status_code == 200


@pytest.mark.anyio
async def test_a_record_dry_run_sends_no_write(api_server: RunningSampleApi) -> None:
    with api_server.store.lock:
        api_server.store.reset()
    async with httpx.AsyncClient(base_url=api_server.base_url) as api:
        recording = Recording(RecordBackend())
        http_gate = HttpGate(api, api_server.base_url, mode=DryMode(recording))
        async with serving(http_gate) as url, httpx.AsyncClient(base_url=url) as child:
            created = await child.post("/v1/tickets", json={"title": "x"})
            deleted = await child.delete("/v1/tickets/t3")
            http_gate.mode = None
            late = await child.post("/v1/tickets", json={"title": "late"})
    assert (created.status_code, created.json()) == (201, {"id": MINTED_1})
    assert (deleted.status_code, deleted.json()) == (200, {})
    assert late.status_code == 409 and http_gate.late_requests == ["POST /v1/tickets"]
    assert api_server.store.request_log == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("method", "path", "named"),
    [
        ("PATCH", "/v1/tickets/t3%00", "NUL (%00)"),
        ("POST", "/v1/tickets%0D%0AX-Injected:%20yes", "CR (%0D)"),
        ("DELETE", "/v1/tickets/t2%0A", "LF (%0A)"),
        ("GET", "/v1/tickets/%1B[2J", "ESC (%1B)"),
    ],
)
async def test_a_byte_a_url_cannot_hold_is_a_400_naming_it_and_nothing_is_recorded_or_sent(
    gate: tuple[httpx.AsyncClient, HttpGate, Recording],
    api_server: RunningSampleApi,
    method: str,
    path: str,
    named: str,
) -> None:
    child, http_gate, recording = gate
    answered = await child.request(method, httpx.URL(str(child.base_url).rstrip("/") + path))
    assert answered.status_code == 400
    assert f"holds {named}, which a URL cannot carry; not recorded, not sent" in answered.json()["detail"]
    assert recording.calls == [] and http_gate.spoiled is None
    assert api_server.store.request_log == [] and api_server.store.audit == []


@pytest.mark.anyio
async def test_a_placeholder_inside_a_body_held_as_bytes_spoils_the_dry_run(
    api_server: RunningSampleApi,
) -> None:
    """No placeholder can be filled in inside bytes the plan holds exactly: sent as written, it would
    reach the API as the text `rvw--id--from-call-1--`."""
    async with httpx.AsyncClient(base_url=api_server.base_url) as api:
        recording = Recording(RecordBackend())
        http_gate = HttpGate(api, api_server.base_url, mode=DryMode(recording))
        async with serving(http_gate) as url, httpx.AsyncClient(base_url=url) as child:
            minted = (await child.post("/v1/tickets", json={"title": "x"})).json()["id"]
            upload = await child.put(
                "/v1/files/a.txt", content=f"ticket {minted}".encode(), headers={"content-type": "text/plain"}
            )
    assert minted == MINTED_1 and upload.status_code == 400
    assert "carries a placeholder inside bytes" in (http_gate.spoiled or "")
    assert len(recording.calls) == 1
