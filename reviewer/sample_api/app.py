"""The reference scenario's ticket API: real server rules, `dryRun=All`, an audit log.

Tickets t1, t2, t3 start open. Created tickets are numbered tk-4, tk-5, and so on. The server
refuses to delete an open ticket (409) and a merge into a ticket that does not exist (422). With
`dryRun=All` every rule runs and nothing is persisted (a dry create answers the id it would mint,
without using it up). `ignore_dry_run=True` makes the server drop that parameter like many real
servers drop a query parameter they do not know, which is how a dry run ends with writes kept.
It counts every write request and every write kept, and logs every request it received, so tests
can prove what did or did not reach it. `write_token`, when set, makes every write need
`Authorization: Bearer <write_token>` (401 without), so a test can show who holds the credential.
Each route carries an `operationId` and the write routes declare `dryRun`, so the API's OpenAPI
document (`/openapi.json`) names its calls and its dry-run parameter.
"""

from __future__ import annotations

import hmac
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Body, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse

INITIAL_TICKETS = ("t1", "t2", "t3")
STATUSES = ("open", "closed")
DRY_RUN_VALUE = "All"
REQUEST_ID_KEPT = 200
"""The characters of a write's `X-Request-Id` its audit entry keeps (the executor's are 32)."""
JsonBody = Annotated[Any, Body()]
DryRunQuery = Annotated[
    str | None,
    Query(alias="dryRun", description="All: run every rule, persist nothing", examples=[DRY_RUN_VALUE]),
]


class Refusal(Exception):
    """A server rule said no; carries the HTTP status and the message the client sees."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message)


@dataclass
class TicketStore:
    """The API's whole state, behind one lock (uvicorn may run handlers on several threads)."""

    ignore_dry_run: bool = False
    tickets: dict[str, dict[str, Any]] = field(default_factory=dict)
    next_number: int = 4
    audit: list[dict[str, Any]] = field(default_factory=list)
    request_log: list[dict[str, Any]] = field(default_factory=list)
    write_requests: int = 0
    dry_run_requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if not self.tickets:
            self.reset()

    def reset(self) -> None:
        """Back to the scenario's start: t1, t2, t3 open, nothing audited, nothing counted."""
        self.tickets = {
            ticket_id: {"id": ticket_id, "title": f"Ticket {ticket_id}", "status": "open"}
            for ticket_id in INITIAL_TICKETS
        }
        self.next_number = 4
        self.audit = []
        self.request_log = []
        self.write_requests = 0
        self.dry_run_requests = 0

    @property
    def writes_kept(self) -> int:
        return len(self.audit)

    def stats(self) -> dict[str, int]:
        return {
            "write_requests": self.write_requests,
            "dry_run_requests": self.dry_run_requests,
            "writes_kept": self.writes_kept,
        }

    def write(
        self,
        method: str,
        path: str,
        ticket_id: str | None,
        body: dict[str, Any],
        dry: bool,
        query: dict[str, str] | None = None,
        request_id: str | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Apply one write (or, dry, check it): every rule runs either way; only a real write persists,
        and its audit entry keeps the `X-Request-Id` it was sent with (null without one)."""
        if method == "POST":
            status, result, apply = self._create(body)
        elif method == "PATCH":
            status, result, apply = self._update(self._existing(ticket_id), body)
        else:
            status, result, apply = self._delete(self._existing(ticket_id))
        if not dry:
            apply()
            self.audit.append(
                {
                    "seq": len(self.audit) + 1,
                    "at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                    "method": method,
                    "path": path.replace("{id}", result["id"]),
                    "query": dict(query or {}),
                    "body": body,
                    "status": status,
                    "ticket": result["id"],
                    "request_id": request_id,
                }
            )
        return status, result

    def _existing(self, ticket_id: str | None) -> dict[str, Any]:
        if ticket_id not in self.tickets:
            raise Refusal(404, f"no ticket {ticket_id}")
        return self.tickets[ticket_id]

    def _create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], Any]:
        title = body.get("title")
        if not isinstance(title, str) or not title.strip():
            raise Refusal(422, "title is required")
        status = body.get("status", "open")
        if status not in STATUSES:
            raise Refusal(422, f"status must be one of {', '.join(STATUSES)}")
        ticket = {"id": f"tk-{self.next_number}", "title": title, "status": status}

        def apply() -> None:
            self.tickets[ticket["id"]] = ticket
            self.next_number += 1

        return 201, dict(ticket), apply

    def _update(self, ticket: dict[str, Any], body: dict[str, Any]) -> tuple[int, dict[str, Any], Any]:
        changes: dict[str, Any] = {}
        if "title" in body:
            if not isinstance(body["title"], str) or not body["title"].strip():
                raise Refusal(422, "title must be a non-empty string")
            changes["title"] = body["title"]
        if "status" in body:
            if body["status"] not in STATUSES:
                raise Refusal(422, f"status must be one of {', '.join(STATUSES)}")
            changes["status"] = body["status"]
        if "mergedInto" in body:
            target = body["mergedInto"]
            if not isinstance(target, str) or target not in self.tickets:
                raise Refusal(422, f"mergedInto names no ticket: {target}")
            if target == ticket["id"]:
                raise Refusal(422, "a ticket cannot be merged into itself")
            changes["mergedInto"] = target
        updated = {**ticket, **changes}

        def apply() -> None:
            ticket.update(changes)

        return 200, updated, apply

    def _delete(self, ticket: dict[str, Any]) -> tuple[int, dict[str, Any], Any]:
        if ticket["status"] == "open":
            raise Refusal(409, "close the ticket before deleting it")

        def apply() -> None:
            del self.tickets[ticket["id"]]

        return 200, {"id": ticket["id"], "deleted": True}, apply


def create_app(
    store: TicketStore | None = None, *, ignore_dry_run: bool = False, write_token: str | None = None
) -> FastAPI:
    """The ticket API over `store` (a fresh one by default); the store is also `app.state.store`.
    With `write_token`, a write without `Authorization: Bearer <write_token>` is refused (401)."""
    store = store or TicketStore(ignore_dry_run=ignore_dry_run)
    app = FastAPI(title="reviewer sample ticket API", version="1")
    app.state.store = store

    @app.exception_handler(Refusal)
    async def refused(_: Request, error: Refusal) -> JSONResponse:
        return JSONResponse({"detail": error.message}, status_code=error.status)

    def handle_write(
        request: Request, route: str, ticket_id: str | None, body: Any, dry_run: str | None
    ) -> JSONResponse:
        with store.lock:
            store.request_log.append(
                {
                    "method": request.method,
                    "path": request.url.path,
                    "query": dict(request.query_params),
                    "body": body,
                }
            )
            store.write_requests += 1
            if write_token is not None and not hmac.compare_digest(
                request.headers.get("authorization", "").encode(), f"Bearer {write_token}".encode()
            ):
                raise Refusal(401, "a write needs the API's credential (Authorization: Bearer ...)")
            if dry_run is not None and dry_run != DRY_RUN_VALUE:
                raise Refusal(400, f"dryRun must be {DRY_RUN_VALUE!r} when given")
            dry = dry_run == DRY_RUN_VALUE and not store.ignore_dry_run
            if dry:
                store.dry_run_requests += 1
            if body is not None and not isinstance(body, dict):
                raise Refusal(422, "the body must be a JSON object")
            query = dict(request.query_params)
            request_id = request.headers.get("x-request-id", "")[:REQUEST_ID_KEPT] or None
            status, result = store.write(request.method, route, ticket_id, body or {}, dry, query, request_id)
        return JSONResponse(result, status_code=status)

    @app.get("/v1/tickets", operation_id="list_tickets")
    def list_tickets() -> dict[str, Any]:
        with store.lock:
            return {"tickets": [dict(ticket) for ticket in store.tickets.values()]}

    @app.get("/v1/tickets/{ticket_id}", operation_id="get_ticket")
    def get_ticket(ticket_id: str) -> dict[str, Any]:
        with store.lock:
            if ticket_id not in store.tickets:
                raise HTTPException(404, f"no ticket {ticket_id}")
            return dict(store.tickets[ticket_id])

    # The link names the value a create produces that later calls use: the new ticket's id.
    created_links = {
        "ticket": {"operationId": "get_ticket", "parameters": {"ticket_id": "$response.body#/id"}}
    }

    @app.post(
        "/v1/tickets",
        status_code=201,
        operation_id="create_ticket",
        openapi_extra={"responses": {"201": {"description": "Created", "links": created_links}}},
    )
    def create_ticket(request: Request, body: JsonBody = None, dry_run: DryRunQuery = None) -> JSONResponse:
        return handle_write(request, "/v1/tickets", None, body, dry_run)

    @app.patch("/v1/tickets/{ticket_id}", operation_id="update_ticket")
    def update_ticket(
        request: Request,
        ticket_id: str,
        body: JsonBody = None,
        dry_run: DryRunQuery = None,
    ) -> JSONResponse:
        return handle_write(request, "/v1/tickets/{id}", ticket_id, body, dry_run)

    @app.delete("/v1/tickets/{ticket_id}", operation_id="delete_ticket")
    def delete_ticket(request: Request, ticket_id: str, dry_run: DryRunQuery = None) -> JSONResponse:
        return handle_write(request, "/v1/tickets/{id}", ticket_id, None, dry_run)

    @app.get("/v1/audit", operation_id="audit")
    def audit() -> dict[str, Any]:
        """The writes the API kept, oldest first: refused and dry-run requests leave no line."""
        with store.lock:
            return {"entries": [dict(entry) for entry in store.audit]}

    @app.get("/v1/stats", operation_id="stats")
    def stats() -> dict[str, int]:
        with store.lock:
            return store.stats()

    @app.get("/v1/requests", operation_id="requests")
    def requests() -> dict[str, Any]:
        """Every write request received, as received: proof of what did or did not reach the API."""
        with store.lock:
            return {"requests": [dict(entry) for entry in store.request_log]}

    @app.post("/v1/reset", operation_id="reset")
    def reset() -> dict[str, Any]:
        """Sample only: back to t1, t2, t3 open, so the walkthrough can run the scenario again."""
        with store.lock:
            store.reset()
            return {"tickets": list(store.tickets)}

    return app
