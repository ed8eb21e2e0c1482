"""The queue's answers as a shell command reads them: msgspec views of the API's messages.

`reviewer list`, `show`, `approve` and `reject` are one request or three, then the process ends: the
pydantic models of `reviewer.queue.messages` (which the service validates with, and the app and the
agents read) cost a command more to load than its requests take. Each view here names only the fields
its reader uses, with the message's own names, and ignores the rest, so a queue that answers more
still answers these; `tests/queue/test_answers.py` holds every field to its message's.

Strings are the queue's and the agents' own, raw: each reader sanitizes what it shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Final, Literal, Protocol, TypeVar

import msgspec

from reviewer.reading.summary import PlanReading

if TYPE_CHECKING:
    from reviewer.policy.windows import WindowKind

View = TypeVar("View", bound=msgspec.Struct)

State = Literal["pending", "approved", "claimed", "rejected", "changes_requested", "expired", "executed"]
"""The state of a proposal's latest revision, as the decision endpoint reports it.

`changes_requested`: a reviewer asked for changes (`reason` says which); the revision is closed and
the proposal waits for its agent's next revision;

`claimed`: a run holds the approval (it can no longer expire or be superseded under the run);
`executed`: that run's report is stored, whether it went well or not.
"""
TrailEventKind = Literal[
    "submitted", "approved", "rejected", "changes_requested", "claimed", "executed", "withdrawn"
]
"""`withdrawn`: an approval that stopped counting, and `reason` says why. When the trail recorded it
(the reviewer's sign-in ended: out of the group, or revoked) it has a `seq` of its own; when the queue
computes it as it answers (the key that signed it was removed, the token expired) its `seq` is the
withdrawn approval's."""
RefusalKind = Literal["trail", "signatures", "ledger", "other"]
"""Why an executor refused an approval before claiming it: the queue's trail went backwards or forked
since the executor last saw it; the approval's signatures do not satisfy the signers it trusts; its
own ledger says it already ran this approval; or anything else it checks."""


class ErrorFields(msgspec.Struct, frozen=True):
    """A refusal (`ErrorBody`): its code, its words, and what a 409 or 412 adds."""

    error: str
    message: str
    state: State | None = None
    decided_by: str | None = None
    claimed_by: str | None = None
    latest_revision: int | None = None
    latest_plan_sha256: str | None = None
    window: str | None = None
    runs_from: datetime | None = None


class WindowFields(msgspec.Struct, frozen=True):
    """Whether the plan may run now under its change windows (`WindowState`)."""

    may_run: bool
    window: str | None = None
    kind: Literal["allow", "deny"] | None = None
    runs_from: datetime | None = None
    runs_until: datetime | None = None
    break_glass: list[str] = []
    break_glass_required: int | None = None


class RefusalFields(msgspec.Struct, frozen=True):
    """An executor's refusal of the approval (`ExecutorRefusal`)."""

    kind: RefusalKind
    message: str
    refused_by: str
    at: datetime


class StateFields(msgspec.Struct, frozen=True):
    """The latest revision's state (`DecisionState`)."""

    proposal_id: str
    revision: int
    plan_sha256: str
    state: State
    decided_by: str | None = None
    reason: str | None = None
    claimed_by: str | None = None
    outcome_unknown: bool | None = None
    approvals: list[str] = []
    approvals_required: int = 1
    refusals: list[RefusalFields] = []
    window: WindowFields | None = None


class RowFields(msgspec.Struct, frozen=True):
    """One row of the list (`ProposalSummary`), with the reading the queue stored at submission."""

    proposal_id: str
    revision: int
    title: str
    proposed_by: str
    plan_sha256: str
    submitted_at: datetime
    state: State
    claimed_by: str | None = None
    outcome_unknown: bool | None = None
    reading: PlanReading | None = None
    yours: bool = True
    approvals: list[str] = []


class PageFields(msgspec.Struct, frozen=True):
    """A page of the list (`ProposalPage`)."""

    proposals: list[RowFields]
    next_cursor: str | None = None


class RevisionFields(msgspec.Struct, frozen=True):
    """One revision of a proposal (`RevisionInfo`)."""

    revision: int
    plan_sha256: str
    submitted_by: str
    submitted_at: datetime


class EventFields(msgspec.Struct, frozen=True):
    """One entry of a proposal's trail (`TrailEvent`)."""

    actor: str
    event: TrailEventKind
    revision: int
    reason: str | None = None


class RecordFields(msgspec.Struct, frozen=True):
    """A proposal as the queue holds it (`ProposalRecord`)."""

    proposal_id: str
    latest: StateFields
    revisions: list[RevisionFields]
    history: list[EventFields]


class IdentityFields(msgspec.Struct, frozen=True):
    """Who the credential is (`Whoami`)."""

    name: str


class LinkFields(msgspec.Struct, frozen=True):
    """The review page of the latest revision (`ReviewLink`)."""

    proposal_id: str
    revision: int
    review: str


VIEWED: Final = {
    ErrorFields: "ErrorBody",
    WindowFields: "WindowState",
    RefusalFields: "ExecutorRefusal",
    StateFields: "DecisionState",
    RowFields: "ProposalSummary",
    PageFields: "ProposalPage",
    RevisionFields: "RevisionInfo",
    EventFields: "TrailEvent",
    RecordFields: "ProposalRecord",
    IdentityFields: "Whoami",
    LinkFields: "ReviewLink",
}
"""Each view and the message it reads."""


def decoded(content: bytes, view: type[View]) -> View:
    """An answer read as `view`; `msgspec.ValidationError` or `DecodeError` when it is not one."""
    return msgspec.json.decode(content, type=view)


def error_fields(content: bytes) -> ErrorFields | None:
    """A refusal's body, or None when it is not the queue's (a proxy's 502 page, an empty body)."""
    try:
        return decoded(content, ErrorFields)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


class Window(Protocol):
    """What `window_words` reads: a `WindowState` or its view."""

    @property
    def may_run(self) -> bool: ...
    @property
    def window(self) -> str | None: ...
    @property
    def kind(self) -> WindowKind | None: ...
    @property
    def runs_from(self) -> datetime | None: ...
    @property
    def runs_until(self) -> datetime | None: ...
    @property
    def break_glass(self) -> list[str]: ...
    @property
    def break_glass_required(self) -> int | None: ...


def window_words(state: Window) -> str:
    """One line, as `reviewer show`, `reviewer approve` and the review screen say it: "runs from
    2027-01-04 08:00 UTC (inside the deny window 'year-end freeze'; break glass 1 of 2: bob)"."""
    from reviewer.plan.sanitize import safe_text
    from reviewer.policy.windows import kept_text, when

    given = ", ".join(safe_text(name) for name in state.break_glass)
    if state.may_run and state.kind is not None:
        return f"may run now: glass broken by {given} ({safe_text(state.window or '')} set aside)"
    if state.may_run:
        until = "" if state.runs_until is None else f" until {when(state.runs_until)}"
        closing = f" ({safe_text(state.window)} closes)" if state.window and state.runs_until else ""
        return f"may run now{until}{closing}"
    glass = ""
    if state.break_glass_required is not None:
        glass = f"; break glass {len(state.break_glass)} of {state.break_glass_required}"
        glass += f": {given}" if given else ""
    kept, _, runs = kept_text(state.kind, safe_text(state.window or ""), state.runs_from).partition("; ")
    return f"{runs} ({kept}{glass})"


class TrailEntry(Protocol):
    """What `withdrawals_of` reads of a trail entry: a `TrailEvent` or its view."""

    @property
    def actor(self) -> str: ...
    @property
    def event(self) -> str: ...
    @property
    def revision(self) -> int: ...
    @property
    def reason(self) -> str | None: ...


WITHDRAWAL_CAUSES: Final = (
    ("sign-in", "sign-in ended"),
    ("expired", "token expired"),
    ("revoked", "token revoked"),
    ("key", "key removed"),
)
"""What ended a withdrawn approval, by the words its reason holds, in the few words a line shows."""


def withdrawals_of(history: Iterable[TrailEntry], revision: int) -> list[tuple[str, str]]:
    """Who cast each approval of `revision` that was withdrawn, and what ended it, in trail order."""
    return [
        (event.actor, _withdrawal_cause(event))
        for event in history
        if event.event == "withdrawn" and event.revision == revision
    ]


def _withdrawal_cause(event: TrailEntry) -> str:
    """Read past the name the reason starts with (`alice's token expired`): a name is anyone's words."""
    reason = event.reason or ""
    reason = reason.removeprefix(f"{event.actor}'s ")
    return next((cause for said, cause in WITHDRAWAL_CAUSES if said in reason), "withdrawn")
