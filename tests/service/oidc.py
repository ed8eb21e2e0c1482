"""A real OpenID provider for the tests (npm's `oidc-provider`, `oidc_provider.mjs`), the browser steps a
person takes at it during the device authorization grant, and identity tokens the tests sign with the
provider's own private key (to make hostile ones: expired, for another client, from another issuer)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.forked_commands import reviewer_process
from tests.queue_harness import reviewer_command
from tests.service.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")
MODULE = ROOT / ".test-idp" / "node_modules" / "oidc-provider"
SCRIPT = Path(__file__).with_name("oidc_provider.mjs")
CLIENT_ID = "reviewer-cli"
KEY_ID = "test-key-1"
PEOPLE: dict[str, dict[str, Any]] = {
    "alice": {"email": "alice@example.com", "groups": ["reviewers", "staff"]},
    "bob": {"email": "bob@example.com", "groups": ["staff"]},
}


def require_provider() -> None:
    """Fail under CI (which installs it, `.ci/run`), skip elsewhere, when the provider is missing."""
    if NODE is not None and MODULE.exists():
        return
    why = (
        "npm's oidc-provider is not installed: npm install --prefix .test-idp oidc-provider@9.13.3 "
        "(.ci/run does)"
    )
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


@dataclass
class Provider:
    issuer: str
    process: subprocess.Popen[bytes]
    private_key: rsa.RSAPrivateKey
    people_file: Path

    def set_person(self, login: str, **fields: Any) -> None:
        """Change a person at the provider (groups, disabled); read again at their next sign-in or refresh."""
        people = json.loads(self.people_file.read_text())
        people[login] = {**people[login], **fields}
        self.people_file.write_text(json.dumps(people))

    def identity_token(
        self,
        subject: str,
        *,
        key: Any = None,
        algorithm: str = "RS256",
        kid: str | None = KEY_ID,
        issued: float | None = None,
        **claims: Any,
    ) -> str:
        """An identity token as the provider signs them (its key, its kid), with `claims` changed."""
        now = time.time() if issued is None else issued
        body = {
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "sub": subject,
            "email": f"{subject}@example.com",
            "email_verified": True,
            "groups": ["reviewers"],
            "iat": int(now),
            "exp": int(now) + 300,
            **claims,
        }
        headers = {"kid": kid} if kid is not None else {}
        return jwt.encode(
            body, self.private_key if key is None else key, algorithm=algorithm, headers=headers
        )


@contextmanager
def running_provider(folder: Path, id_token_seconds: int = 300) -> Iterator[Provider]:
    require_provider()
    private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(private_key, as_dict=True)
    jwk.update(kid=KEY_ID, use="sig", alg="RS256")
    keys = folder / "jwks.json"
    keys.write_text(json.dumps({"keys": [jwk]}))
    people = folder / "people.json"
    people.write_text(json.dumps(PEOPLE))
    port = free_port()
    log = folder / "provider.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(NODE), str(SCRIPT), str(MODULE), str(port), str(people), str(keys), str(id_token_seconds)],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    issuer = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if process.poll() is not None:
                raise RuntimeError(log.read_text(errors="replace"))
            if f"serving {issuer}" in log.read_text(errors="replace"):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"the provider did not start: {log.read_text(errors='replace')}")
        yield Provider(issuer, process, private_key, people)
    finally:
        process.terminate()
        process.wait(10)


_FORM = re.compile(r'<form[^>]*action="([^"]+)"')
_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')


def sign_in_at_provider(verification_uri_complete: str, login: str) -> str:
    """What the person does in a browser: open the URL that holds the code, confirm the device, sign
    in (the development login page takes any password), consent. Returns the last page's heading."""
    with httpx.Client(follow_redirects=True, timeout=30) as browser:
        page = browser.get(verification_uri_complete)
        for _ in range(8):
            action = _FORM.search(page.text)
            if action is None:
                break
            fields = dict(_HIDDEN.findall(page.text))
            if 'name="login"' in page.text:
                fields.update(login=login, password="anything")
            if 'name="confirm"' in page.text:
                fields["confirm"] = "yes"
            page = browser.post(action.group(1), data=fields)
        heading = re.search(r"<h1>(.*?)</h1>", page.text)
        return heading.group(1) if heading else page.text[:200]


def reviewer_login(queue_url: str, home: Path, person: str) -> tuple[int, str, str, str]:
    """`reviewer login --queue URL` (its configuration in `home`), with the person taking the steps it
    prints at the provider; (exit, stdout, stderr, the provider's last page)."""
    environment = {key: value for key, value in os.environ.items() if key != "REVIEWER_TOKEN"}
    process = reviewer_process(
        reviewer_command("login", "--queue", queue_url),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**environment, "XDG_CONFIG_HOME": str(home)},
    )
    return signed_in_by(process, person)


def signed_in_by(process: subprocess.Popen[str], person: str) -> tuple[int, str, str, str]:
    """The person's steps at the provider, from the address a running `reviewer login` prints (the
    one that holds the code), until it ends; (exit, stdout, stderr, the provider's last page)."""
    assert process.stdout is not None
    printed = []
    for line in process.stdout:
        printed.append(line)
        complete = re.fullmatch(r"  (\S+)\n", line)
        if complete and printed[-2] == "or open this one, which holds the code:\n":
            break
    else:
        process.wait(30)
        raise AssertionError(
            f"no code was printed: {printed} {process.stderr.read() if process.stderr else ''}"
        )
    page = sign_in_at_provider(complete.group(1), person)
    out, err = process.communicate(timeout=60)
    return process.returncode, "".join(printed) + out, err, page
