"""The `reviewer run` command line; the gate, uvicorn and the agent library load only when it runs."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from reviewer import collection_held
from reviewer.audit.options import add_source_options
from reviewer.sandbox.options import add_sandbox_options
from reviewer.signing.options import add_signer_options

if TYPE_CHECKING:
    from reviewer.agent.sandbox_check import SandboxCheck
    from reviewer.agent.signer_options import ApprovalTrust
    from reviewer.audit.registry import AuditSource
    from reviewer.run.runner import RunSettings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `run --api URL [...] -- COMMAND ARGS...` to the `reviewer` command line."""
    parser = subparsers.add_parser(
        "run",
        help="gate an agent in any language: COMMAND's writes become a plan a reviewer approves",
        description=(
            "Run COMMAND once against a loopback gate (REVIEWER_API_URL) that holds the API's credential. "
            "Reads pass through; writes are recorded as a plan (only recorded, or answered by the API's "
            "own documented dry run), submitted to the queue when COMMAND exits 0, and run for real once a "
            "reviewer approves. COMMAND never gets the credential or REVIEWER_AGENT_TOKEN."
        ),
    )
    parser.add_argument(
        "--api", required=True, metavar="URL", help="the API's base URL (https, or http on loopback)"
    )
    parser.add_argument(
        "--via",
        choices=("server", "record"),
        default="record",
        help=(
            "record: writes are only recorded, nothing is sent (default); server: writes are sent with "
            "the API's own dry-run parameter, which the API must document (--dry-run-param or --openapi)"
        ),
    )
    parser.add_argument(
        "--dry-run-param",
        metavar="NAME=VALUE",
        help="the API's documented dry-run query parameter, e.g. dryRun=All for Kubernetes "
        "(default: the one the OpenAPI document declares; never guessed)",
    )
    parser.add_argument(
        "--openapi", metavar="FILE", help="the API's OpenAPI document (JSON): names calls, refuses others"
    )
    parser.add_argument(
        "--api-header",
        action="append",
        default=[],
        metavar="'NAME: [PREFIX ]env:VAR|file:PATH'",
        help="a header the gate adds to every request to the API, e.g. 'Authorization: Bearer env:API_TOKEN'",
    )
    parser.add_argument(
        "--api-auth",
        metavar="aws-sigv4:SERVICE:REGION|oauth2:TOKEN_URL",
        help="a credential the gate applies to each request as it leaves, for APIs a static header cannot "
        "open: AWS Signature Version 4 (credentials from the standard AWS sources, withheld from COMMAND) "
        "or OAuth 2.0 client credentials (a token fetched from TOKEN_URL, cached and renewed)",
    )
    parser.add_argument(
        "--api-auth-client-id", metavar="env:VAR|file:PATH", help="--api-auth oauth2:'s client id"
    )
    parser.add_argument(
        "--api-auth-client-secret", metavar="env:VAR|file:PATH", help="--api-auth oauth2:'s client secret"
    )
    parser.add_argument(
        "--api-auth-scope", metavar="SCOPE", help="--api-auth oauth2:'s scope, if it asks one"
    )
    parser.add_argument(
        "--sandbox-header",
        action="append",
        default=[],
        metavar="'NAME: [PREFIX ]env:VAR|file:PATH'",
        help="a header the sandbox check sends to --sandbox-api (the sandbox's own credential; the API's "
        "never goes there), withheld from COMMAND like --api-header",
    )
    add_source_options(
        parser,
        "What the API kept of the dry run and the writes during it that the gate did not make are on "
        "the plan; the real run is matched call by call",
    )
    parser.add_argument(
        "--sandbox-api",
        metavar="URL",
        help="a collection on a sandbox copy of the API (e.g. https://sandbox.api.example/v1/tickets): "
        "before the server dry run, it is listed, sent a create with the dry-run parameter and listed "
        "again; a kept create stops the run, an unchanged listing is recorded with the plan and makes "
        "its oks validated. Sent only --sandbox-header, never the API's credential",
    )
    parser.add_argument(
        "--sandbox-create",
        metavar="JSON",
        help='the body of the sandbox check\'s create (default {"title": "reviewer sandbox check"})',
    )
    parser.add_argument(
        "--sandbox-id-field",
        metavar="PATH",
        help="where the sandbox's answer to the create names the new item's id, a key or a dotted path "
        "(e.g. data.id; `id` is looked in too): the check reads it back and needs a 404 or 410",
    )
    parser.add_argument(
        "--request-id-header",
        metavar="NAME",
        help="the header each real write carries its request id in (default X-Request-Id; Audit-ID for "
        "Kubernetes, Idempotency-Key for Stripe)",
    )
    parser.add_argument("--title", help="the plan's title (default: the command line)")
    parser.add_argument("--environment", metavar="NAME", help="the target environment the plan names")
    parser.add_argument("--queue", metavar="URL", help="the queue's URL (default http://127.0.0.1:8470)")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--replay", action="store_true", help="run the approved calls themselves (default)")
    how.add_argument(
        "--rerun",
        action="store_true",
        help="run COMMAND again for real, each write held against the plan; stop at the first that differs",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="how long COMMAND may run (default 900)",
    )
    parser.add_argument(
        "--decision-timeout",
        type=float,
        default=15 * 60.0,
        metavar="SECONDS",
        help="how long to wait for a reviewer's decision (default 900)",
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how often to ask a queue that answers at once; a queue that holds the ask until the "
        "decision (a long poll) is asked again as soon as it answers (default 2)",
    )
    parser.add_argument(
        "--max-revisions",
        type=int,
        default=1,
        metavar="N",
        help="plans COMMAND may make: when a reviewer asks for changes, run it again (dry run) with "
        "REVIEWER_FEEDBACK holding their words and submit the next revision, up to N in all (default 1: "
        "a request for changes ends the run)",
    )
    add_signer_options(parser)
    add_sandbox_options(parser, role="agent")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS...")
    parser.set_defaults(func=_run)


def _run(options: argparse.Namespace) -> int:
    """Read the options (`settings_from`), seal this process, make the sandbox, then run."""
    from dataclasses import replace

    with collection_held():
        from reviewer.run.runner import run
        from reviewer.run.sealed import make_undumpable, scrub_initial_environment
        from reviewer.sandbox.environment import withheld_variables
        from reviewer.sandbox.errors import SandboxRefused
        from reviewer.sandbox.options import sandbox_from_options

        try:
            settings = settings_from(options, dict(os.environ))
            withheld = settings.withheld or settings.credentials
            # No secret stays in this process's initial environment, and no process of this user may
            # read it, before anything is started (the sandbox's probes are processes).
            make_undumpable()
            scrub_initial_environment(
                withheld_variables(settings.environ, withheld.from_env, withheld.secrets)
            )
            sandbox = sandbox_from_options(options, settings.environ, withheld.from_files, role="agent")
        except SandboxRefused as refused:
            print(f"reviewer run: {refused}", file=sys.stderr)
            return 2
    print(f"reviewer run: {sandbox.describe()}", file=sys.stderr, flush=True)
    if trusted := settings.trust.describe():
        print(f"reviewer run: {trusted}", file=sys.stderr, flush=True)
    return asyncio.run(run(replace(settings, sandbox=sandbox)))


def settings_from(options: argparse.Namespace, environ: dict[str, str]) -> RunSettings:
    """What `reviewer run` was told, read and checked (`RunRefused` naming the option): the secrets read
    from `environ` and files, nothing of this process changed. The sandbox is not in it: it is made
    once the process is sealed."""
    from reviewer.agent.execution import DEFAULT_REQUEST_ID_HEADER
    from reviewer.agent.gate import AGENT_TOKEN_ENV, DEFAULT_QUEUE_URL
    from reviewer.run.errors import RunRefused
    from reviewer.run.openapi import ApiDocument
    from reviewer.run.options import (
        check_api_url,
        every_secret,
        parse_dry_run_param,
        read_api_auth,
        read_credentials,
        with_api_auth,
    )
    from reviewer.run.runner import RunSettings

    command = list(options.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise RunRefused("name the agent's command after --, e.g. reviewer run --api URL -- node agent.mjs")
    token = environ.get(AGENT_TOKEN_ENV)
    if not token:
        raise RunRefused(
            f"no agent token: set {AGENT_TOKEN_ENV} (mint one on the queue's host with "
            "`reviewer token create --name NAME --role agent`); COMMAND never sees it"
        )
    for name, value in (("--timeout", options.timeout), ("--decision-timeout", options.decision_timeout)):
        if not value > 0:
            raise RunRefused(f"{name} must be a positive number of seconds")
    if options.max_revisions < 1:
        raise RunRefused(f"--max-revisions must be 1 or more, not {options.max_revisions}")
    api_auth = None
    if options.api_auth:
        api_auth = read_api_auth(
            options.api_auth,
            environ,
            client_id=options.api_auth_client_id,
            client_secret=options.api_auth_client_secret,
            scope=options.api_auth_scope,
        )
    elif options.api_auth_client_id or options.api_auth_client_secret or options.api_auth_scope:
        raise RunRefused("--api-auth-client-id, -secret and -scope go with --api-auth oauth2:TOKEN_URL")
    credentials = with_api_auth(read_credentials(options.api_header, environ), api_auth)
    sandbox_credentials = read_credentials(options.sandbox_header, environ, "--sandbox-header")
    audit_credentials = read_credentials(options.audit_header, environ, "--audit-header")
    return RunSettings(
        api=check_api_url(options.api),
        command=command,
        agent_token=token,
        queue=options.queue or DEFAULT_QUEUE_URL,
        credentials=credentials,
        # COMMAND gets none of the API's, the sandbox's or the audit log's credentials.
        withheld=every_secret(credentials, sandbox_credentials, audit_credentials),
        environ=environ,
        via=options.via,
        dry_run_query=parse_dry_run_param(options.dry_run_param) if options.dry_run_param else None,
        document=ApiDocument.load(options.openapi) if options.openapi else None,
        audit=_audit_option(options.audit, options.audit_field, audit_credentials.headers),
        sandbox_api=_sandbox_option(options, sandbox_credentials.headers),
        request_id_header=options.request_id_header or DEFAULT_REQUEST_ID_HEADER,
        title=options.title,
        environment=options.environment,
        rerun=options.rerun,
        timeout=options.timeout,
        decision_timeout=options.decision_timeout,
        poll_interval=max(options.poll_interval, 0.05),
        max_revisions=options.max_revisions,
        trust=_trust_option(options),
    )


def _trust_option(options: argparse.Namespace) -> ApprovalTrust:
    """`--allowed-signers`, `--signatures` and `--ledger` as what an approval must hold to run."""
    from reviewer.agent.signer_options import BadSignerOption, trust_from_options
    from reviewer.run.errors import RunRefused

    try:
        return trust_from_options(options)
    except BadSignerOption as error:
        raise RunRefused(str(error)) from None


def _sandbox_option(options: argparse.Namespace, headers: dict[str, str]) -> SandboxCheck | None:
    """`--sandbox-api URL [--sandbox-create JSON] [--sandbox-id-field PATH] [--sandbox-header ...]` as
    the check a server dry run is proven by, sending the sandbox's own `headers`."""
    import json

    from reviewer.agent.sandbox_check import DEFAULT_CREATE_BODY, SandboxCheck
    from reviewer.run.errors import RunRefused
    from reviewer.run.options import check_api_url

    if options.sandbox_api is None:
        if options.sandbox_create is not None or options.sandbox_id_field is not None or headers:
            raise RunRefused(
                "--sandbox-create, --sandbox-id-field and --sandbox-header go with --sandbox-api: "
                "name the sandbox too"
            )
        return None
    if options.via != "server":
        raise RunRefused(
            "--sandbox-api proves a server dry run's parameter; --via record sends none, so it has nothing "
            "to check: add --via server and --dry-run-param, or leave --sandbox-api out"
        )
    body = dict(DEFAULT_CREATE_BODY)
    if options.sandbox_create is not None:
        try:
            body = json.loads(options.sandbox_create)
        except ValueError as error:
            raise RunRefused(f"--sandbox-create is not JSON: {error}") from None
    return SandboxCheck(
        check_api_url(options.sandbox_api, "--sandbox-api"),
        body,
        headers,
        id_field=options.sandbox_id_field or "id",
    )


STDIN_OF_A_RUN = (
    "COMMAND's, and a run reads its log three times (before COMMAND starts, after the dry run, "
    "after the real run)"
)


def _audit_option(value: str | None, fields: list[str], headers: Mapping[str, str]) -> AuditSource | None:
    """`--audit KIND:LOCATION` as a source, read by `--audit-field` and `--audit-header`."""
    from reviewer.audit.options import BadAuditOption, audit_option
    from reviewer.run.errors import RunRefused

    try:
        return audit_option(value, fields, headers, stdin_is=STDIN_OF_A_RUN)
    except BadAuditOption as error:
        raise RunRefused(str(error)) from None
