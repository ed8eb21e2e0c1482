"""Credentials the gate applies to each request, never seen by the child: AWS Signature Version 4
against moto's AWS-style server with its request authentication on (it checks every signature), and
OAuth 2.0 client credentials against a token endpoint that mints short-lived tokens."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from reviewer.agent import AwsSigV4Auth, OAuth2ClientCredentials, RequestAuthError
from reviewer.plan.bodies import body_view, exact_bytes
from reviewer.plan.proposal import parse_proposal
from reviewer.run.errors import RunRefused
from reviewer.run.options import read_api_auth, read_credentials, with_api_auth
from tests.run.harness import ROOT, Queue, RunProcess, launch_run, proposal, reviewer_decides
from tests.service.ports import free_port

MOTO = shutil.which("moto_server", path=str(Path(sys.executable).parent))
BUCKET = "gated-bucket"
CHILD = textwrap.dedent(
    """
    import os, sys, urllib.request, urllib.error
    secret = sys.argv[1]
    print("child holds the secret:", any(secret in value for value in os.environ.values()), flush=True)
    print("child sees AWS variables:", sorted(k for k in os.environ if k.startswith("AWS_")), flush=True)
    for method, path in (("GET", "/gated-bucket?list-type=2"), ("DELETE", "/gated-bucket/report.bin")):
        request = urllib.request.Request(
            os.environ["REVIEWER_API_URL"] + path, method=method,
            headers={"authorization": "AWS4-HMAC-SHA256 Credential=FORGED/20260101/us-east-1/s3"},
        )
        try:
            with urllib.request.urlopen(request) as answer:
                print(method, answer.status, answer.read().decode()[:2000], flush=True)
        except urllib.error.HTTPError as error:
            print(method, error.code, error.read().decode()[:300], flush=True)
    """
)

pytestmark = pytest.mark.skipif(
    MOTO is None and not os.environ.get("CI"),
    reason="moto's server is not installed: pip install 'moto[server]' (the test extra has it)",
)


@dataclass
class Moto:
    url: str
    key_id: str
    secret: str
    recording: Path
    """moto's own log of every request it was sent (its recorder), one JSON object a line."""

    def received(self) -> list[dict[str, Any]]:
        """Every request moto was sent so far, in order: method, url, headers, body."""
        lines = self.recording.read_text().splitlines() if self.recording.exists() else []
        return [json.loads(line) for line in lines]

    def s3(self, secret: str | None = None) -> httpx.Client:
        """An httpx client to S3 signed by `AwsSigV4Auth` with this key (or another secret)."""
        credentials = _credentials(self.key_id, secret or self.secret)
        return httpx.Client(base_url=self.url, auth=AwsSigV4Auth("s3", "us-east-1", credentials), timeout=10)


def _credentials(key_id: str, secret: str) -> object:
    from botocore.credentials import Credentials

    return Credentials(key_id, secret)


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """moto's server with request authentication from its fourth request on: the first three make the
    user the gate signs as, with a policy allowing everything, and its access key."""
    assert MOTO is not None, "moto's server is not installed; the test extra has it"
    import boto3

    port = free_port()
    folder = tmp_path_factory.mktemp("moto")
    recording = folder / "requests.jsonl"
    process = subprocess.Popen(
        [MOTO, "-p", str(port)],
        stdout=(folder / "moto.log").open("wb"),
        stderr=subprocess.STDOUT,
        env={
            **os.environ,
            "INITIAL_NO_AUTH_ACTION_COUNT": "3",
            "MOTO_ENABLE_RECORDING": "true",
            "MOTO_RECORDER_FILEPATH": str(recording),
        },
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"{url}/moto-api/", timeout=1)
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(0.05)
        unsigned = {"endpoint_url": url, "region_name": "us-east-1"}
        iam = boto3.client(
            "iam", aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap", **unsigned
        )
        iam.create_user(UserName="gate")
        iam.put_user_policy(
            UserName="gate",
            PolicyName="everything",
            PolicyDocument='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}',
        )
        key = iam.create_access_key(UserName="gate")["AccessKey"]
        yield Moto(url, key["AccessKeyId"], key["SecretAccessKey"], recording)
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def bucket(moto: Moto) -> Moto:
    """The bucket holding one object of bytes no text decoder likes."""
    with moto.s3() as s3:
        assert s3.put(f"/{BUCKET}").status_code == 200
        assert s3.put(f"/{BUCKET}/report.bin", content=b"\x00\x1b[2J\xff report").status_code == 200
    return moto


def test_the_library_signs_requests_moto_accepts_and_a_wrong_secret_is_refused(bucket: Moto) -> None:
    with bucket.s3() as s3:
        listing = s3.get(f"/{BUCKET}", params={"list-type": "2"})
        assert listing.status_code == 200 and "report.bin" in listing.text
        # A credential the request already carried is replaced, never sent beside the signature.
        forged = s3.get(f"/{BUCKET}", params={"list-type": "2"}, headers={"authorization": "Bearer stolen"})
        assert forged.status_code == 200
    with bucket.s3(secret="not-the-secret") as wrong:
        refused = wrong.get(f"/{BUCKET}", params={"list-type": "2"})
    assert refused.status_code == 403 and "Signature" in refused.text


def test_no_aws_credentials_is_a_clear_refusal(tmp_path: Path) -> None:
    environment = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "REVIEWER_AGENT_TOKEN": "agent-token",
    }
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "reviewer",
            "run",
            "--api",
            "http://127.0.0.1:9",
            "--api-auth",
            "aws-sigv4:s3:us-east-1",
        ]
        + ["--no-sandbox", "--", "true"],
        capture_output=True,
        text=True,
        env=environment,
        cwd=ROOT,
        timeout=60,
    )
    assert finished.returncode == 2
    assert "no AWS credentials found" in finished.stderr and "Traceback" not in finished.stderr


def test_reviewer_run_signs_for_the_child_which_never_holds_the_secret(
    bucket: Moto, queue: Queue, tmp_path: Path
) -> None:
    process, run = run_child_against(
        bucket, queue, tmp_path, "aws-sigv4:s3:us-east-1", bucket.secret, script=CHILD
    )
    proposal_id, _ = run.wait_for_plan()
    with bucket.s3() as s3:
        assert s3.head(f"/{BUCKET}/report.bin").status_code == 200, "the dry run deleted the object"
    reviewer_decides(queue, proposal_id)
    stdout, rest = process.communicate(timeout=60)
    stderr = "".join(run.lines) + rest
    assert process.returncode == 0, stderr
    assert "child holds the secret: False" in stdout
    assert "AWS_ACCESS_KEY_ID" not in stdout and "AWS_SECRET_ACCESS_KEY" not in stdout
    # The read went through the gate, signed by it: moto, which checks every signature, listed the bucket.
    assert "GET 200" in stdout and "report.bin" in stdout
    with bucket.s3() as s3:
        assert s3.head(f"/{BUCKET}/report.bin").status_code == 404, "the approved delete did not run"
    assert bucket.secret not in stderr


# --- OAuth 2.0 client credentials ------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _token_server(secret: str = "s3cret") -> tuple[httpx.MockTransport, list[str]]:
    """A token endpoint granting `client`/`secret`, compared as sent (no form-decoding), numbered tokens
    for 300 s, in front of an API that takes only the newest one: what a provider that rotates tokens
    does."""
    issued: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/token":
            form = dict(httpx.QueryParams(request.content.decode()))
            expected = httpx.BasicAuth("client", secret)
            authorization = next(expected.auth_flow(httpx.Request("GET", "http://x"))).headers[
                "authorization"
            ]
            if (
                request.headers.get("authorization") != authorization
                or form["grant_type"] != "client_credentials"
            ):
                return httpx.Response(401, json={"error": "invalid_client"})
            issued.append(f"token-{len(issued) + 1}")
            return httpx.Response(200, json={"access_token": issued[-1], "expires_in": 300})
        if issued and request.headers.get("authorization") == f"Bearer {issued[-1]}":
            return httpx.Response(200, json={"ok": True})
        return httpx.Response(401, json={"error": "invalid_token"})

    return httpx.MockTransport(handle), issued


@pytest.mark.anyio
async def test_client_credentials_are_fetched_once_cached_and_renewed_before_expiry() -> None:
    transport, issued = _token_server()
    clock = Clock()
    auth = OAuth2ClientCredentials("https://idp.example/token", "client", "s3cret", clock=clock)
    async with httpx.AsyncClient(base_url="https://api.example", transport=transport, auth=auth) as api:
        assert (await api.get("/things")).status_code == 200
        assert (await api.post("/things", json={})).status_code == 200
        assert issued == ["token-1"], "a fresh token was fetched again"
        clock.now += 271  # within 30 s of its expiry: renewed before it is sent
        assert (await api.get("/things")).status_code == 200
        assert issued == ["token-1", "token-2"]


def test_a_token_the_api_refuses_is_fetched_again_once() -> None:
    transport, issued = _token_server()
    auth = OAuth2ClientCredentials("https://idp.example/token", "client", "s3cret", clock=Clock())
    with httpx.Client(base_url="https://api.example", transport=transport, auth=auth) as api:
        assert api.get("/things").status_code == 200
        issued.append("rotated-by-the-provider")  # the API now takes only a newer token
        assert api.get("/things").status_code == 200
    assert issued == ["token-1", "rotated-by-the-provider", "token-3"]


def test_a_provider_that_compares_the_secret_as_sent_gets_it_so_once_and_from_then_on() -> None:
    """Form-encoded first (RFC 6749 2.3.1); refused, the secret goes as it is, and that form is kept."""
    transport, issued = _token_server(secret="a+b/c=")
    sent: list[str] = []

    def recording(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/token":
            sent.append(request.headers["authorization"])
        return transport.handle_request(request)

    auth = OAuth2ClientCredentials("https://idp.example/token", "client", "a+b/c=", clock=Clock())
    with httpx.Client(
        base_url="https://api.example", transport=httpx.MockTransport(recording), auth=auth
    ) as api:
        assert api.get("/things").status_code == 200
        issued.append("rotated-by-the-provider")
        assert api.get("/things").status_code == 200
    encoded, as_sent = (
        next(httpx.BasicAuth("client", secret).auth_flow(httpx.Request("GET", "http://x"))).headers[
            "authorization"
        ]
        for secret in ("a%2Bb%2Fc%3D", "a+b/c=")
    )
    assert sent == [encoded, as_sent, as_sent]


def test_oauth2_secrets_are_withheld_and_one_authorization_only() -> None:
    environ = {"CLIENT_ID": "client", "CLIENT_SECRET": "s3cret", "API_TOKEN": "static"}
    credentials = read_api_auth(
        "oauth2:https://idp.example/token",
        environ,
        client_id="env:CLIENT_ID",
        client_secret="env:CLIENT_SECRET",
    )
    assert credentials.from_env == {"CLIENT_ID", "CLIENT_SECRET"} and credentials.secrets == ("s3cret",)
    with pytest.raises(RunRefused, match="leave it out of --api-header"):
        with_api_auth(read_credentials(["Authorization: Bearer env:API_TOKEN"], environ), credentials)
    with pytest.raises(RunRefused, match="visible to every user"):
        read_api_auth("oauth2:https://idp.example/token", environ, client_id="client", client_secret="s3cret")
    with pytest.raises(RunRefused, match="plain http off loopback"):
        read_api_auth("oauth2:http://idp.example/token", environ, client_id="env:A", client_secret="env:B")
    with pytest.raises(RunRefused, match="aws-sigv4:SERVICE:REGION or oauth2:TOKEN_URL"):
        read_api_auth("basic:x", environ)


def test_a_wrong_client_secret_says_so_without_the_secret() -> None:
    transport, _ = _token_server()
    auth = OAuth2ClientCredentials("https://idp.example/token", "client", "wrong-secret", clock=Clock())
    with (
        httpx.Client(base_url="https://api.example", transport=transport, auth=auth) as api,
        pytest.raises(RequestAuthError) as refused,
    ):
        api.get("/things")
    assert "answered 401" in str(refused.value) and "wrong-secret" not in str(refused.value)


# --- bodies that are not JSON ----------------------------------------------------------------------

UPLOAD = b"\x00\x1b[2J\x1b]0;owned\x07\xff\xfe binary \x9b" * 4096
UPLOADER = textwrap.dedent(
    """
    import os, sys, urllib.request, urllib.error
    def send(method, path, data=None, content_type=None):
        request = urllib.request.Request(os.environ["REVIEWER_API_URL"] + path, method=method, data=data)
        if content_type:
            request.add_header("content-type", content_type)
        try:
            with urllib.request.urlopen(request) as answer:
                print(method, path, answer.status, flush=True)
        except urllib.error.HTTPError as error:
            print(method, path, error.code, error.read().decode()[:300], flush=True)
    if sys.argv[1] == "s3":
        with open(sys.argv[2], "rb") as upload:
            send("PUT", "/gated-bucket/upload.bin", upload.read(), "application/octet-stream")
        send("DELETE", "/gated-bucket/report.bin")
    elif sys.argv[1] == "iam":
        form = "Action=CreateUser&Version=2010-05-08&UserName=night-shift&Path=%2Fops%2F"
        send("POST", "/", form.encode(), "application/x-www-form-urlencoded")
    elif sys.argv[1] == "huge":
        send("PUT", "/gated-bucket/huge.bin", b"\\0" * (50 * 1024 * 1024), "application/octet-stream")
    """
)


def run_child_against(
    moto: Moto, queue: Queue, tmp_path: Path, auth: str, *arguments: str, script: str = ""
) -> tuple[subprocess.Popen[str], RunProcess]:
    """`reviewer run --api-auth AUTH` against moto, the gate's AWS credentials in its environment, the
    child `script` (the uploader by default) run with `arguments`."""
    child = tmp_path / "child.py"
    child.write_text(script or UPLOADER)
    environment = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": moto.key_id,
        "AWS_SECRET_ACCESS_KEY": moto.secret,
        "AWS_EC2_METADATA_DISABLED": "true",
        "REVIEWER_AGENT_TOKEN": queue.agent_token,
        "PYTHONUNBUFFERED": "1",
    }
    run = launch_run(
        ["run", "--api", moto.url, "--queue", queue.url]
        + ["--readable", str(tmp_path)]  # the child's script
        + ["--api-auth", auth, "--poll-interval", "0.1", "--", sys.executable, str(child), *arguments],
        environment,
    )
    return run.process, run


def test_an_s3_upload_is_approved_as_its_exact_bytes_and_sent_as_them(
    bucket: Moto, queue: Queue, tmp_path: Path
) -> None:
    upload = tmp_path / "upload.bin"
    upload.write_bytes(UPLOAD)
    process, run = run_child_against(bucket, queue, tmp_path, "aws-sigv4:s3:us-east-1", "s3", str(upload))
    proposal_id, revision = run.wait_for_plan()
    with bucket.s3() as s3:
        assert s3.head(f"/{BUCKET}/upload.bin").status_code == 404, "the dry run uploaded"
        assert s3.head(f"/{BUCKET}/report.bin").status_code == 200, "the dry run deleted"
    plan = parse_proposal(json.dumps(proposal(queue, proposal_id, revision)).encode())
    put = plan.calls[0]
    assert put.request is not None and put.request.content_type == "application/octet-stream"
    assert exact_bytes(put.request.body) == UPLOAD
    shown = body_view(put.request.content_type, put.request.body)
    assert shown["length"] == len(UPLOAD) and shown["sha256"] == hashlib.sha256(UPLOAD).hexdigest()
    reviewer_decides(queue, proposal_id)
    _, rest = process.communicate(timeout=60)
    assert process.returncode == 0, "".join(run.lines) + rest
    with bucket.s3() as s3:
        assert s3.get(f"/{BUCKET}/upload.bin").content == UPLOAD
        assert s3.head(f"/{BUCKET}/report.bin").status_code == 404


def test_a_form_encoded_iam_call_is_read_field_by_field_and_replayed(
    moto: Moto, queue: Queue, tmp_path: Path
) -> None:
    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=moto.url,
        region_name="us-east-1",
        aws_access_key_id=moto.key_id,
        aws_secret_access_key=moto.secret,
    )
    process, run = run_child_against(moto, queue, tmp_path, "aws-sigv4:iam:us-east-1", "iam")
    proposal_id, revision = run.wait_for_plan()
    assert "night-shift" not in [user["UserName"] for user in iam.list_users()["Users"]]
    call = proposal(queue, proposal_id, revision)["calls"][0]
    assert call["args"] == {
        "Action": "CreateUser",
        "Version": "2010-05-08",
        "UserName": "night-shift",
        "Path": "/ops/",
    }
    assert call["request"]["content_type"] == "application/x-www-form-urlencoded"
    reviewer_decides(queue, proposal_id)
    _, rest = process.communicate(timeout=60)
    assert process.returncode == 0, "".join(run.lines) + rest
    assert iam.get_user(UserName="night-shift")["User"]["Path"] == "/ops/"


def test_a_50_mb_upload_is_refused_unread_and_nothing_is_submitted(
    moto: Moto, queue: Queue, tmp_path: Path
) -> None:
    process, run = run_child_against(moto, queue, tmp_path, "aws-sigv4:s3:us-east-1", "huge")
    stdout, rest = process.communicate(timeout=120)
    stderr = "".join(run.lines) + rest
    assert process.returncode == 1
    assert "passed the proposal limit" in stderr and "nothing was submitted" in stderr
    assert "Traceback" not in stderr


FORM_AGENT = textwrap.dedent(
    """
    import json, os, urllib.parse, urllib.request
    def send(method, path, data, content_type):
        request = urllib.request.Request(
            os.environ["REVIEWER_API_URL"] + path, method=method, data=data,
            headers={"content-type": content_type},
        )
        with urllib.request.urlopen(request) as answer:
            return json.loads(answer.read() or b"{}")
    created = send("POST", "/tickets", json.dumps({"title": "Printer on fire"}).encode(), "application/json")
    form = urllib.parse.urlencode({"mergedInto": created["id"], "status": "closed"})
    send("PATCH", "/tickets/t2", form.encode(), "application/x-www-form-urlencoded")
    """
)


def test_a_placeholder_in_a_form_field_is_shown_and_replayed_resolved(queue: Queue, tmp_path: Path) -> None:
    """json-server, which takes forms as Stripe's API does and mints ids the dry run cannot know."""
    from tests.run.test_json_server import JSON_SERVER, NODE, serving_json_server

    if NODE is None or not JSON_SERVER.exists():
        pytest.skip("json-server is not installed (.ci/run installs it)")
    agent = tmp_path / "agent.py"
    agent.write_text(FORM_AGENT)
    with serving_json_server(tmp_path / "api") as (api, data):
        environment = {**os.environ, "REVIEWER_AGENT_TOKEN": queue.agent_token, "PYTHONUNBUFFERED": "1"}
        run = launch_run(
            ["run", "--api", api.url, "--queue", queue.url]
            + ["--readable", str(tmp_path)]  # the child's script
            + ["--poll-interval", "0.1", "--", sys.executable, str(agent)],
            environment,
            ROOT,
        )
        proposal_id, revision = run.wait_for_plan()
        patch = proposal(queue, proposal_id, revision)["calls"][1]
        assert patch["request"]["body"] == [["mergedInto", "<id from call 1>"], ["status", "closed"]]
        assert patch["args"] == {"mergedInto": "<id from call 1>", "status": "closed"}
        reviewer_decides(queue, proposal_id)
        code, said = run.finish()
        assert code == 0, said
        tickets = {str(ticket["id"]): ticket for ticket in json.loads(data.read_text())["tickets"]}
    created = [ticket for ticket in tickets.values() if ticket["title"] == "Printer on fire"]
    assert len(created) == 1
    assert tickets["t2"]["mergedInto"] == str(created[0]["id"]) and tickets["t2"]["status"] == "closed"


@pytest.mark.parametrize("lifetime", ["NaN", "inf", -5])
def test_a_token_lifetime_that_is_no_number_of_seconds_reads_as_the_default(lifetime: object) -> None:
    clock = Clock()
    issued: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/token":
            issued.append("t")
            return httpx.Response(200, json={"access_token": f"token-{len(issued)}", "expires_in": lifetime})
        return httpx.Response(200, json={})

    auth = OAuth2ClientCredentials("https://idp.example/token", "client", "s3cret", clock=clock)
    with httpx.Client(
        base_url="https://api.example", transport=httpx.MockTransport(handle), auth=auth
    ) as api:
        api.get("/a")
        api.get("/b")
        assert len(issued) == 1, "a token was fetched for every request"
        clock.now += 301
        api.get("/c")
    assert len(issued) == 2, "the token was never renewed"
