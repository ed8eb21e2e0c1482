"""Reviewers signed in by a real OpenID provider (npm's `oidc-provider`, started here): `reviewer login`
runs the device authorization grant while the test takes the person's steps in the provider's pages;
alice (in the reviewers group) lists and approves under her provider's name, bob (not in it) is
refused; a session renews at the provider and follows what it says of the person; every hostile
identity token is refused; minted reviewer tokens give way to break-glass ones, marked in the trail."""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from reviewer.queue.config import read_credential
from reviewer.queue.sign_in import ProviderSession, RenewingAuth, SignInFailed
from tests.forked_commands import run_reviewer
from tests.policies import TWO_APPROVALS
from tests.queue_harness import Service, reviewer_command, start_service, submit
from tests.service.oidc import CLIENT_ID, Provider, reviewer_login, running_provider
from tests.system.documented import as_run, documented_block

POLICY = TWO_APPROVALS + 'reviewers = ["*@example.com", "ops-*"]\n'
"""Two approvals of every plan, from people the provider names in example.com or `ops-*` only."""


@dataclass
class Team:
    provider: Provider
    queue: Service
    agent: httpx.Client
    folder: Path


def documented_serve_options(issuer: str) -> list[str]:
    """`serve`'s options as docs/operating.md gives them, with this test's provider (and database)."""
    [command] = documented_block("operating.md", "reviewer serve --db queue.sqlite3 --oidc-issuer")
    words = shlex.split(as_run(command, {"https://sso.example.com/realms/platform": issuer}))
    assert words[:4] == ["reviewer", "serve", "--db", "queue.sqlite3"]
    return words[4:]


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    folder = tmp_path_factory.mktemp("oidc")
    with running_provider(folder) as provider:
        policy = folder / "policy.toml"
        policy.write_text(POLICY)
        queue = start_service(folder, "--policy", str(policy), *documented_serve_options(provider.issuer))
        agent = queue.client(queue.tokens({"deploy-agent": "agent"})["deploy-agent"])
        yield Team(provider, queue, agent, folder)
        agent.close()
        queue.stop()


def cli(home: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "REVIEWER_TOKEN"}
    return run_reviewer(
        reviewer_command(*args),
        capture_output=True,
        text=True,
        env={**environment, "XDG_CONFIG_HOME": str(home), "COLUMNS": "200"},
        timeout=60,
        input=input,
    )


def login(team: Team, home: Path, person: str) -> tuple[int, str, str, str]:
    return reviewer_login(team.queue.url, home, person)


def test_the_queue_says_how_reviewers_sign_in_without_a_token(team: Team) -> None:
    answer = httpx.get(f"{team.queue.url}/v1/auth").json()
    assert answer["minted_reviewer_tokens"] is False
    assert answer["oidc"]["issuer"] == team.provider.issuer
    assert answer["oidc"]["client_id"] == CLIENT_ID
    assert answer["oidc"]["device_authorization_endpoint"] == f"{team.provider.issuer}/device/auth"


def test_alice_signs_in_with_the_device_grant_lists_and_approves_under_her_name(team: Team) -> None:
    home = team.folder / "alice"
    submitted = submit(team.agent, "oidc-alice")
    code, out, err, page = login(team, home, "alice")
    assert code == 0, err
    assert page == "Sign-in Success"
    assert re.search(
        r"To sign in, open this address and enter the code [A-Z]{4}-[A-Z]{4}:\n"
        r"  http://127\.0\.0\.1:\d+/device\n",
        out,
    )
    assert (
        f"signed in to {team.queue.url} as alice@example.com (reviewer) through {team.provider.issuer}" in out
    )
    stored = home / "reviewer" / "token"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    session = read_credential(stored)
    assert isinstance(session, ProviderSession) and session.refresh_token
    assert session.id_token not in out + err  # never printed

    listing = cli(home, "list")
    assert listing.returncode == 0, listing.stderr
    assert "oidc-alice" in listing.stdout
    approved = cli(home, "approve", "oidc-alice", "--revision", "1", "--digest", submitted["plan_sha256"])
    assert approved.returncode == 0, approved.stderr
    assert "pending, 1 of 2 approvals (alice@example.com)" in approved.stdout
    again = httpx.post(
        f"{team.queue.url}/v1/proposals/oidc-alice/decisions",
        json={"revision": 1, "plan_sha256": submitted["plan_sha256"], "decision": "approve"},
        headers={"Authorization": f"Bearer {session.id_token}", "Idempotency-Key": "alice-again"},
    )
    assert again.status_code == 409, again.text  # one person, one approval

    record = team.agent.get("/v1/proposals/oidc-alice").json()
    approval = next(event for event in record["history"] if event["event"] == "approved")
    assert approval["actor"] == "alice@example.com"
    assert approval["identity"] == f"oidc:{team.provider.issuer}#alice"
    shown = cli(home, "show", "oidc-alice")
    assert "alice@example.com" in shown.stdout, shown.stdout + shown.stderr


def test_bob_outside_the_reviewers_group_is_refused(team: Team) -> None:
    home = team.folder / "bob"
    code, _out, err, page = login(team, home, "bob")
    assert page == "Sign-in Success"  # the provider signed him in; the queue refuses him
    assert code == 1
    assert "bob@example.com is not in the queue's reviewers group at the identity provider" in err
    assert not (home / "reviewer" / "token").exists()


def test_a_session_renews_at_the_provider_and_follows_what_it_says_of_the_person(team: Team) -> None:
    """The queue never asks the provider about a person; their client renews the session, and the
    renewed token says whether they are still a reviewer. Out of the group: refused, and the approval
    that waited for a second one no longer counts. Disabled: no renewal at all."""
    home = team.folder / "alice-renewing"
    code, _out, err, _page = login(team, home, "alice")
    assert code == 0, err
    path = home / "reviewer" / "token"
    session = read_credential(path)
    assert isinstance(session, ProviderSession)
    submitted = submit(team.agent, "oidc-renewal")
    stored: list[ProviderSession] = []
    later = [session.ends_at() + 1]  # past the session's end: the next request renews it first
    auth = RenewingAuth(session, stored.append, clock=lambda: later[0])
    with httpx.Client(base_url=team.queue.url, auth=auth) as alice:
        approve = alice.post(
            "/v1/proposals/oidc-renewal/decisions",
            json={"revision": 1, "plan_sha256": submitted["plan_sha256"], "decision": "approve"},
            headers={"Idempotency-Key": "renewal-1"},
        )
        assert approve.status_code == 201, approve.text
        assert approve.json()["approvals"] == ["alice@example.com"]
        assert len(stored) == 1  # renewed first, and stored
        assert stored[0].refresh_token not in (None, session.refresh_token)  # the provider rotated it

        team.provider.set_person("alice", groups=["staff"])
        try:
            later[0] = auth.session.ends_at() + 1
            refused = alice.get("/v1/whoami")
            assert refused.status_code == 403
            assert "not in the queue's reviewers group" in refused.json()["message"]
            state = team.agent.get("/v1/proposals/oidc-renewal/decision").json()
            assert state["state"] == "pending" and state["approvals"] == []
            history = team.agent.get("/v1/proposals/oidc-renewal").json()["history"]
            assert history[-1]["event"] == "withdrawn" and history[-1]["actor"] == "alice@example.com"
            assert "alice@example.com's sign-in ended: out of the reviewers group" in history[-1]["reason"]

            team.provider.set_person("alice", groups=["reviewers"], disabled=True)
            later[0] = auth.session.ends_at() + 1
            with pytest.raises(SignInFailed, match="the provider did not renew the session"):
                alice.get("/v1/whoami")
        finally:
            team.provider.set_person("alice", groups=["reviewers", "staff"], disabled=False)


def _public_pem(provider: Provider) -> bytes:
    return provider.private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _hs256_with_public_key(provider: Provider) -> str:
    """The classic confusion: HS256 whose secret is the provider's public key (PyJWT refuses to
    make one, so it is put together with the standard library's HMAC)."""
    import base64
    import hashlib
    import hmac
    import json
    import time

    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    now = int(time.time())
    header = part(json.dumps({"alg": "HS256", "kid": "test-key-1", "typ": "JWT"}).encode())
    claims = {
        "iss": provider.issuer,
        "aud": CLIENT_ID,
        "sub": "mallory",
        "email": "mallory@example.com",
        "groups": ["reviewers"],
        "iat": now,
        "exp": now + 300,
    }
    body = part(json.dumps(claims).encode())
    signature = hmac.new(_public_pem(provider), f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{part(signature)}"


HOSTILE = {
    "signed by another key": (
        lambda provider: provider.identity_token(
            "mallory", key=rsa.generate_private_key(public_exponent=65537, key_size=2048)
        ),
        "signature does not verify",
    ),
    "alg none": (
        lambda provider: jwt.encode(
            {
                "iss": provider.issuer,
                "aud": CLIENT_ID,
                "sub": "mallory",
                "email": "mallory@example.com",
                "groups": ["reviewers"],
                "iat": 2_000_000_000,
                "exp": 2_000_000_300,
            },
            None,
            algorithm="none",
        ),
        "signed with 'none' are refused",
    ),
    "HS256 keyed with the provider's public key": (_hs256_with_public_key, "signed with 'HS256' are refused"),
    "expired": (
        lambda provider: provider.identity_token("mallory", issued=1_700_000_000),
        "the identity token expired",
    ),
    "another audience": (
        lambda provider: provider.identity_token("mallory", aud="another-app"),
        "issued for another client",
    ),
    "another issuer": (
        lambda provider: provider.identity_token("mallory", iss="https://idp.evil.test"),
        "issued by another provider",
    ),
    "an unknown kid": (
        lambda provider: provider.identity_token(
            "mallory", key=rsa.generate_private_key(public_exponent=65537, key_size=2048), kid="rotated-away"
        ),
        "names a key the provider does not publish",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_identity_token_is_refused(team: Team, case: str) -> None:
    make, words = HOSTILE[case]
    token = make(team.provider)
    answer = httpx.get(f"{team.queue.url}/v1/whoami", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401, answer.text
    assert words in answer.json()["message"]
    assert token not in answer.text


def test_the_same_token_made_honestly_is_accepted(team: Team) -> None:
    """The hostile cases' control: the test's signer makes tokens the queue accepts."""
    token = team.provider.identity_token("carol")
    answer = httpx.get(f"{team.queue.url}/v1/whoami", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "name": "carol@example.com",
        "role": "reviewer",
        "identity": f"oidc:{team.provider.issuer}#carol",
    }


def test_a_minted_reviewer_token_gives_way_to_a_break_glass_one_marked_in_the_trail(team: Team) -> None:
    submitted = submit(team.agent, "oidc-break-glass")
    minted = team.queue.tokens({"ops-dave": "reviewer"})["ops-dave"]
    refused = httpx.get(f"{team.queue.url}/v1/whoami", headers={"Authorization": f"Bearer {minted}"})
    assert refused.status_code == 401
    assert "made with --break-glass" in refused.json()["message"]
    carol = team.provider.identity_token("carol")
    etag = httpx.get(f"{team.queue.url}/v1/proposals", headers={"Authorization": f"Bearer {carol}"}).headers[
        "etag"
    ]
    idle_poll = httpx.get(
        f"{team.queue.url}/v1/proposals", headers={"Authorization": f"Bearer {minted}", "If-None-Match": etag}
    )
    assert idle_poll.status_code == 401  # not a 304 on the idle poll's short way either

    made = cli(
        team.folder,
        "token",
        "create",
        "--db",
        str(team.queue.db),
        "--name",
        "ops-erin",
        "--role",
        "reviewer",
        "--break-glass",
        "--expires-in",
        "1h",
    )
    assert made.returncode == 0, made.stderr
    for token, key in ((carol, "carol"), (made.stdout.strip(), "erin")):
        decided = httpx.post(
            f"{team.queue.url}/v1/proposals/oidc-break-glass/decisions",
            json={"revision": 1, "plan_sha256": submitted["plan_sha256"], "decision": "approve"},
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key},
        )
        assert decided.status_code == 201, decided.text
    assert decided.json()["state"] == "approved"
    assert decided.json()["decided_by"] == "carol@example.com, ops-erin"
    history = team.agent.get("/v1/proposals/oidc-break-glass").json()["history"]
    identities = [event["identity"] for event in history if event["event"] == "approved"]
    assert identities == [f"oidc:{team.provider.issuer}#carol", "break-glass:ops-erin"]
    listed = cli(team.folder, "token", "list", "--db", str(team.queue.db))
    assert re.search(r"ops-erin\treviewer\tcreated .*\texpires .*\tbreak-glass", listed.stdout), listed.stdout
    assert (
        "carol@example.com\treviewer\t" in listed.stdout and f"{team.provider.issuer}#carol" in listed.stdout
    )


def test_a_name_outside_the_policys_reviewers_list_may_not_decide(team: Team) -> None:
    submitted = submit(team.agent, "oidc-outsider")
    token = team.provider.identity_token("mallory", email="mallory@evil.test")
    decided = httpx.post(
        f"{team.queue.url}/v1/proposals/oidc-outsider/decisions",
        json={"revision": 1, "plan_sha256": submitted["plan_sha256"], "decision": "approve"},
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "outsider"},
    )
    assert decided.status_code == 403, decided.text
    assert "mallory@evil.test" in decided.json()["message"]


def test_an_ssh_key_bound_to_the_providers_person_signs_their_approvals(team: Team) -> None:
    """`reviewer keys add NAME` binds a key to the name the provider gives the person (after their
    first sign-in): their signed approval verifies with `ssh-keygen -Y verify`, under that name, and
    a statement signed by another key, or naming another person, is refused."""
    from reviewer.queue.deciding import signed_statement
    from reviewer.signing.sshsig import NAMESPACE, KeyFileSigner
    from tests.signing.ssh import make_key, ssh_keygen_verify

    folder = team.folder / "keys"
    folder.mkdir()
    submitted = submit(team.agent, "oidc-signed")
    token = team.provider.identity_token("dana")
    assert httpx.get(f"{team.queue.url}/v1/whoami", headers={"Authorization": f"Bearer {token}"}).is_success
    dana, stranger = make_key(folder, "dana"), make_key(folder, "stranger")
    bound = cli(
        team.folder, "keys", "add", "dana@example.com", str(dana.public_file), "--db", str(team.queue.db)
    )
    assert bound.returncode == 0, bound.stderr

    def approve(key: Path, reviewer: str, idempotency_key: str) -> httpx.Response:
        signed = signed_statement(
            KeyFileSigner(key), "oidc-signed", 1, submitted["plan_sha256"], "approve", reviewer
        )
        return httpx.post(
            f"{team.queue.url}/v1/proposals/oidc-signed/decisions",
            json={
                "revision": 1,
                "plan_sha256": submitted["plan_sha256"],
                "decision": "approve",
                "statement": signed.statement,
                "signature": signed.signature,
            },
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": idempotency_key},
        )

    assert approve(stranger.private, "dana@example.com", "stranger").status_code in (400, 403, 422)
    assert approve(dana.private, "carol@example.com", "other-name").status_code in (400, 403, 422)
    accepted = approve(dana.private, "dana@example.com", "dana")
    assert accepted.status_code == 201, accepted.text
    [signed] = accepted.json()["signatures"]
    allowed = f'dana@example.com namespaces="{NAMESPACE}" {dana.public_file.read_text().strip()}\n'
    verified = ssh_keygen_verify(
        allowed, "dana@example.com", signed["signature"], signed["statement"].encode(), folder
    )
    assert verified.returncode == 0, verified.stderr


def test_revoking_a_persons_sign_in_ends_it_now_and_withdraws_their_pending_approval(team: Team) -> None:
    """Offboarding on the queue: `token revoke NAME` ends the sign-in at once (the token in hand is
    refused) and withdraws the approval waiting for a second one; only a sign-in after it decides."""
    submitted = submit(team.agent, "oidc-revoked")
    token = team.provider.identity_token("frank")
    decided = httpx.post(
        f"{team.queue.url}/v1/proposals/oidc-revoked/decisions",
        json={"revision": 1, "plan_sha256": submitted["plan_sha256"], "decision": "approve"},
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "frank"},
    )
    assert decided.json()["approvals"] == ["frank@example.com"]
    revoked = cli(team.folder, "token", "revoke", "--db", str(team.queue.db), "frank@example.com")
    assert revoked.returncode == 0, revoked.stderr
    refused = httpx.get(f"{team.queue.url}/v1/whoami", headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 401 and "this session was ended on the queue" in refused.json()["message"]
    assert team.agent.get("/v1/proposals/oidc-revoked/decision").json()["approvals"] == []
    later = team.provider.identity_token("frank", issued=time.time() + 2)
    assert httpx.get(f"{team.queue.url}/v1/whoami", headers={"Authorization": f"Bearer {later}"}).is_success


def test_serve_refuses_a_provider_it_cannot_use_in_one_line(tmp_path: Path) -> None:
    from tests.service.ports import free_port

    nobody = f"http://127.0.0.1:{free_port()}"
    for options, words in (
        (["--oidc-issuer", nobody], "signing reviewers in through a provider also needs --oidc-client-id, "),
        (
            ["--oidc-issuer", nobody, "--oidc-client-id", CLIENT_ID, "--oidc-reviewers", "reviewers"],
            f"cannot read the provider's discovery document at {nobody}/.well-known/openid-configuration",
        ),
        (
            ["--oidc-issuer", "http://idp.example", "--oidc-client-id", "x", "--oidc-reviewers", "y"],
            "must be an https:// URL (http:// only to loopback)",
        ),
    ):
        refused = cli(tmp_path, "serve", "--db", str(tmp_path / "queue.sqlite3"), "--port", "0", *options)
        assert refused.returncode == 1
        [line] = refused.stderr.splitlines()
        assert line.startswith("reviewer serve: ") and words in line, line
