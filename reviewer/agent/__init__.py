"""The agent library: dry-run capable write tools, plans as proposals, and approved real runs.

@write_tool(effect="create", produces=("id",))
def create_ticket(title: str) -> HttpRequest:
    return HttpRequest("POST", "/v1/tickets", body={"title": title})

async with Gate(api="http://127.0.0.1:8480") as gate:     # token from REVIEWER_AGENT_TOKEN
    result = await gate.run(task, title="Open a ticket")   # dry run, submit, wait, claim, replay, report
result.raise_for_stop()

The same, step by step:
async with dry_run("record") as recording:                # or "server" with the API's dry_run_query
    await task()
proposal = recording.to_proposal(proposal_id=..., title=..., agent=..., target=...)
approval = await queue.submit_and_wait(proposal)          # a reviewer decides
execution = await queue.execute(approval, client=api, audit=audit_source("api:/v1/audit"))
# claims the approval, replays the approved calls once, reports the run, raises RunStopped unless all ran

`__all__` also names the types these signatures take and return (`QueueClient`, `AllowedSigners`,
`Proposal`, `Target`, ...), so a caller imports everything from here.

The modules below this package are its inside (an import-linter contract): only `reviewer run`, the
framework adapters and `mcp-gate`, built on the same machinery, import them, and change with them.
"""

from reviewer.agent.audit import AuditUnavailable
from reviewer.agent.backends import (
    BACKENDS,
    KUBERNETES_DRY_RUN_QUERY,
    Backend,
    FakeBackend,
    RecordBackend,
    ServerBackend,
    TransportBackend,
    is_live_client,
    make_backend,
    rest_mock_handler,
)
from reviewer.agent.errors import (
    AgentError,
    ChangesRequested,
    DecisionTimeout,
    DryRunParameterUnknown,
    LedgerRequired,
    LiveClientRefused,
    LiveClientRequired,
    MintedValueUnsafe,
    NoActiveRun,
    NoApproval,
    NotApproved,
    NoTarget,
    OffTarget,
    OutsideChangeWindow,
    PlanStop,
    ProposalExpired,
    ProposalRejected,
    ReportNotStored,
    RunEnded,
    RunStopped,
    SandboxCheckFailed,
    SandboxKeptWrite,
    TargetMismatch,
    ToolDefinitionError,
    UnknownBackend,
    UnresolvablePlaceholder,
    UnsignedApproval,
    WindowClosed,
    WritesKept,
)
from reviewer.agent.execution import Approval, Execution, execute_approved, local_approval, real_run
from reviewer.agent.feedback import Feedback
from reviewer.agent.flag import DRY_RUN, is_dry_run
from reviewer.agent.gate import AGENT_TOKEN_ENV, Gate, GateResult, MissingAgentToken
from reviewer.agent.http_values import CallAnswer, HttpRequest, path_problem, path_with
from reviewer.agent.ledger import AlreadyRun, Ledger, LedgerEntry, LedgerError
from reviewer.agent.placeholders import placeholder, placeholders_in, substitute
from reviewer.agent.queue import QueueAgent
from reviewer.agent.request_auth import AwsSigV4Auth, OAuth2ClientCredentials, RequestAuthError
from reviewer.agent.runs import RecordedCall, Recording, dry_run
from reviewer.agent.sandbox_check import SandboxCheck
from reviewer.agent.tools import GatedTool, ToolArgumentError, WriteTool, sdk_tool, write_tool
from reviewer.agent.waiting import Patience
from reviewer.audit.matching import AuditMatch
from reviewer.audit.registry import AuditSource, audit_source
from reviewer.plan.dry_run_params import names_dry_run
from reviewer.plan.proposal import Agent, Call, Proposal, Request, SandboxProof, Target
from reviewer.queue.client import QueueClient
from reviewer.queue.messages import AuditVerification, DecisionState, SentRequestId, SubmissionAnswer
from reviewer.reading.verification import Verification
from reviewer.signing.allowed_signers import AllowedSigners

__all__ = [
    "AGENT_TOKEN_ENV",
    "Agent",
    "AgentError",
    "AllowedSigners",
    "AlreadyRun",
    "Approval",
    "AuditMatch",
    "AuditSource",
    "AuditUnavailable",
    "AuditVerification",
    "AwsSigV4Auth",
    "BACKENDS",
    "Backend",
    "Call",
    "CallAnswer",
    "ChangesRequested",
    "DRY_RUN",
    "DecisionState",
    "DecisionTimeout",
    "DryRunParameterUnknown",
    "Execution",
    "FakeBackend",
    "Feedback",
    "Gate",
    "GateResult",
    "GatedTool",
    "HttpRequest",
    "KUBERNETES_DRY_RUN_QUERY",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "LedgerRequired",
    "LiveClientRefused",
    "LiveClientRequired",
    "MintedValueUnsafe",
    "MissingAgentToken",
    "NoActiveRun",
    "NoApproval",
    "NoTarget",
    "NotApproved",
    "OAuth2ClientCredentials",
    "OffTarget",
    "OutsideChangeWindow",
    "Patience",
    "PlanStop",
    "Proposal",
    "ProposalExpired",
    "ProposalRejected",
    "QueueAgent",
    "QueueClient",
    "RecordBackend",
    "RecordedCall",
    "Recording",
    "ReportNotStored",
    "Request",
    "RequestAuthError",
    "RunEnded",
    "RunStopped",
    "SandboxCheck",
    "SandboxCheckFailed",
    "SandboxKeptWrite",
    "SandboxProof",
    "SentRequestId",
    "ServerBackend",
    "SubmissionAnswer",
    "Target",
    "TargetMismatch",
    "ToolArgumentError",
    "ToolDefinitionError",
    "TransportBackend",
    "UnknownBackend",
    "UnresolvablePlaceholder",
    "UnsignedApproval",
    "Verification",
    "WindowClosed",
    "WriteTool",
    "WritesKept",
    "audit_source",
    "dry_run",
    "execute_approved",
    "is_dry_run",
    "is_live_client",
    "local_approval",
    "make_backend",
    "names_dry_run",
    "path_problem",
    "path_with",
    "placeholder",
    "placeholders_in",
    "real_run",
    "rest_mock_handler",
    "sdk_tool",
    "substitute",
    "write_tool",
]
