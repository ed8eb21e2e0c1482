"""`reviewer serve`: the queue service on its listener, with its policy, notifications and store."""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from reviewer import DISTRIBUTION, release
from reviewer.service.commands.support import refusal, store_of

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
            args, listening, listener, policy, notify_senders, signing, identity_tokens, trail_key, web_origin
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
    log.info("listening on %s://%s:%d", listening.scheme, listening.host, listening.port)
    server = listening.server(config, app.state.waits.release)

    async def serve() -> None:
        asyncio.get_running_loop().set_exception_handler(DescriptorExhaustionLog())
        await server.serve(sockets=[listener])

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
