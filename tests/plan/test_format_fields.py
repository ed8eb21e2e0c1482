"""What an agent leaves out of a plan for a queue that reads fewer fields (`fit_for_queue`)."""

from __future__ import annotations

import json

from reviewer.plan.format_fields import fit_for_queue, proposal_fields

PLAN = {
    "format": "reviewer.proposal/v1",
    "dry_run": {
        "via": "server",
        "request_ids": ["r1"],
        "sandbox": {"url": "https://sandbox.example/v1/tickets", "query": {"validate_only": "true"}},
    },
    "calls": [],
}


def test_a_queue_that_reads_every_field_gets_the_plan_as_it_is_maps_whole() -> None:
    """The sandbox proof's `query` is a map of parameter names, not fields: nothing of it is left out."""
    body = json.dumps(PLAN).encode()
    assert json.loads(fit_for_queue(body, frozenset(proposal_fields()))) == PLAN


def test_a_dry_run_field_the_queue_does_not_read_is_left_out_and_nothing_else() -> None:
    read = frozenset(field for field in proposal_fields() if field != "dry_run.request_ids")
    fitted = json.loads(fit_for_queue(json.dumps(PLAN).encode(), read))
    assert "request_ids" not in fitted["dry_run"]
    assert fitted["dry_run"]["sandbox"] == PLAN["dry_run"]["sandbox"]
    assert {key: value for key, value in fitted.items() if key != "dry_run"} == {
        key: value for key, value in PLAN.items() if key != "dry_run"
    }
