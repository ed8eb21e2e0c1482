"""The `reviewer demo`, `reviewer review` and `reviewer login` commands."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reviewer.queue.trust import add_queue_options
from reviewer.tui.model.sources import BUNDLED_SAMPLES

if TYPE_CHECKING:  # the queue's settings load only for the commands that use them, not the demo
    import httpx

    from reviewer.queue.config import Secret, Settings


def register(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo",
        help="review sample proposals offline; decisions are not sent",
        description="Open the review screens on a folder of proposal files. No server, no credential: "
        "approvals and rejections are shown as 'not sent (demo)'.",
    )
    demo.add_argument(
        "folder",
        nargs="?",
        type=Path,
        default=BUNDLED_SAMPLES,
        help="a folder of proposal .json files (default: the bundled samples)",
    )
    demo.set_defaults(func=run_demo)

    review = subparsers.add_parser(
        "review",
        help="review the queue's proposals live (the default command)",
        description="Poll the queue, review its proposals and approve or reject them under your own "
        "token. The queue comes from --queue, REVIEWER_QUEUE or the config file `reviewer login` "
        "writes; the token from REVIEWER_TOKEN or the token file.",
    )
    review.add_argument(
        "proposal_id",
        nargs="?",
        metavar="PROPOSAL_ID",
        help="open this proposal's review screen at once (the line a notification gives); the start "
        "of an id that no other id shares is enough",
    )
    add_queue_options(review)
    review.add_argument(
        "--poll",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="the least seconds between two polls the queue answered at once; an idle poll is held by "
        "the queue until something changes (default: 2)",
    )
    review.set_defaults(func=run_review)

    login = subparsers.add_parser(
        "login",
        help="sign in to the queue: your token (asked without echo), or through the team's identity provider",
        description="Ask for your token without echo, check it with the queue, and store the URL in "
        "config.toml and the token in a file only you can read (0600, in a 0700 folder). On a queue "
        "whose reviewers sign in through the team's OpenID provider, run the device sign-in instead: "
        "open the URL it prints, enter the code, and the session (renewed as it ends) is stored there.",
    )
    add_queue_options(login, default="REVIEWER_QUEUE")
    login.set_defaults(func=run_login)


def run_demo(options: argparse.Namespace) -> int:
    folder: Path = options.folder
    if not folder.exists():
        print(
            f"reviewer demo: {folder} does not exist; give a folder of proposal files, or one file",
            file=sys.stderr,
        )
        return 2
    from reviewer.tui.app import ReviewerApp

    ReviewerApp(folder).run()
    return 0


def run_review(options: argparse.Namespace) -> int:
    from reviewer.queue.config import ConfigError, configured_alerts, configured_signer, reviewer_settings
    from reviewer.signing.sshsig import SigningError

    try:
        settings = reviewer_settings(options.queue, options.ca_file)
        alerts = configured_alerts()
        signer = configured_signer()
    except (ConfigError, SigningError) as error:
        print(f"reviewer review: {error}", file=sys.stderr)
        return 2
    if options.poll <= 0:
        print("reviewer review: --poll must be a positive number of seconds", file=sys.stderr)
        return 2
    open_first = options.proposal_id
    if open_first is not None:
        try:
            open_first = _whole_id(settings, open_first)
        except (LookupError, ValueError) as error:
            print(f"reviewer review: {error}", file=sys.stderr)
            return 1
    from reviewer.tui.app import ReviewerApp
    from reviewer.tui.model.queue_source import QueueSource

    ReviewerApp(
        QueueSource(settings.queue_url, _credential(settings), poll_interval=options.poll, signer=signer),
        open_first=open_first,
        alerts=alerts,
    ).run()
    return 0


def _credential(settings: Settings) -> Secret | httpx.Auth:
    """The token, or the provider's session that renews itself."""
    credential = settings.credential()
    return settings.token if isinstance(credential, str) else credential


def run_login(options: argparse.Namespace) -> int:
    """Check the token before storing it: a typo found now is not a 401 found mid-incident."""
    from reviewer.queue.config import QUEUE_ENV, TOKEN_ENV, ConfigError, normalize_queue_url
    from reviewer.queue.refusals import QueueError, QueueUnreachable, Unauthorized
    from reviewer.queue.trust import use_ca_file

    named = options.queue or os.environ.get(QUEUE_ENV)  # as every other command reads it
    if not named:
        print(f"reviewer login: name the queue: --queue URL, or {QUEUE_ENV}", file=sys.stderr)
        return 2
    try:
        use_ca_file(options.ca_file)
        queue_url = normalize_queue_url(named)
    except ConfigError as error:
        print(f"reviewer login: {error}", file=sys.stderr)
        return 2
    unanswered = asyncio.run(_queue_answers(queue_url))
    if unanswered:
        print(f"reviewer login: {unanswered}", file=sys.stderr)
        return 1
    from reviewer.queue.provider_login import finish_login, provider_of, run_provider_login

    try:
        provider = provider_of(queue_url)
    except QueueError as error:
        print(f"reviewer login: {error}", file=sys.stderr)
        return 1
    if provider is not None:
        return run_provider_login(queue_url, provider)
    try:
        token = _token_to_check(queue_url)
    except ConfigError as error:
        print(f"reviewer login: {error}", file=sys.stderr)
        return 2
    except EOFError:
        print(
            "reviewer login: no token was given (the input ended before a line was read); run it in a "
            f"terminal and paste the token, or set {TOKEN_ENV}",
            file=sys.stderr,
        )
        return 2
    try:
        identity = asyncio.run(_whoami(queue_url, token))
    except Unauthorized:
        print(
            f"reviewer login: {queue_url} refused this token; check it, or ask the queue's operator "
            "for a new one (`reviewer token create --role reviewer`)",
            file=sys.stderr,
        )
        return 1
    except QueueUnreachable as error:
        print(f"reviewer login: {error}", file=sys.stderr)
        return 1
    except QueueError as error:
        print(f"reviewer login: the queue refused: {error}", file=sys.stderr)
        return 1
    if identity.role != "reviewer":
        print(
            f"reviewer login: this is an {identity.role} token; the app needs a reviewer's own token",
            file=sys.stderr,
        )
        return 1
    return finish_login(token, queue_url, f"{identity.name} ({identity.role})")


def _token_to_check(queue_url: str) -> Secret:
    """`REVIEWER_TOKEN` when it is set (a script, or a token already in the environment), else the
    token pasted without echo."""
    import getpass
    import os

    from reviewer.queue.config import TOKEN_ENV, Secret

    given = os.environ.get(TOKEN_ENV)
    if given:
        print(f"using the token in {TOKEN_ENV}", file=sys.stderr)
        return Secret(given)
    return Secret(getpass.getpass(f"reviewer token for {queue_url} (not shown): "))


async def _queue_answers(queue_url: str) -> str | None:
    """None when a queue answers at `queue_url` (a request without a token gets its 401), else why
    not: said before the token is asked for, so a mistyped URL costs no paste."""
    import httpx

    from reviewer.queue.refusals import unreachable
    from reviewer.queue.trust import trusted_certificates

    try:
        async with httpx.AsyncClient(
            timeout=10, follow_redirects=False, verify=trusted_certificates()
        ) as client:
            answer = await client.get(f"{queue_url}/v1/whoami")
    except httpx.TransportError as error:
        return str(unreachable(queue_url, error))
    except httpx.HTTPError:
        return f"{queue_url} did not answer; check the URL and that the queue runs"
    if answer.status_code != 401:
        return f"{queue_url} answered {answer.status_code}, not as a queue does: check the URL"
    return None


def _whole_id(settings: Settings, typed: str) -> str:
    """The proposal `typed` names, a whole id or the unique start of one (`reviewer.queue.ids`). A
    queue that cannot answer now leaves it as typed: the app opens it once the queue lists it."""
    from reviewer.queue.ids import resolve_proposal_id
    from reviewer.queue.refusals import QueueError
    from reviewer.queue.shell_client import ShellQueue

    try:
        with ShellQueue(settings.queue_url, settings.credential(), retries=1) as client:
            return resolve_proposal_id(client, typed)
    except QueueError:
        return typed


async def _whoami(queue_url: str, token: Secret):  # type: ignore[no-untyped-def]
    from reviewer.queue.client import QueueClient

    async with QueueClient(queue_url, token.reveal(), retries=1) as client:
        return await client.whoami()
