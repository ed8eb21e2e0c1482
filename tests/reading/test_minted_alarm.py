"""The `minted_values` alarm on a plan that hard-codes its dry run's id: it names the call, the field and
the value in printable words, whatever the agent wrote, and a plan without one pays nothing for it."""

from __future__ import annotations

from reviewer.plan.proposal import Agent, Call, DryRun, Outcome, Proposal, Request, Target
from reviewer.reading.analysis import Analysis, Verdict


def plan(key: str, value: str, via: str = "server") -> Proposal:
    return Proposal(
        format="reviewer.proposal/v1",
        proposal_id="minted-alarm",
        revision=1,
        title="t",
        agent=Agent(name="a"),
        created_at="2026-12-04T10:00:00Z",
        target=Target(api="tickets", base_url="http://127.0.0.1:9"),
        dry_run=DryRun(via=via, write_requests=2, writes_kept=0),
        calls=[
            Call(
                seq=1,
                tool="create_ticket",
                effect="create",
                args={"title": "x"},
                request=Request("POST", "/v1/tickets", {"dryRun": "All"}, {"title": "x"}),
                outcome=Outcome("ok", 201, None, {"id": "tk-4", "title": "x"}),
            ),
            Call(
                seq=2,
                tool="\x1b[31mupdate\u202e",
                effect="update",
                args={key: value},
                request=Request("PATCH", "/v1/tickets/tk-4", {"dryRun": "All"}, {key: value}),
                outcome=Outcome("refused", 409, "conflict"),
            ),
        ],
    )


def test_the_alarm_is_printable_and_short_whatever_the_agent_wrote() -> None:
    analysis = Analysis(plan("\x1b]0;owned\x07" + "k" * 10_000_000, "tk-4"))
    alarm = dict(analysis.named_alarms)["minted_values"]
    assert alarm.isprintable() and len(alarm) < 600
    assert "carries 'tk-4' at args." in alarm and "(2 calls in all)" not in alarm
    assert analysis.row(1).verdict is Verdict.CHAIN_NOISE and analysis.row(1).depends_on == (1,)


def test_a_path_segment_counts_and_a_recorded_plan_has_no_minted_values() -> None:
    analysis = Analysis(plan("note", "fine"))
    assert "request.path segment 3" in dict(analysis.named_alarms)["minted_values"]
    recorded = Analysis(plan("note", "fine", via="record"))
    assert "minted_values" not in recorded.alarm_names and recorded.minted_uses == {}
