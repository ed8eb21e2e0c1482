"""`reviewer login` on a queue whose reviewers sign in through the team's OpenID provider: ask the
queue how it signs reviewers in, run the device authorization grant, check the result with the
queue, and store the session where a minted token would go (0600, in a 0700 folder). The last step,
storing what the queue accepted and saying where, is also that of a login with a minted token."""

from __future__ import annotations

import asyncio
import sys

import httpx

from reviewer.queue.client import QueueClient
from reviewer.queue.config import Secret, config_file, store_sign_in, token_file
from reviewer.queue.messages import ProviderSignIn, SignInMethods
from reviewer.queue.refusals import Forbidden, QueueError, Unauthorized, unreachable
from reviewer.queue.sign_in import ProviderSession, SignInFailed, device_sign_in
from reviewer.queue.trust import trusted_certificates


def provider_of(queue_url: str) -> ProviderSignIn | None:
    """The provider the queue at `queue_url` signs reviewers in through (`GET /v1/auth`), or None
    when its reviewers paste minted tokens (or the queue predates sign-in through a provider)."""
    try:
        with httpx.Client(timeout=10, follow_redirects=False, verify=trusted_certificates()) as http:
            answer = http.get(f"{queue_url}/v1/auth")
    except httpx.TransportError as error:
        raise unreachable(queue_url, error) from None
    if answer.status_code == 404:
        return None
    try:
        answer.raise_for_status()
        methods = SignInMethods.model_validate_json(answer.content)
    except (httpx.HTTPError, ValueError):
        raise QueueError(f"{queue_url}/v1/auth did not say how reviewers sign in; check the URL") from None
    return methods.oidc


def run_provider_login(queue_url: str, provider: ProviderSignIn) -> int:
    def say(line: str) -> None:
        print(line, flush=True)

    try:
        with httpx.Client(timeout=10, follow_redirects=False, verify=trusted_certificates()) as http:
            session = device_sign_in(http, provider, say)
        name = asyncio.run(_whoami(queue_url, session))
    except Forbidden as refused:
        print(
            f"reviewer login: signed in at the provider, and the queue refuses: {refused.body.message}",
            file=sys.stderr,
        )
        return 1
    except Unauthorized as refused:
        print(
            f"reviewer login: the queue refused the provider's sign-in: {refused.body.message}",
            file=sys.stderr,
        )
        return 1
    except (SignInFailed, QueueError) as error:
        print(f"reviewer login: {error}", file=sys.stderr)
        return 1
    from reviewer.plan.sanitize import safe_text

    who = f"{safe_text(name)} (reviewer) through {safe_text(provider.issuer)}"
    return finish_login(session, queue_url, who)


def finish_login(credential: Secret | ProviderSession, queue_url: str, who: str) -> int:
    """The last step of `reviewer login`, with a token or a provider's session the queue accepted
    for `who`: store it and the queue's URL and say where (0), or say why they could not be (1)."""
    unstored = store_sign_in(credential, queue_url)
    if unstored:
        print(f"reviewer login: {unstored}", file=sys.stderr)
        return 1
    if isinstance(credential, Secret):
        stored = f"token stored in {token_file()} (mode 0600), queue"
    else:
        stored = f"session stored in {token_file()} (mode 0600), renewed as it ends; queue"
    print(f"signed in to {queue_url} as {who}; {stored} in {config_file()}")
    return 0


async def _whoami(queue_url: str, session: ProviderSession) -> str:
    async with QueueClient(queue_url, session.id_token, retries=1) as client:
        identity = await client.whoami()
    return identity.name
