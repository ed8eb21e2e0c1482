"""The agent's side of the reference scenario: ticket write tools, a read tool, and the task itself."""

from __future__ import annotations

from typing import Any, Final, Literal

import httpx

from reviewer.agent import HttpRequest, Recording, audit_source, dry_run, path_with, write_tool
from reviewer.plan.proposal import Agent, Proposal, Target

REFERENCE_TITLE: Final = "Printer on fire"
REFERENCE_TASK: Final = "Open one ticket, close t1 and t2 into it, delete t3."
REFERENCE_PLAN_TITLE: Final = "Merge t1 and t2 into a new ticket, delete t3"
AUDIT: Final = audit_source("api:/v1/audit")
"""The sample API's own log, read through the run's client: it holds the writes the API kept."""
DRY_RUN_QUERY: Final = {"dryRun": "All"}
"""The sample API's documented dry-run parameter (its OpenAPI document declares it on every write)."""
AGENT: Final = Agent(name="deskline-agent", run_id="walkthrough")


def target(base_url: str, environment: str = "sample") -> Target:
    return Target(api="sample-tickets", base_url=base_url, environment=environment)


@write_tool(effect="create", produces=("id",))
def create_ticket(title: str, status: Literal["open", "closed"] | None = None) -> HttpRequest:
    """Open a ticket; the API mints its id (tk-4, tk-5, ...)."""
    body: dict[str, Any] = {"title": title}
    if status is not None:
        body["status"] = status
    return HttpRequest("POST", "/v1/tickets", body=body)


@write_tool(effect="update")
def update_ticket(
    id: str,
    status: Literal["open", "closed"] | None = None,
    mergedInto: str | None = None,
    title: str | None = None,
) -> HttpRequest:
    """Change a ticket's status or title, or merge it into another ticket."""
    body = {
        name: value
        for name, value in (("status", status), ("mergedInto", mergedInto), ("title", title))
        if value is not None
    }
    return HttpRequest("PATCH", path_with("/v1/tickets/{id}", id=id), body=body)


@write_tool(effect="delete")
def delete_ticket(id: str) -> HttpRequest:
    """Delete a ticket; the server refuses while it is open."""
    return HttpRequest("DELETE", path_with("/v1/tickets/{id}", id=id))


async def list_tickets(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    """A read tool: not wrapped, it reads the live API in every mode."""
    response = await client.get("/v1/tickets")
    response.raise_for_status()
    return list(response.json()["tickets"])


async def reference_task(title: str = REFERENCE_TITLE) -> None:
    """The reference task, as an agent would write it: the same code runs dry and for real."""
    ticket = await create_ticket(title=title)
    await update_ticket(id="t1", status="closed", mergedInto=ticket["id"])
    await update_ticket(id="t2", status="closed", mergedInto=ticket["id"])
    await delete_ticket(id="t3")


async def dry_run_reference(
    api: httpx.AsyncClient, mode: str, proposal_id: str, base_url: str, **options: Any
) -> tuple[Recording, Proposal]:
    """The reference task dry-run in `mode`, and the proposal the agent would submit for it.

    Only the server mode is handed `api` (and reads its audit log through it): the fakes must never
    hold a client that reaches it, and send nothing the log could show.
    """
    client = api if mode == "server" else None
    audit = AUDIT if client is not None else None
    if mode == "server":
        options = {"dry_run_query": DRY_RUN_QUERY, **options}
    async with dry_run(mode, client=client, audit=audit, **options) as recording:
        await reference_task()
    proposal = recording.to_proposal(
        proposal_id=proposal_id,
        title=REFERENCE_PLAN_TITLE,
        task=REFERENCE_TASK,
        agent=AGENT,
        target=target(base_url),
    )
    return recording, proposal
