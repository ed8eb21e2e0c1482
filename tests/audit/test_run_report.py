"""A real run's report goes to the queue whatever its audit source does: a verification that does not
fit the report is left out with a note saying why, a source still being read after the bound is left
behind; the report keeps the verification's limits the same as a plan's."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

from pydantic import TypeAdapter

from reviewer.audit.inputs import AuditInput
from reviewer.audit.registry import AuditSource
from reviewer.audit.rows import AuditRow, MalformedLine
from reviewer.plan.proposal import MAX_CALLS
from reviewer.queue.messages import AuditVerification
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.audit.gated import executions, gated_run


def test_a_verification_holds_as_many_calls_as_a_plan() -> None:
    """One entry per call: a run of the largest plan the queue takes must not have its report refused."""
    schema = TypeAdapter(AuditVerification).json_schema()
    assert schema["properties"]["calls"]["maxItems"] == MAX_CALLS


def out_of_range_status(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
    """A package's reader that gives a write nobody approved a status the report cannot carry."""
    yield AuditRow("plugged:1", datetime.now(UTC), "DELETE", "/v1/tickets/t9", status=10_000)


def test_a_verification_that_does_not_fit_the_report_is_left_out_and_the_report_stored(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    proposal_id = f"audit-unfit-{uuid.uuid4().hex[:8]}"
    source = AuditSource("plugged", out_of_range_status, AuditInput("/var/log/plugged.log"))
    gated_run(queue, sample_api.base_url, proposal_id, audit=source)
    (stored,) = asyncio.run(executions(queue, proposal_id))
    assert len(stored.calls) == 4 and stored.audit is None
    assert stored.note is not None and stored.note.startswith("the audit verification")
    assert "the audit verification against plugged:/var/log/plugged.log was left out" in stored.note
    assert "unplanned.0.status" in stored.note


def test_a_source_that_never_finishes_does_not_hold_the_report(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    """A reader that hangs (a URL that trickles, a package's reader stuck): the report goes once the
    bound has passed, saying the log was not read in time."""
    released = threading.Event()

    def hanging(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
        released.wait(timeout=10)  # a deadline of its own, far past the bound
        yield from ()

    proposal_id = f"audit-late-{uuid.uuid4().hex[:8]}"
    source = AuditSource("plugged", hanging, AuditInput("/var/log/plugged.log"))
    try:
        gated_run(queue, sample_api.base_url, proposal_id, audit=source, audit_read_timeout=0.2)
        (stored,) = asyncio.run(executions(queue, proposal_id))
    finally:
        released.set()
    assert len(stored.calls) == 4 and stored.audit is not None
    assert stored.audit["source"] == "plugged:/var/log/plugged.log" and not stored.audit["complete"]
    assert stored.audit.get("problem") == (
        "not read in time: still reading after 0.2 s, the report was sent without it"
    )
