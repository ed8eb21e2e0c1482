"""The sandbox check: a dry-run create sent to a collection on a sandbox copy of the API, the collection
listed before and after. It proves a server dry run honest, or stops it before anything reaches the API."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from reviewer.agent import Gate, SandboxCheck, SandboxCheckFailed, SandboxKeptWrite, SandboxProof
from reviewer.reading.analysis import Analysis, Verdict
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi, sample_api_in_thread
from tests.agent.helpers import received
from tests.serving import serving_in_thread

AT = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)

pytestmark = pytest.mark.anyio


@pytest.fixture
def ignoring_sandbox() -> Iterator[RunningSampleApi]:
    """A sandbox of an API that drops the dry-run parameter and writes, as most APIs do."""
    with sample_api_in_thread(ignore_dry_run=True) as running:
        yield running


@pytest.fixture
def honest_sandbox() -> Iterator[RunningSampleApi]:
    with sample_api_in_thread() as running:
        yield running


async def test_an_api_that_honours_the_parameter_is_proven_and_keeps_nothing(
    honest_sandbox: RunningSampleApi,
) -> None:
    collection = f"{honest_sandbox.base_url}/v1/tickets"
    before = dict(honest_sandbox.store.tickets)
    proof = await SandboxCheck(collection).prove(tools.DRY_RUN_QUERY, now=AT)
    assert proof == SandboxProof(url=collection, query={"dryRun": "All"}, checked_at="2026-03-01T09:30:00Z")
    assert honest_sandbox.store.tickets == before
    created = [entry for entry in received(honest_sandbox) if entry["method"] == "POST"]
    assert [entry["query"] for entry in created] == [{"dryRun": "All"}], "one create, sent dry"


async def test_an_api_that_ignores_the_parameter_is_caught_by_the_listing(
    ignoring_sandbox: RunningSampleApi,
) -> None:
    collection = f"{ignoring_sandbox.base_url}/v1/tickets"
    with pytest.raises(SandboxKeptWrite) as kept:
        await SandboxCheck(collection).prove(tools.DRY_RUN_QUERY)
    assert f"sent to {collection} with dryRun=All, was kept" in str(kept.value)
    assert "record backend" in str(kept.value)


class _KeepingCollection(BaseHTTPRequestHandler):
    """A collection that keeps every create whatever its query, and shows it in one way only: in its
    listing (`listed`, its create answering no id) or by its id (a cached or paginated listing)."""

    listed: bool
    kept: list[str]

    def do_GET(self) -> None:
        if self.path == "/items":
            self._answer(200, self.kept if self.listed else [])
        else:
            found = self.path.removeprefix("/items/") in self.kept
            self._answer(200 if found else 404, {})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.kept.append("x1")
        self._answer(201, {} if self.listed else {"id": "x1"})

    def _answer(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize(
    ("listed", "said"),
    [(True, "listed 0 item(s) before and 1 after"), (False, "the created 'x1' reads back")],
    ids=["in the listing", "by its id"],
)
async def test_a_kept_create_is_caught_by_the_listing_or_by_reading_it_back(listed: bool, said: str) -> None:
    handler = type("Collection", (_KeepingCollection,), {"listed": listed, "kept": []})
    with serving(handler) as url, pytest.raises(SandboxKeptWrite, match=re.escape(said)):
        await SandboxCheck(f"{url}/items").prove(tools.DRY_RUN_QUERY)


class _QuietCollection(_KeepingCollection):
    """A collection whose first listing page never changes and whose created item reads back
    `read_back`: what a paginated or sorted listing shows of a kept create, or of a dropped one."""

    listing: object = []
    link: str = ""
    total: str = ""
    created: object = {"id": "x1"}
    read_back = 404

    def do_GET(self) -> None:
        if self.path == "/items":
            extra = {"Link": self.link} if self.link else {}
            if self.total:
                extra["X-Total-Count"] = self.total
            self._answer(200, self.listing, extra)
        else:
            self._answer(self.read_back, {})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer(201, self.created)


def quiet(**attributes: object) -> type[BaseHTTPRequestHandler]:
    return type("Collection", (_QuietCollection,), attributes)


@pytest.mark.parametrize(
    ("collection", "said"),
    [
        (quiet(created={"data": {"id": "x1"}}), "names no id (looked in `id`)"),
        (quiet(created={}), "names no id"),
        (quiet(read_back=401), "was answered 401, not 404 or 410"),
        (quiet(link='<http://x/items?page=2>; rel="next"'), "a Link header with rel=next"),
        (quiet(listing={"items": [], "next": "/items?page=2"}), "its 'next' field is set"),
        (quiet(listing={"items": [], "has_more": True}), "its 'has_more' field is set"),
        (quiet(listing={"items": [], "next_page": 2}), "its 'next_page' field is set"),
        (quiet(listing={"items": [1], "total": 40}), "its 'total' field counts 40, 1 listed"),
        (quiet(listing=[1, 2], total="41"), "X-Total-Count 41, 2 listed"),
    ],
    ids=[
        "id in another field",
        "no id",
        "read back refused",
        "link next",
        "next field",
        "has_more",
        "next_page",
        "total",
        "x-total-count",
    ],
)
async def test_an_unchanged_first_page_proves_nothing_unless_the_created_id_is_shown_absent(
    collection: type[BaseHTTPRequestHandler], said: str
) -> None:
    """A kept create can be off the listing's first page (paginated, sorted) or name its id in a field
    the check does not read: the proof holds only on a whole listing and an id that reads back 404/410."""
    with serving(collection) as url, pytest.raises(SandboxCheckFailed, match=re.escape(said)) as failed:
        await SandboxCheck(f"{url}/items").prove(tools.DRY_RUN_QUERY)
    assert "proves nothing" in str(failed.value)


async def test_the_id_field_names_where_the_create_answers_its_id() -> None:
    kept = quiet(created={"data": {"id": "x1"}}, read_back=200)
    with serving(kept) as url, pytest.raises(SandboxKeptWrite, match="the created 'x1' reads back"):
        await SandboxCheck(f"{url}/items", id_field="data.id").prove(tools.DRY_RUN_QUERY)


async def test_a_created_id_is_said_clipped() -> None:
    """The id is the sandbox's word, printed by the run: a long one is clipped, not printed whole."""
    long_id = quiet(created={"id": "k" * 5_000}, read_back=200)
    with serving(long_id) as url, pytest.raises(SandboxKeptWrite, match="reads back") as kept:
        await SandboxCheck(f"{url}/items").prove(tools.DRY_RUN_QUERY)
    assert "k" * 80 in str(kept.value) and "k" * 81 not in str(kept.value)


@pytest.mark.parametrize(
    "collection",
    [
        quiet(listing={"items": [1], "next": None, "has_more": False, "total": 1}),
        quiet(listing=[1], total="1", read_back=410),
        quiet(created={"data": {"id": 7}}),
    ],
    ids=["last page fields", "total equals listed", "id at id_field"],
)
async def test_a_whole_unchanged_listing_and_an_absent_id_are_a_proof(
    collection: type[BaseHTTPRequestHandler],
) -> None:
    with serving(collection) as url:
        proof = await SandboxCheck(f"{url}/items", id_field="data.id").prove(tools.DRY_RUN_QUERY)
    assert proof.query == {"dryRun": "All"}


class _EchoingRefusal(_KeepingCollection):
    """Lists nothing and refuses every create, quoting the credential it was sent."""

    listed = True
    kept: list[str] = []

    def do_POST(self) -> None:
        self._answer(401, {"detail": f"not a token: {self.headers.get('Authorization')}"})


async def test_a_refusal_that_echoes_the_sandboxs_credential_is_said_without_it() -> None:
    """The run prints why the check proved nothing, in the sandbox's words: never with the sandbox's
    credential, which a refusal may quote back."""
    with serving(_EchoingRefusal) as url:
        check = SandboxCheck(f"{url}/items", headers={"Authorization": "Bearer s3cret-token-value"})
        with pytest.raises(SandboxCheckFailed, match="answered 401") as failed:
            await check.prove(tools.DRY_RUN_QUERY)
    assert "not a token: [redacted]" in str(failed.value) and "s3cret" not in str(failed.value)


class _PaddedEchoingRefusal(_EchoingRefusal):
    """Refuses every create quoting the credential after `padding` characters, as JSON (escaped)."""

    padding = 0

    def do_POST(self) -> None:
        self._answer(401, {"detail": "p" * self.padding + str(self.headers.get("Authorization"))})


@pytest.mark.parametrize(
    "secret", ["s3cret-token-value", 's3cret"token\\value'], ids=["plain", "json-escaped"]
)
async def test_a_credential_echoed_across_the_quoted_limit_is_withheld_whole(secret: str) -> None:
    """The refusal is quoted up to 200 characters: a secret that crosses that cut is blanked before the
    cut, never left with its head showing; a secret the answer JSON-escaped is blanked too."""
    start = len('{"detail": "') + len("Bearer ")
    handler = type("Refusal", (_PaddedEchoingRefusal,), {"padding": 200 - start - 6})
    with serving(handler) as url:
        check = SandboxCheck(f"{url}/items", headers={"Authorization": f"Bearer {secret}"})
        with pytest.raises(SandboxCheckFailed, match="answered 401") as failed:
            await check.prove(tools.DRY_RUN_QUERY)
    assert "s3cre" not in str(failed.value) and "[reda" in str(failed.value)


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A small real HTTP server on loopback for the block; its URL."""
    with serving_in_thread(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


async def test_a_create_the_sandbox_refuses_proves_nothing(honest_sandbox: RunningSampleApi) -> None:
    """The sample API refuses a ticket without a title: a refused create keeps nothing whatever the
    parameter does, so it cannot stand as proof."""
    check = SandboxCheck(f"{honest_sandbox.base_url}/v1/tickets", body={"priority": "high"})
    with pytest.raises(SandboxCheckFailed, match="answered 422") as failed:
        await check.prove(tools.DRY_RUN_QUERY)
    assert "give a body the collection accepts" in str(failed.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://user:secret@sandbox.example/v1/tickets",
        "https://sandbox.example/v1/tickets?key=1",
        "ftp://x/y",
    ],
)
def test_a_sandbox_url_that_would_carry_a_credential_or_a_query_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="sandbox"):
        SandboxCheck(url)


def server_dry_run_gate(api: RunningSampleApi, sandbox: str) -> Gate:
    """A gate that dry-runs the sample API by its dryRun parameter, proven by the sandbox check at
    `sandbox`; its queue is never reached (these tests do not submit)."""
    return Gate(
        api=api.base_url,
        queue="http://127.0.0.1:9",
        token="unused",
        sandbox=sandbox,
        backend="server",
        dry_run_query=tools.DRY_RUN_QUERY,
    )


async def test_a_gate_stops_before_the_task_when_the_sandbox_kept_the_write(
    sample_api: RunningSampleApi, ignoring_sandbox: RunningSampleApi
) -> None:
    started: list[bool] = []

    async def task() -> None:
        started.append(True)
        await tools.reference_task()

    async with server_dry_run_gate(sample_api, f"{ignoring_sandbox.base_url}/v1/tickets") as gate:
        with pytest.raises(SandboxKeptWrite):
            await gate.dry_run(task)
    assert started == [] and received(sample_api) == [], "nothing reached the API"


async def test_a_gate_records_the_proof_and_its_oks_are_validated(
    sample_api: RunningSampleApi, honest_sandbox: RunningSampleApi
) -> None:
    sandbox = f"{honest_sandbox.base_url}/v1/tickets"
    async with server_dry_run_gate(sample_api, sandbox) as gate:
        recording = await gate.dry_run(tools.reference_task)
        proposal = gate.propose(recording, title="proven")
    proof = proposal.dry_run.sandbox
    assert proof is not None and (proof.url, proof.query) == (sandbox, {"dryRun": "All"})
    assert proposal.dry_run.writes_kept is None, "no audit log was read: the count stays unknown"
    analysis = Analysis(proposal)
    verdicts = [analysis.row(index).verdict for index in range(len(analysis))]
    assert Verdict.VALIDATED in verdicts and Verdict.UNPROVEN not in verdicts
    assert "unproven_dry_run" not in analysis.alarm_names


def test_a_sandbox_check_for_a_dry_run_that_sends_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="'record' backend sends none"):
        Gate(
            api="http://127.0.0.1:9",
            queue="http://127.0.0.1:9",
            token="unused",
            sandbox="http://127.0.0.1:9/v1/tickets",
        )
