"""`reviewer mcp-gate`: a stdio MCP server in front of an unmodified upstream MCP server.

The host (a desktop assistant, an IDE) starts the gate instead of the upstream. The gate starts the
upstream from COMMAND over stdio and lists its tools unchanged, plus `reviewer_submit_plan` and
`reviewer_plan_status`; the upstream's resources, resource templates and prompts pass through as they are.

What passes un-gated is the operator's decision (`TrustPolicy`), never the upstream's: MCP calls tool
annotations untrusted hints. A tool passes straight through only when `--read` names it, or when the
operator trusts read-only hints (`--trust-read-only-hints`) and the tool says read-only without also
saying destructive. Any other call is recorded (`dry_run.via: record`) and answered at once with what
was recorded and a placeholder for its result, in the shape of the tool's output schema when it
declares one (the host's client validates structured content against it). Effects never overstate nor
understate: `--effect` says, else an update when the tool hints `destructiveHint` (it may overwrite:
the reviewer is told so), a create when it hints `destructiveHint: false`, else an effect unknown
(effect `other`). `delete` comes only from the operator.

The proposal names the upstream (`--name`, else the command and its arguments) and pins the definitions
of its tools (`Target.tools_sha256`). Once a reviewer approves, `reviewer_plan_status` lists the tools
again, refuses an upstream whose definitions changed, claims the approval and makes the calls on the
upstream once, in order, stopping at the first failure (`reviewer.agent.session`). The queue holds the
plan, so a gate restarted between submission and approval runs it from the queue's copy. A call sent
and never answered (a timeout, an upstream that died) may have been performed: it is never sent again.

The upstream runs in the sandbox `reviewer run` gives its COMMAND (`reviewer.sandbox`): a root of the
system's folders and what `--writable` and `--readable` hand it, no Unix socket, no network (or the
machine's, with `--share-network`), none of the gate's processes, and an environment without any
`REVIEWER_` variable, the agent socket or the audit log's credential. So a server that reads its
environment, the reviewer's files or its parent's command line finds nothing of the reviewer's.
"""
