"""An MCP server whose ticket tools are gated by the queue, against the sample ticket API.

Run `reviewer sample-api` and `reviewer serve`, mint an agent token, and point an MCP host at:

    REVIEWER_AGENT_TOKEN=... python examples/mcp_server.py

The host's model calls the tools as usual; each write is dry-run against the API (dryRun=All) and
answered with what the dry run proved. `reviewer_submit_plan` sends the plan to the queue,
`reviewer_plan_status` runs it once after a reviewer approves it.
"""

from __future__ import annotations

import os
from typing import Any

from reviewer.adapters.mcp import gated_server
from reviewer.agent import Gate
from reviewer.sample_api.tools import AUDIT, DRY_RUN_QUERY, create_ticket, delete_ticket, update_ticket


def build(api_url: str, queue_url: str, **gate_options: Any) -> Any:
    # The sample API documents its dry-run parameter, so its own rules answer the dry run; an API
    # without one keeps the default, backend="record".
    server_dry_run = {"backend": "server", "dry_run_query": DRY_RUN_QUERY}
    gate = Gate(
        api=api_url, queue=queue_url, audit=AUDIT, agent="deskline-mcp", **(server_dry_run | gate_options)
    )
    return gated_server(gate, create_ticket, update_ticket, delete_ticket, title="Ticket changes")


if __name__ == "__main__":
    build(
        os.environ.get("SAMPLE_API", "http://127.0.0.1:8480"),
        os.environ.get("REVIEWER_QUEUE", "http://127.0.0.1:8470"),
    ).run("stdio")
