"""What `reviewer run` is told, checked before COMMAND starts: the API's URL, the credential the gate
adds, and the dry-run parameter.

A credential is never a value on the command line (every user of the machine can read it with `ps`):
`--api-header "Authorization: Bearer env:API_TOKEN"` takes it from the environment variable, which the
child then does not get, or `file:PATH` from a file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import httpx

from reviewer import credential_specs
from reviewer.credential_specs import CredentialSpecError, read_header
from reviewer.plan.hosts import is_loopback
from reviewer.run.errors import RunRefused


def check_api_url(url: str, option: str = "--api") -> str:
    """The API's base URL (or the sandbox's collection, `option` naming which) without a trailing
    slash; refused unless https, or plain http on loopback."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as error:
        raise RunRefused(f"{option} {url!r} is not a URL: {error}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise RunRefused(f"{option} {url!r}: give an http(s) URL with a host, e.g. https://api.example/v1")
    if parsed.userinfo:
        raise RunRefused(
            f"{option}: a URL holding a user or password puts the credential on the command line"
        )
    if parsed.query or parsed.fragment:
        raise RunRefused(f"{option} {url!r}: the URL has no query or fragment")
    if parsed.scheme != "https" and not is_loopback(parsed.host):
        raise RunRefused(
            f"{option} {url!r} is plain http off loopback: the credential would cross the network in clear; "
            "use https"
        )
    return str(parsed).rstrip("/")


@dataclass(frozen=True)
class Credentials:
    """The headers the gate adds to every request to the API, and where their secrets came from."""

    headers: dict[str, str] = field(default_factory=dict, repr=False)
    from_env: frozenset[str] = frozenset()
    """Environment variables the secrets were read from: the child's environment never holds them."""
    from_files: frozenset[str] = frozenset()
    """Files the secrets were read from: the sandbox hides them from the child."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """The secrets themselves, without a prefix: a variable holding one is withheld whatever its name."""
    auth: httpx.Auth | None = field(default=None, repr=False)
    """`--api-auth`: a credential applied to each request as it is sent (a signature, a fetched token)."""


def every_secret(*credentials: Credentials) -> Credentials:
    """The secrets of several credentials (the API's, the sandbox check's, the audit log's) as one,
    without their headers: what the child must never hold, and nothing a request could be sent with."""
    return Credentials(
        {},
        frozenset().union(*(each.from_env for each in credentials)),
        frozenset().union(*(each.from_files for each in credentials)),
        tuple(secret for each in credentials for secret in each.secrets),
    )


def read_secret(source: str, environ: Mapping[str, str], what: str) -> tuple[str, str | None, str | None]:
    """`env:VAR` or `file:PATH` (`what` naming the option, in what is refused) as the secret it holds,
    and the variable or the file it came from."""
    try:
        secret = credential_specs.read_secret(source, environ, what)
    except CredentialSpecError as error:
        raise RunRefused(str(error)) from None
    return secret.value, secret.variable, secret.path


def read_credentials(
    specs: list[str], environ: Mapping[str, str], option: str = "--api-header"
) -> Credentials:
    """Each `NAME: [PREFIX ]env:VAR` or `NAME: [PREFIX ]file:PATH` as a header and its secret (`option`
    names the flag they came from, in what is refused: `--sandbox-header` and `--audit-header` are read
    the same way)."""
    try:
        headers = [read_header(spec, environ, option) for spec in specs]
    except CredentialSpecError as error:
        raise RunRefused(str(error)) from None
    return Credentials(
        {header.name: header.value for header in headers},
        frozenset(header.secret.variable for header in headers if header.secret.variable),
        frozenset(header.secret.path for header in headers if header.secret.path),
        tuple(header.secret.value for header in headers),
    )


AWS_VARIABLES: Final = frozenset(
    {
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    }
)
"""Where botocore looks for credentials: with `--api-auth aws-sigv4`, COMMAND gets none of them."""
AWS_TOKEN_FILES: Final = ("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
API_AUTH_USAGE: Final = "write aws-sigv4:SERVICE:REGION or oauth2:TOKEN_URL"


def read_api_auth(
    spec: str,
    environ: Mapping[str, str],
    *,
    client_id: str | None = None,
    client_secret: str | None = None,
    scope: str | None = None,
) -> Credentials:
    """`--api-auth SPEC` as a per-request credential and the secrets COMMAND must not hold:
    `aws-sigv4:SERVICE:REGION` (the standard AWS sources, read here, withheld from COMMAND) or
    `oauth2:TOKEN_URL` with `--api-auth-client-id` and `--api-auth-client-secret` (`env:`/`file:`)."""
    from reviewer.agent.request_auth import AwsSigV4Auth, OAuth2ClientCredentials, RequestAuthError

    scheme, _, rest = spec.partition(":")
    if scheme == "aws-sigv4":
        service, _, region = rest.partition(":")
        if not re.fullmatch(r"[a-z0-9-]{1,64}", service) or not re.fullmatch(r"[a-z0-9-]{1,64}", region):
            raise RunRefused(f"--api-auth {spec[:80]!r}: {API_AUTH_USAGE}, e.g. aws-sigv4:s3:eu-west-1")
        if client_id or client_secret or scope:
            raise RunRefused("--api-auth-client-id, -secret and -scope go with --api-auth oauth2:")
        try:
            signer = AwsSigV4Auth(service, region)
        except RequestAuthError as error:
            raise RunRefused(f"--api-auth {scheme}: {error}") from None
        files = [
            environ.get("AWS_SHARED_CREDENTIALS_FILE") or str(Path.home() / ".aws" / "credentials"),
            environ.get("AWS_CONFIG_FILE") or str(Path.home() / ".aws" / "config"),
            # Files whose contents are credentials too: a web identity and a container's token.
            *(environ[name] for name in AWS_TOKEN_FILES if environ.get(name)),
        ]
        return Credentials(
            from_env=AWS_VARIABLES & environ.keys(),
            from_files=frozenset(path for path in files if Path(path).is_file()),
            secrets=signer.secrets(),
            auth=signer,
        )
    if scheme == "oauth2":
        token_url = check_api_url(rest, "--api-auth oauth2:")
        if not client_id or not client_secret:
            raise RunRefused(
                "--api-auth oauth2: name the client with --api-auth-client-id and --api-auth-client-secret "
                "(each env:VAR or file:PATH)"
            )
        sources = [
            read_secret(source, environ, option)
            for source, option in (
                (client_id, "--api-auth-client-id"),
                (client_secret, "--api-auth-client-secret"),
            )
        ]
        (identity, *_), (secret, *_) = sources
        return Credentials(
            from_env=frozenset(variable for _, variable, _ in sources if variable),
            from_files=frozenset(path for _, _, path in sources if path),
            secrets=(secret,),
            auth=OAuth2ClientCredentials(token_url, identity, secret, scope=scope),
        )
    raise RunRefused(f"--api-auth {spec[:80]!r}: {API_AUTH_USAGE}")


def with_api_auth(credentials: Credentials, api_auth: Credentials | None) -> Credentials:
    """The `--api-header` credentials with `--api-auth`'s applied to each request too; refused where
    both would write the request's `Authorization`."""
    if api_auth is None:
        return credentials
    if any(name.lower() == "authorization" for name in credentials.headers):
        raise RunRefused("--api-auth writes each request's Authorization: leave it out of --api-header")
    return Credentials(
        credentials.headers,
        credentials.from_env | api_auth.from_env,
        credentials.from_files | api_auth.from_files,
        credentials.secrets + api_auth.secrets,
        api_auth.auth,
    )


def parse_dry_run_param(text: str) -> dict[str, str]:
    """`NAME=VALUE` as the query a server dry run adds to every write."""
    name, equals, value = text.partition("=")
    if not equals or not name or not value:
        raise RunRefused(f"--dry-run-param {text!r}: write NAME=VALUE, e.g. dryRun=All")
    return {name: value}
