"""`reviewer serve`: the queue service on its listener, with its policy, notifications and store."""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from reviewer import DISTRIBUTION, collection_held, release
from reviewer.policy.expressions import DEFAULT_DEADLINE
from reviewer.service.commands.support import db_option, duration, refusal, store_of
from reviewer.service.timeouts import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from reviewer.policy.file import Policy
    from reviewer.service.notifications.sender import Sender
    from reviewer.service.oidc import IdentityTokens
    from reviewer.service.server import Listening
    from reviewer.service.signed_decisions import PolicySigning
    from reviewer.service.store import QueueStore
    from reviewer.service.web.relying_party import RelyingParty


def run_serve(args: argparse.Namespace) -> int:
    with collection_held() as serving:
        return _run_serve(args, serving)


def _run_serve(args: argparse.Namespace, serving: Callable[[], None]) -> int:
    """`run_serve` with collection held until `serving()`, which `_serve` calls as it starts serving."""
    from reviewer.policy.file import PolicyError, read_policy
    from reviewer.service.errors import DatabaseUnusable
    from reviewer.service.server import Listening, ListenRefused

    try:
        policy = read_policy(args.policy) if args.policy is not None else None
    except PolicyError as error:
        *earlier, last = error.mistakes
        for mistake in earlier:
            print(f"reviewer serve: {mistake}", file=sys.stderr)
        print(f"reviewer serve: {last}; not started", file=sys.stderr)
        return 2
    trail_key = None
    if args.trail_key is not None:
        from reviewer.trail.checkpoint import CheckpointError, load_private_key

        try:
            trail_key = load_private_key(args.trail_key)
        except CheckpointError as error:
            return refusal("serve", f"--trail-key: {error}")
    web_origin = None
    if args.web_origin is not None:
        from reviewer.service.web.relying_party import BadOrigin, RelyingParty

        try:
            web_origin = RelyingParty.parse(args.web_origin)
        except BadOrigin as error:
            return refusal("serve", str(error))
    signing = None
    if args.policy_key is not None:
        from reviewer.service.signed_decisions import PolicySigning
        from reviewer.signing.sshsig import KeyFileSigner, SigningError

        try:
            signing = PolicySigning(KeyFileSigner(args.policy_key), args.policy_principal)
        except SigningError as error:
            return refusal("serve", f"--policy-key: {error}")

    from reviewer.service.notifications.logs import hide_urls_in_logs
    from reviewer.service.notifications.sender import NotifyRefused
    from reviewer.service.notifications.targets import senders, split_events
    from reviewer.service.notifications.webhook import DEFAULT_ATTEMPT_TIMEOUT

    if args.remind_after is not None and not args.remind_after > 0:
        return refusal("serve", f"--remind-after must be more than 0 seconds, not {args.remind_after}")
    if args.notify_keep is not None and not args.notify_keep > 0:
        return refusal("serve", f"--notify-keep must be more than 0 seconds, not {args.notify_keep}")
    try:
        hide_urls_in_logs(split_events(value)[1] for value in args.notify)
        notify_senders = senders(
            args.notify, args.notify_secret_file, attempt_timeout=DEFAULT_ATTEMPT_TIMEOUT
        )
    except NotifyRefused as error:
        return refusal("serve", error.message)
    never_sent = _escalation_never_sent(args, policy, notify_senders)
    if never_sent is not None:
        return refusal("serve", never_sent)
    try:
        identity_tokens = _identity_tokens(args)
    except ValueError as error:
        return refusal("serve", str(error))
    listening = Listening(
        host=args.host,
        port=args.port,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        behind_tls_proxy=args.behind_tls_proxy,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
    )
    try:
        listening.check()
        listener = listening.bind()
    except ListenRefused as error:
        return refusal("serve", error.message)
    try:
        return _serve(
            args,
            listening,
            listener,
            policy,
            notify_senders,
            serving,
            signing,
            identity_tokens,
            trail_key,
            web_origin,
        )
    except (ListenRefused, DatabaseUnusable) as error:
        return refusal("serve", error.message)
    finally:
        listener.close()


def _serve(
    args: argparse.Namespace,
    listening: Listening,
    listener: socket.socket,
    policy: Policy | None,
    notify_senders: list[Sender],
    serving: Callable[[], None],
    signing: PolicySigning | None = None,
    identity_tokens: IdentityTokens | None = None,
    trail_key: Ed25519PrivateKey | None = None,
    web_origin: RelyingParty | None = None,
) -> int:
    import asyncio
    import ssl

    from reviewer.policy.bounded import PolicyEvaluator
    from reviewer.service.app import create_app
    from reviewer.service.deadlines import DescriptorExhaustionLog
    from reviewer.service.log_format import configure_logging
    from reviewer.service.notifications.targets import describe, notifying
    from reviewer.service.server import ListenRefused
    from reviewer.service.signed_memory import SignedMemory, check_extends, default_memory
    from reviewer.service.store.base import SCHEMA_VERSION
    from reviewer.trail import checkpoint as checkpoints

    configure_logging(args.log_format)
    log = logging.getLogger("reviewer.service")
    evaluator = None
    if policy is not None and not policy.trivial:
        evaluator = PolicyEvaluator(policy, args.policy_deadline, signing=signing is not None)
    store = store_of(
        args,
        create=True,
        policy=policy,
        policy_signing=signing,
        policy_evaluator=evaluator,
        notifying=notifying(notify_senders, remind_after=args.remind_after, keep_deliveries=args.notify_keep)
        if notify_senders
        else None,
        migrate=not args.no_migrate,
    )
    store.check_before_serving()
    signed_memory = None
    if trail_key is not None:
        public_key = checkpoints.openssh_public(trail_key.public_key())
        signed_memory = SignedMemory(args.signed_memory or default_memory(public_key))
        check_extends(signed_memory, store)
    # Once the database is accepted: a refusal before it stays the one line it is.
    log.info("%s %s, writing queue schema %d", DISTRIBUTION, release(), SCHEMA_VERSION)
    if store.created:
        log.info("created a new, empty queue in %s", store.location)
    logged = store.log_earlier_events()
    if logged:
        log.info("trail: %d events written before this release now lead the trail's log", logged)
    app = create_app(
        None,
        store=store,
        senders=notify_senders,
        api_docs=args.api_docs,
        identity_tokens=identity_tokens,
        trail_key=trail_key,
        signed_memory=signed_memory,
        web_origin=web_origin,
        every_access_line=args.access_log == "all",
    )
    log.info("queue database: %s", store.location)
    if web_origin is not None:
        log.info(
            "review pages and passkey enrolment at %s (relying party %s)", web_origin.origin, web_origin.rp_id
        )
    if identity_tokens is not None:
        settings = identity_tokens.settings
        log.info(
            "reviewers sign in through %s as client %s; members of %r in the %r claim decide, named "
            "by their %r claim, for sessions of %g s at most",
            settings.issuer,
            settings.client_id,
            settings.reviewers_group,
            settings.groups_claim,
            settings.name_claim,
            settings.session,
        )
    for sender in notify_senders:
        log.info("notifying %s", describe(sender))
    if policy is not None:
        _report_policy(log, args.policy, policy, store, signing, identity_tokens is not None)
    if listening.behind_tls_proxy and not listening.tls_cert:
        log.warning(
            "serving plain HTTP on %s because --behind-tls-proxy says a TLS-terminating proxy is in front; "
            "anyone who reaches this port directly sees tokens in clear text",
            listening.host,
        )
    config = listening.uvicorn_config(app)
    try:
        config.load()
    except (OSError, ssl.SSLError) as error:
        store.close()
        raise ListenRefused(f"cannot use the TLS certificate or key: {error}") from None
    listener.listen(config.backlog)  # from here a connection waits in the backlog rather than being refused
    log.info("listening on %s://%s:%d", listening.scheme, listening.host, listening.port)
    server = listening.server(config, app.state.waits.release)

    async def serve() -> None:
        asyncio.get_running_loop().set_exception_handler(DescriptorExhaustionLog())
        await server.serve(sockets=[listener])

    serving()
    asyncio.run(serve())
    return 0 if server.started else 1


def _escalation_never_sent(
    args: argparse.Namespace, policy: Policy | None, chosen: list[Sender]
) -> str | None:
    """What escalation could never send, in one line: a step no sooner than plans expire (the
    expiry ends the ladder first), or a `--notify` filter naming a step no environment's ladder has."""
    from reviewer.service.store.base import DEFAULT_PENDING_TTL

    pending_ttl = DEFAULT_PENDING_TTL if args.pending_ttl is None else args.pending_ttl
    environments = () if policy is None else (policy.default, *policy.environments.values())
    for environment in environments:
        for number, step in enumerate(environment.escalation, start=1):
            if step.after >= pending_ttl:
                return (
                    f"{args.policy} line {step.line}: escalation step {number} of {environment.name} (after "
                    f"{step.words}) comes once its plans expired (--pending-ttl {pending_ttl:g}): it is "
                    "never sent; not started"
                )
    longest = max((len(environment.escalation) for environment in environments), default=0)
    for sender in chosen:
        for name in sorted(sender.events or ()):
            event, _, step_number = name.partition(":")
            if event == "proposal.escalated" and int(step_number or 1) > longest:
                has = (
                    f"the longest ladder in --policy has {longest} steps"
                    if longest
                    else "no --policy escalates"
                )
                return f"--notify {sender.name}: {name} is never sent: {has}"
    return None


def _identity_tokens(args: argparse.Namespace) -> IdentityTokens | None:
    """The provider's identity-token check `--oidc-*` configures, its discovery document and keys
    read now, so a wrong issuer stops `serve` rather than every reviewer's sign-in; ValueError
    saying what is wrong."""
    given = {
        "--oidc-issuer": args.oidc_issuer,
        "--oidc-client-id": args.oidc_client_id,
        "--oidc-reviewers": args.oidc_reviewers,
    }
    if not any(given.values()):
        return None
    missing = [option for option, value in given.items() if not value]
    if missing:
        raise ValueError(f"signing reviewers in through a provider also needs {', '.join(missing)}")
    import time

    import httpx
    import jwt

    from reviewer.service.oidc import (
        DEFAULT_SCOPES,
        DEFAULT_SESSION,
        IdentityTokens,
        ProviderSettings,
        ProviderUnusable,
        discover,
    )

    settings = ProviderSettings(
        issuer=args.oidc_issuer,
        client_id=args.oidc_client_id,
        reviewers_group=args.oidc_reviewers,
        groups_claim=args.oidc_groups_claim,
        name_claim=args.oidc_name_claim,
        scopes=args.oidc_scopes or DEFAULT_SCOPES,
        session=args.oidc_session or DEFAULT_SESSION,
    )
    try:
        with httpx.Client(timeout=10, follow_redirects=False) as client:
            endpoints = discover(settings.issuer, client)
        tokens = IdentityTokens(settings, endpoints, time.time)
        tokens.keys.get_signing_keys()
    except ProviderUnusable as error:
        raise ValueError(str(error)) from None
    except jwt.PyJWKClientError as error:
        raise ValueError(f"cannot read the provider's keys at {endpoints.jwks_uri}: {error}") from None
    return tokens


def _report_policy(
    log: logging.Logger,
    path: Path,
    policy: Policy,
    store: QueueStore,
    signing: PolicySigning | None,
    provider_signs_in: bool = False,
) -> None:
    """What `serve` loaded, one line each, and what would make it wrong silently: no `[default]`,
    a listed reviewer no token is named for (unless reviewers sign in through a provider, whose
    people the queue knows only once they signed in), approval by policy where it cannot sign."""
    from fnmatch import fnmatchcase

    log.info("decision policy: %s (sha256 %s)", path, policy.sha256[:12])
    for line in policy.describe():
        log.info("policy: %s", line)
    if not policy.has_default:
        log.warning(
            "policy: %s has no [default]: a plan of no listed environment needs 1 approval from "
            "any reviewer, "
            "unsigned; write [default] to say so",
            path,
        )
    reviewers = [
        token.name.casefold()
        for token in store.list_tokens()
        if token.role == "reviewer" and token.revoked_at is None
    ]
    for pattern, where in [] if provider_signs_in else policy.listed_reviewers():
        if not any(fnmatchcase(name, pattern.casefold()) for name in reviewers):
            log.warning("policy: %s lists reviewer %r, but no reviewer token has that name", where, pattern)
    if signing is None and any(rule.approve for rule in policy.rules):
        signed = [
            e.name
            for e in (policy.default, *policy.environments.values())
            if e.allow_policy_approval and e.requirement.signatures
        ]
        if signed:
            log.warning(
                "policy: approvals by policy in %s need signatures, and no --policy-key was given: "
                "a human decides there",
                ", ".join(signed),
            )
    changed = store.reevaluate_pending()
    if changed:
        log.info("policy: %d pending proposals evaluated again under this policy", changed)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `serve` to the `reviewer` command line."""
    serve = subparsers.add_parser(
        "serve",
        help="run the queue service",
        description="Run the queue service (HTTP or HTTPS, on SQLite or PostgreSQL).",
    )
    db_option(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=8470, help="port to listen on (default: 8470)")
    serve.add_argument(
        "--pending-ttl",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long an undecided proposal stays pending (default: one day)",
    )
    serve.add_argument(
        "--approval-ttl",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long an approval may wait for a run to claim it (default: one hour)",
    )
    serve.add_argument(
        "--claim-lease",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a claimed run may take before its outcome shows as unknown (default: one hour)",
    )
    serve.add_argument(
        "--header-timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT,
        metavar="SECONDS",
        help="close a connection whose request headers are not complete by then "
        f"(default: {DEFAULT_HEADER_TIMEOUT:g})",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        default=DEFAULT_BODY_TIMEOUT,
        metavar="SECONDS",
        help="close a connection whose request body is not complete by then "
        f"(default: {DEFAULT_BODY_TIMEOUT:g})",
    )
    serve.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (PEM)")
    serve.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    serve.add_argument(
        "--behind-tls-proxy",
        action="store_true",
        help="allow plain HTTP on a non-loopback address because a TLS-terminating proxy is the only way in",
    )
    serve.add_argument(
        "--policy",
        type=Path,
        default=None,
        metavar="FILE",
        help="a TOML policy: environments (by base URL or name) and rules on the plan in CEL "
        "(default: one approval by any reviewer, unsigned); `reviewer policy check FILE` tests one",
    )
    serve.add_argument(
        "--policy-key",
        type=Path,
        default=None,
        metavar="FILE",
        help="the queue's own SSH private key, to sign what the policy approves where signatures "
        "are required",
    )
    serve.add_argument(
        "--trail-key",
        type=Path,
        default=None,
        metavar="FILE",
        help="an OpenSSH Ed25519 private key (ssh-keygen -t ed25519 -N '') that signs the trail's "
        "checkpoints; auditors verify exports with its .pub (`reviewer trail verify`)",
    )
    serve.add_argument(
        "--web-origin",
        default=None,
        metavar="ORIGIN",
        help="serve the review pages and passkey enrolment at this origin, as browsers reach it "
        "(https://queue.example, or http://localhost:PORT on one machine); the passkeys' relying "
        "party is its host. Without it, no page is served",
    )
    serve.add_argument(
        "--signed-memory",
        type=Path,
        default=None,
        metavar="FILE",
        help="where the queue remembers the largest trail it signed, to refuse a database restored "
        "from an older copy (default: one file per database in the user's state folder; replicas may "
        "share one on a volume)",
    )
    serve.add_argument(
        "--policy-principal",
        default="queue-policy",
        metavar="NAME",
        help="the name the queue signs its approvals as, for the executors' allowed-signers files "
        "(default: queue-policy)",
    )
    serve.add_argument(
        "--policy-deadline",
        type=float,
        default=DEFAULT_DEADLINE,
        metavar="SECONDS",
        help="how long evaluating the policy on one plan may take; past it the plan needs at least "
        "what every rule not yet decided asks (default: %(default)g)",
    )
    serve.add_argument(
        "--notify",
        action="append",
        default=[],
        metavar="[EVENTS=]URL",
        help="post each event (proposal.waiting, proposal.reminder, proposal.escalated, proposal.decided, "
        "run.ended, run.unknown, ...) to URL: a signed webhook (https://, or http:// to loopback) or an "
        "Apprise URL (slack://, pagerduty://, ...); EVENTS=URL (comma-separated) sends only those, "
        "proposal.escalated:2=URL only that step; repeatable",
    )
    serve.add_argument(
        "--notify-secret-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="the secret that signs each webhook (Reviewer-Signature); needed with --notify",
    )
    serve.add_argument(
        "--remind-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help="notify again, every SECONDS, while a proposal is still pending (default: never)",
    )
    serve.add_argument(
        "--notify-keep",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a delivered or failed notification stays listed by `notify list`, then is "
        "deleted (default: 604800, a week)",
    )
    _operating_options(serve)
    _sign_in_options(serve)
    serve.set_defaults(func=run_serve)


def _sign_in_options(serve: argparse.ArgumentParser) -> None:
    """`serve`'s options for reviewers signing in through the team's OpenID provider."""
    group = serve.add_argument_group(
        "signing reviewers in through an OpenID provider",
        "Reviewers run `reviewer login --queue URL` (the device authorization grant) instead of "
        "pasting a minted token; agents keep minted tokens. See docs/operating.md.",
    )
    group.add_argument(
        "--oidc-issuer", metavar="URL", help="the provider's issuer URL, exactly as it writes it"
    )
    group.add_argument("--oidc-client-id", metavar="ID", help="the public client registered for reviewer")
    group.add_argument(
        "--oidc-reviewers", metavar="GROUP", help="the group whose members may decide (in the groups claim)"
    )
    group.add_argument(
        "--oidc-groups-claim",
        default="groups",
        metavar="CLAIM",
        help="the identity token's claim that lists the person's groups (default: groups)",
    )
    group.add_argument(
        "--oidc-name-claim",
        default="email",
        metavar="CLAIM",
        help="the claim decisions name the person by, and policies' reviewers lists match (default: email)",
    )
    group.add_argument(
        "--oidc-scopes",
        default=None,
        metavar="SCOPES",
        help="the scopes `reviewer login` asks for (default: openid email groups offline_access)",
    )
    group.add_argument(
        "--oidc-session",
        type=duration,
        default=None,
        metavar="DURATION",
        help="how long a sign-in decides before the client renews it with its refresh token, at most "
        "(default: 10m; a shorter identity token lifetime wins)",
    )


def _operating_options(serve: argparse.ArgumentParser) -> None:
    """`serve`'s options for operators: migrations, the log's format, the API's documentation pages."""
    serve.add_argument(
        "--no-migrate",
        action="store_true",
        help="refuse to start on a database of an older schema instead of migrating it "
        "(then `reviewer db upgrade` migrates it, after a backup)",
    )
    serve.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text lines, or one JSON object a line with the request's id (default: text)",
    )
    serve.add_argument(
        "--access-log",
        choices=("skip-304", "all"),
        default="skip-304",
        help="a line for every request but the polls answered 304 (counted in /metrics), or for "
        "every request (default: skip-304)",
    )
    serve.add_argument(
        "--api-docs",
        action="store_true",
        help="serve the API's documentation pages at /docs and /redoc (off: both load scripts from a CDN)",
    )
