"""The four ways a write can be answered without writing: server, fake, transport, record.

Each backend answers one request and says what it sent to the real API, if anything, so a run can
count write requests honestly. A backend is chosen by name through `make_backend`, which refuses a
name it does not know instead of falling through to anything that could write.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, Protocol

import httpx

from reviewer.agent.dry_run_verdicts import dry_run_verdict
from reviewer.agent.errors import (
    DryRunParameterUnknown,
    LiveClientRefused,
    LiveClientRequired,
    UnknownBackend,
)
from reviewer.agent.http_values import CallAnswer, HttpRequest, new_request_id
from reviewer.agent.xml_answers import xml_fields
from reviewer.plan.bodies import BodyError, wire_bytes
from reviewer.plan.exact_bodies import check_text
from reviewer.plan.proposal import DryRunVia, OutcomeStatus
from reviewer.plan.request_headers import HeaderError, check_headers

KUBERNETES_DRY_RUN_QUERY: Final[Mapping[str, str]] = {"dryRun": "All"}
"""The dry-run parameter of a known API, Kubernetes. It is never assumed: most APIs have no dry run,
drop a query parameter they do not know, and would perform the write. The server backend is given the
parameter the API documents, or refuses to start."""


class Backend(Protocol):
    """Answers a write in a dry run. `write_requests` counts requests that reached the real API."""

    write_requests: int

    @property
    def via(self) -> DryRunVia: ...

    async def answer(self, request: HttpRequest) -> tuple[CallAnswer, HttpRequest | None]:
        """The answer, and the request as sent to the real API (None when nothing reached it)."""
        ...

    async def aclose(self) -> None: ...


def answer_from_response(response: httpx.Response) -> CallAnswer:
    """An HTTP answer as an outcome: 2xx ok, 4xx refused (with the API's message), else error.

    A 3xx is an error in its own words: the redirect was not followed (`send`), so the call was
    answered by the redirect itself, and where it pointed is only shown.
    """
    body = _json_or_none(response)
    if response.is_success:
        if isinstance(body, str):  # an answer in XML is read as fields (`reviewer.agent.xml_answers`)
            fields = xml_fields(response.content)
            body = body if fields is None else fields
        return CallAnswer("ok", response.status_code, None, body)
    if response.is_redirect:
        return CallAnswer("error", response.status_code, redirect_message(response), None)
    status: OutcomeStatus = "refused" if 400 <= response.status_code < 500 else "error"
    return CallAnswer(status, response.status_code, _message(body, response), None)


def _json_or_none(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text


def _message(body: Any, response: httpx.Response) -> str:
    if isinstance(body, Mapping):
        for key in ("detail", "message", "error"):
            value = body.get(key)
            if isinstance(value, str):
                return value
            if value is not None:
                return str(value)
    if isinstance(body, str) and body:
        return body[:500]
    return response.reason_phrase or f"HTTP {response.status_code}"


def redirect_message(response: httpx.Response) -> str:
    """What a 3xx said, and that it was not followed: `Location` is the API's text, cut short."""
    location = response.headers.get("location", "")[:500] or "(no Location)"
    return (
        f"redirected ({response.status_code} {response.reason_phrase}) to {location}; not followed: "
        "a write goes only to the URL it was approved or dry-run for"
    )


def build_request(client: httpx.AsyncClient, request: HttpRequest) -> httpx.Request:
    """The request exactly as httpx will put it on the wire (the URL merged with the client's base), so
    a real run checks the very URL it sends."""
    params = dict(request.query) if request.query else None
    headers = sent_headers(client, request)
    if request.text is not None:  # the exact text of a JSON or form body, once it reads as the body
        content = check_text(request.content_type, request.text, request.body)
        headers["content-type"] = request.content_type or "application/json"
        return client.build_request(
            request.method, request.path, params=params, content=content, headers=headers
        )
    written = wire_bytes(request.content_type, request.body)
    if written is None:  # JSON, sent under its own media type when the plan names one (merge-patch+json)
        if request.content_type:
            headers["content-type"] = request.content_type
        return client.build_request(
            request.method, request.path, params=params, json=request.body, headers=headers
        )
    headers["content-type"] = request.content_type or ""  # only JSON goes without one
    return client.build_request(request.method, request.path, params=params, content=written, headers=headers)


def sent_headers(client: httpx.AsyncClient, request: HttpRequest) -> dict[str, str]:
    """The request's own headers (`reviewer.plan.request_headers`) as sent; `HeaderError` for one the
    client sets itself (its credential): a plan never replaces who the executor is, and a request
    without it would not be the one approved."""
    headers = dict(request.headers or {})
    check_headers(headers, also=client.headers.keys())
    return headers


async def send(client: httpx.AsyncClient, request: HttpRequest) -> httpx.Response:
    """Send one dry-run request; a real run sends what it built and checked (`Execution._send`).

    Never a redirect, whatever the client was built with: the `Location` is the API's word, and
    following it would re-send the body and the client's credential wherever it points.
    """
    return await client.send(build_request(client, request), follow_redirects=False)


def is_live_client(client: object) -> bool:
    """Whether `client` could reach a real API: a URL, or an httpx client not built on MockTransport.

    Anything else that is not None counts as live too: a fake needs no client at all, so the
    safe reading of a client it does not recognise is that it might write.
    """
    if client is None:
        return False
    if isinstance(client, httpx.AsyncClient | httpx.Client):
        transport = getattr(client, "_transport", None)
        mounts = getattr(client, "_mounts", {}) or {}
        return not isinstance(transport, httpx.MockTransport) or any(
            mounted is not None and not isinstance(mounted, httpx.MockTransport)
            for mounted in mounts.values()
        )
    return True


class ServerBackend:
    """The API's own dry-run parameter: every server rule runs, against the state before the run."""

    via: ClassVar[DryRunVia] = "server"

    def __init__(
        self,
        client: httpx.AsyncClient | None,
        dry_run_query: Mapping[str, str] | None = None,
        request_id_header: str = "X-Request-Id",
    ) -> None:
        if not dry_run_query:
            raise DryRunParameterUnknown(
                "dry_run_query={'dryRun': 'All'} (Kubernetes), or the parameter the API documents"
            )
        if not isinstance(client, httpx.AsyncClient):
            raise LiveClientRequired("the 'server' dry-run backend")
        self.client = client
        self.dry_run_query = dict(dry_run_query)
        self.write_requests = 0
        self.request_id_header = request_id_header
        self.sent: dict[str, HttpRequest] = {}
        """Each dry-run request as sent, by the id it was sent with: in an audit log, an entry carrying
        one is this dry run's own request; any other write there was made by someone else, whatever its
        query (where the log keeps no id, the request's line stands for it)."""

    async def answer(self, request: HttpRequest) -> tuple[CallAnswer, HttpRequest | None]:
        clash = sorted(set(request.query or {}) & set(self.dry_run_query))
        if clash:
            message = (
                f"the request's query already holds {clash[0]!r}, the dry-run parameter: the dry run would "
                "replace it and check another request than the one that would run; not sent"
            )
            return CallAnswer("error", None, message, None), None
        sent = request.with_parts(request.path, {**(request.query or {}), **self.dry_run_query}, request.body)
        self.write_requests += 1
        try:
            built = build_request(self.client, sent)
        except (HeaderError, BodyError) as error:
            return CallAnswer("error", None, f"it cannot be sent as recorded: {error}; not sent", None), None
        built.headers[self.request_id_header] = request_id = new_request_id()
        self.sent[request_id] = sent
        try:
            response = await self.client.send(built, follow_redirects=False)
        except httpx.HTTPError as error:
            return CallAnswer("error", None, f"{type(error).__name__}: {error}", None), sent
        return dry_run_verdict(response, answer_from_response(response)), sent

    async def aclose(self) -> None:
        """The client belongs to the runner, which closes it."""


class FakeBackend:
    """An in-memory fake of a JSON REST API: carries state and mints random ids, runs no server rule.

    Resources live under their path: POST to a collection stores `{...body, id}` at `collection/id`;
    PATCH/PUT merge into (or create) the resource at the path; DELETE drops it. A delete of an open
    ticket, or of an id that never existed, therefore reads as ok: the blind spot of every fake.
    """

    via: ClassVar[DryRunVia] = "fake"
    id_prefix: ClassVar[str] = "fake-"

    def __init__(self, client: object = None) -> None:
        if is_live_client(client):
            raise LiveClientRefused(self.via, client)
        self.resources: dict[str, dict[str, Any]] = {}
        self.write_requests = 0

    async def answer(self, request: HttpRequest) -> tuple[CallAnswer, None]:
        method = request.method.upper()
        path = request.path.rstrip("/")
        body = request.body if isinstance(request.body, Mapping) else {}
        if method == "POST":
            minted = f"{self.id_prefix}{secrets.token_hex(4)}"
            resource = {**body, "id": minted}
            self.resources[f"{path}/{minted}"] = resource
            return CallAnswer("ok", 201, None, dict(resource)), None
        last_segment = path.rsplit("/", 1)[-1]
        if method in ("PATCH", "PUT"):
            resource = self.resources.setdefault(path, {"id": last_segment})
            if method == "PUT":
                resource.clear()
                resource["id"] = last_segment
            resource.update(body)
            return CallAnswer("ok", 200, None, dict(resource)), None
        if method == "DELETE":
            self.resources.pop(path, None)
            return CallAnswer("ok", 200, None, {"id": last_segment, "deleted": True}), None
        return CallAnswer("ok", 200, None, None), None

    async def aclose(self) -> None:
        """Nothing to release."""


def rest_mock_handler(id_prefix: str = "mock-") -> Callable[[httpx.Request], httpx.Response]:
    """An MSW-style handler per route: POST answers 201 with a minted id, PATCH/PUT echo, DELETE 204.

    It is stateless and knows no rule, like most hand-written HTTP mocks: shape only, per handler.
    """
    counter = itertools.count(1)

    def handle(request: httpx.Request) -> httpx.Response:
        body = _request_json(request)
        last_segment = request.url.path.rstrip("/").rsplit("/", 1)[-1]
        if request.method == "POST":
            return httpx.Response(201, json={**body, "id": f"{id_prefix}{next(counter)}"})
        if request.method in ("PATCH", "PUT"):
            return httpx.Response(200, json={**body, "id": last_segment})
        if request.method == "DELETE":
            return httpx.Response(204)
        missing = f"no mock handler for {request.method} {request.url.path}"
        return httpx.Response(404, json={"detail": missing})

    return handle


def _request_json(request: httpx.Request) -> dict[str, Any]:
    if not request.content:
        return {}
    try:
        body = httpx.Response(200, content=request.content).json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


class TransportBackend:
    """A fake at the HTTP layer (`httpx.MockTransport`): the real client code runs, no request leaves."""

    via: ClassVar[DryRunVia] = "transport"

    def __init__(
        self,
        client: object = None,
        handler: Callable[[httpx.Request], httpx.Response] | None = None,
    ) -> None:
        if is_live_client(client):
            raise LiveClientRefused(self.via, client)
        self._owns_client = client is None
        if isinstance(client, httpx.AsyncClient):
            self.client = client
        else:
            self.client = httpx.AsyncClient(
                transport=httpx.MockTransport(handler or rest_mock_handler()),
                base_url="http://transport.invalid",
            )
        self.write_requests = 0

    async def answer(self, request: HttpRequest) -> tuple[CallAnswer, None]:
        response = await send(self.client, request)
        return answer_from_response(response), None

    async def aclose(self) -> None:
        if self._owns_client:
            await self.client.aclose()


class RecordBackend:
    """Nothing is sent: the call is written down, and nothing about it is validated."""

    via: ClassVar[DryRunVia] = "record"

    def __init__(self, client: object = None) -> None:
        """A client, if given, is ignored: this backend has no code path that sends."""
        self.write_requests = 0

    async def answer(self, request: HttpRequest) -> tuple[CallAnswer, None]:
        return CallAnswer("recorded"), None

    async def aclose(self) -> None:
        """Nothing to release."""


BACKENDS: Final[dict[str, Callable[..., Backend]]] = {
    "server": ServerBackend,
    "fake": FakeBackend,
    "transport": TransportBackend,
    "record": RecordBackend,
}


def make_backend(name: object, client: object = None, **options: Any) -> Backend:
    """The backend called `name`; an unknown name raises `UnknownBackend` before anything is sent."""
    factory = BACKENDS.get(name) if isinstance(name, str) else None
    if factory is None:
        raise UnknownBackend(name, tuple(BACKENDS))
    return factory(client, **options)
