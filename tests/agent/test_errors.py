"""The reasons nothing may run share one base, and each still says which proposal and why."""

from __future__ import annotations

import pytest

from reviewer.agent import AgentError, DecisionTimeout, NoApproval, NotApproved, ProposalRejected


@pytest.mark.parametrize(
    "error",
    [
        NotApproved("p-1", 2, "no reviewer has approved it yet"),
        DecisionTimeout("p-1", 2, 1.5),
        ProposalRejected("p-1", 2, "alice", "t3 is still open"),
    ],
)
def test_every_missing_approval_is_a_no_approval_naming_its_revision(error: NoApproval) -> None:
    assert isinstance(error, AgentError)
    assert (error.proposal_id, error.revision) == ("p-1", 2)
    assert "proposal p-1 revision 2" in str(error)
