"""What a dry-run answer proves, told to the model in words beside the answer (`CallAnswer.note`).

The model decides what to do next from a tool's answer. Without a note it reads a server dry run's
422 on a call that depends on an earlier create as a failure and starts working around it, and it
reads a fake's ok as a write that happened. The verdict is the reviewer's own (`analysis.interpret`),
so the model and the reviewer are told the same thing.
"""

from __future__ import annotations

from reviewer.agent.http_values import CallAnswer
from reviewer.plan.proposal import Outcome
from reviewer.reading.analysis import Verdict, interpret

_NOTHING_WRITTEN = "Nothing was written; the real run happens only after a reviewer approves the plan."


def dry_run_note(via: str, answer: CallAnswer, depends_on: tuple[int, ...]) -> str:
    """The note for one dry-run answer given by backend `via`; `depends_on` lists the earlier calls
    of the plan this one depends on (through a placeholder, or by touching what they wrote)."""
    outcome = Outcome(status=answer.status, http_status=answer.http_status, message=answer.message)
    verdict = interpret(via, outcome, bool(depends_on))
    said = f" ({answer.http_status or answer.status}: {answer.message})" if answer.message else ""
    earlier = ", ".join(f"call {seq}" for seq in depends_on)
    if verdict in (Verdict.VALIDATED, Verdict.UNPROVEN):
        text = (
            "Dry run: the API's own rules accepted this call against the state before the plan. "
            "Values only a real write produces are placeholders such as <id from call 1>: pass them on "
            "unchanged."
        )
    elif verdict is Verdict.CHAIN_NOISE:
        text = (
            f"Dry run: the API refused this{said}, but it depends on {earlier} of this plan, which the "
            "dry run did not persist: expected chain noise, not a reason to change the plan. Go on."
        )
    elif verdict is Verdict.REAL_REFUSAL:
        text = (
            f"Dry run: the API refused this{said} and it depends on no earlier call of the plan, so the "
            "real run will be refused too. Change the plan if this call must succeed."
        )
    elif verdict is Verdict.NOT_VALIDATED:
        text = (
            f"Dry run against a fake ({via}): only the request's shape was checked, no rule of the API "
            "ran, and ids are invented: they are placeholders such as <id from call 1>, pass them on "
            "unchanged."
        )
    elif verdict is Verdict.FAKE_REFUSAL:
        text = f"Dry run against a fake ({via}): it refused the request's shape{said}. Fix the call."
    elif verdict is Verdict.RECORDED:
        text = "Recorded for review, not sent and not validated."
    else:
        text = f"The dry run of this call failed{said}; nothing about the call is known."
    return f"{text} {_NOTHING_WRITTEN}"
