"""Tests that the bundled sample proposals parse and cover what `reviewer demo` must be able to show."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reviewer.plan.placeholders import PLACEHOLDER
from reviewer.plan.proposal import Call, Proposal, parse_proposal, plan_sha256
from reviewer.reading.analysis import Analysis
from reviewer.tui.model.sources import EXECUTION_SUFFIX

SAMPLES = Path(__file__).resolve().parents[2] / "sample_proposals"
FILES = sorted(path for path in SAMPLES.glob("*.json") if not path.name.endswith(EXECUTION_SUFFIX))


def load(name: str) -> Proposal:
    return parse_proposal((SAMPLES / name).read_bytes(), name)


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, child in value.items():
            yield key
            yield from strings(child)
    elif isinstance(value, list):
        for child in value:
            yield from strings(child)


def args_of(call: Call) -> dict[str, Any]:
    assert call.args is not None
    return call.args


def test_there_are_at_least_eight_samples() -> None:
    assert len(FILES) >= 8


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_every_sample_parses_and_has_a_digest(path: Path) -> None:
    proposal = parse_proposal(path.read_bytes(), path.name)
    assert proposal.calls, "a sample without calls shows nothing"
    assert len(plan_sha256(proposal)) == 64
    assert path.stat().st_size < 1_000_000, "samples ship in the package; keep them small"


def test_each_sample_is_one_distinct_revision() -> None:
    keys = [(load(path.name).proposal_id, load(path.name).revision) for path in FILES]
    assert len(keys) == len(set(keys))


def test_every_way_of_answering_a_dry_run_is_present() -> None:
    assert {load(path.name).dry_run.via for path in FILES} == {"server", "fake", "transport", "record"}


def test_reference_scenario_three_times() -> None:
    """The design's reference scenario, as the server, a fake and a recorder answered it."""
    server, fake, record = (load(f"deskline-merge.{via}.json") for via in ("server", "fake", "record"))
    assert [proposal.dry_run.via for proposal in (server, fake, record)] == ["server", "fake", "record"]
    assert len({server.proposal_id, fake.proposal_id, record.proposal_id}) == 3
    for proposal in (server, fake, record):
        assert [(call.tool, call.effect) for call in proposal.calls] == [
            ("create_ticket", "create"),
            ("update_ticket", "update"),
            ("update_ticket", "update"),
            ("delete_ticket", "delete"),
        ]
        assert [args_of(call)["id"] for call in proposal.calls[1:]] == ["t1", "t2", "t3"]
        assert args_of(proposal.calls[1])["mergedInto"] == "<id from call 1>"
    assert plan_sha256(fake) == plan_sha256(record), "the same plan, only the answers differ"
    assert (server.dry_run.write_requests, server.dry_run.writes_kept) == (4, 0)
    assert (fake.dry_run.write_requests, fake.dry_run.writes_kept) == (0, 0)
    assert [call.outcome.http_status for call in server.calls if call.outcome] == [201, 422, 422, 409]
    assert server.calls[0].outcome and server.calls[0].outcome.result == {"id": "tk-4", "status": "open"}
    assert all(call.request and call.request.query == {"dryRun": "All"} for call in server.calls)
    assert fake.calls[0].outcome and fake.calls[0].outcome.result["id"].startswith("fk-")
    assert {call.outcome.status for call in record.calls if call.outcome} == {"recorded"}


def test_two_revisions_that_drift() -> None:
    first, second = load("deskline-triage.rev1.json"), load("deskline-triage.rev2.json")
    assert first.proposal_id == second.proposal_id and (first.revision, second.revision) == (1, 2)
    assert second.calls[0].tool == "create_label", "revision 2 inserts a call first"
    assert "delete_ticket" in [call.tool for call in first.calls]
    assert "delete_ticket" not in [call.tool for call in second.calls], "and removes one"
    assert args_of(first.calls[-2])["priority"] != args_of(second.calls[-1])["priority"], (
        "and changes one argument"
    )
    renumbered = {json.dumps(call.args) for call in first.calls[1:4]}
    assert "<id from call 1>" in "".join(renumbered)
    assert "<id from call 2>" in json.dumps([call.args for call in second.calls])


def test_a_dry_run_whose_api_ignored_the_flag() -> None:
    kept = [load(path.name) for path in FILES if (load(path.name).dry_run.writes_kept or 0) > 0]
    assert kept and kept[0].dry_run.writes_kept == kept[0].dry_run.write_requests == 3


def test_a_bulk_refund_with_one_amount_far_above_the_rest() -> None:
    proposal = load("billing-refunds.outlier.json")
    assert 30 <= len(proposal.calls) <= 50
    amounts = sorted(args_of(call)["amount_cents"] for call in proposal.calls if call.tool == "create_refund")
    assert amounts[-1] >= 500 * amounts[len(amounts) // 2]


def test_kubernetes_shaped_plan() -> None:
    proposal = load("k8s-shop-scale-down.server.json")
    assert {call.tool for call in proposal.calls} >= {"scale_deployment", "delete_namespace"}
    assert all(
        call.request and call.request.query and call.request.query["dryRun"] == "All"
        for call in proposal.calls
    )
    assert any("persistent_volume" in call.tool for call in proposal.calls)


def test_a_plan_of_about_two_thousand_calls() -> None:
    proposal = load("billing-refunds-2000.server.json")
    assert len(proposal.calls) == 2000


def test_a_hostile_sample_carries_every_trick() -> None:
    raw = (SAMPLES / "hostile-markup.json").read_text()
    proposal = load("hostile-markup.json")
    everything = "\n".join(strings(json.loads(raw)))
    for trick in [
        "[@click=app.approve]",
        "[bold red]",
        "\x1b[2J",
        "\u202e",
        "\u200b",
        "\U000e0061",
        "\r",
        "\x9b",
    ]:
        assert trick in everything, repr(trick)
    assert max(len(value) for call in proposal.calls for value in (call.args or {}).values()) >= 100_000
    assert raw.isascii(), "the file itself shows its tricks as escapes"
    assert Analysis(proposal).hidden_characters


def test_placeholders_in_samples_are_well_formed() -> None:
    """A sample's placeholders all name an earlier call: unresolved ones would be an alarm in a demo."""
    for path in FILES:
        analysis = Analysis(load(path.name))
        if b" from call " in path.read_bytes():
            assert PLACEHOLDER.search(path.read_text())
        assert analysis.ratios.unresolved_placeholders == 0, path.name
