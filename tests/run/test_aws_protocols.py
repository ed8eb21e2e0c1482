"""boto3 itself, with its default retries, under `reviewer run --api-auth aws-sigv4:...` against moto's
server with its authentication on: reads pass through, writes are named by operation, every recorded
write is answered in the form botocore parses (XML for S3, IAM, SNS; JSON for SQS, DynamoDB), and a
value only the real write produces (a multipart `UploadId`, a `TopicArn`) chains through the plan and
is resolved after approval."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from botocore import parsers
from botocore.awsrequest import HeadersDict

from reviewer.agent.xml_answers import xml_fields
from reviewer.plan.placeholders import as_minted, placeholder
from reviewer.run.aws_protocols import AwsApi, effect_of
from tests.run.conftest import ROOT, Queue, RunProcess, proposal, reviewer_decides
from tests.run.test_any_api import MOTO, Moto, moto  # noqa: F401  (the fixture)

BUCKET = "protocol-bucket"
AGENT = textwrap.dedent(
    """
    import json, os, sys
    import boto3
    sends = []
    def client(name):
        made = boto3.client(
            name, endpoint_url=os.environ["REVIEWER_API_URL"], region_name="us-east-1",
            aws_access_key_id="child-holds-no-key", aws_secret_access_key="child-holds-no-key",
        )
        made.meta.events.register("before-send", lambda request, **_: sends.append(request.url))
        return made
    seen = {}
    scenario = sys.argv[1]
    if scenario == "s3":
        s3 = client("s3")
        seen["listed"] = [item["Key"] for item in s3.list_objects_v2(Bucket="BUCKET").get("Contents", [])]
        seen["put"] = s3.put_object(Bucket="BUCKET", Key="new.txt", Body=b"hello")["ETag"]
        seen["deleted"] = s3.delete_objects(Bucket="BUCKET", Delete={"Objects": [{"Key": "old.txt"}]})
        upload = s3.create_multipart_upload(Bucket="BUCKET", Key="big.bin")["UploadId"]
        part = s3.upload_part(Bucket="BUCKET", Key="big.bin", PartNumber=1, UploadId=upload, Body=b"part")
        done = s3.complete_multipart_upload(
            Bucket="BUCKET", Key="big.bin", UploadId=upload,
            MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
        )
        seen["upload"], seen["part"], seen["done"] = upload, part["ETag"], done["Key"]
    elif scenario == "s3-copy":
        s3 = client("s3")
        seen["copied"] = s3.copy_object(
            Bucket="BUCKET", Key="copy.txt", CopySource={"Bucket": "BUCKET", "Key": "old.txt"}
        )["CopyObjectResult"]["ETag"]
    elif scenario == "iam":
        iam = client("iam")
        seen["users"] = sorted(user["UserName"] for user in iam.list_users()["Users"])
        seen["arn"] = iam.create_user(UserName="night-shift")["User"]["Arn"]
    elif scenario == "sts":
        seen["account"] = client("sts").get_caller_identity()["Account"]
    elif scenario == "sns":
        sns = client("sns")
        topic = sns.create_topic(Name="alerts")["TopicArn"]
        seen["topic"], seen["message"] = topic, sns.publish(TopicArn=topic, Message="hello")["MessageId"]
    elif scenario == "sqs":
        sqs = client("sqs")
        url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
        seen["url"], seen["message"] = url, sqs.send_message(QueueUrl=url, MessageBody="go")["MessageId"]
    elif scenario == "dynamodb":
        table = client("dynamodb")
        table.put_item(TableName="things", Item={"id": {"S": "new"}})
        seen["got"] = table.get_item(TableName="things", Key={"id": {"S": "kept"}})["Item"]["id"]["S"]
        table.delete_item(TableName="things", Key={"id": {"S": "kept"}})
    print("SEEN", json.dumps(seen), flush=True)
    print("SENDS", len(sends), flush=True)
    """
).replace("BUCKET", BUCKET)

pytestmark = pytest.mark.skipif(
    MOTO is None and not os.environ.get("CI"),
    reason="moto's server is not installed: pip install 'moto[server]' (the test extra has it)",
)


def boto(moto: Moto, service: str) -> Any:
    import boto3

    return boto3.client(
        service,
        endpoint_url=moto.url,
        region_name="us-east-1",
        aws_access_key_id=moto.key_id,
        aws_secret_access_key=moto.secret,
    )


def start(moto: Moto, queue: Queue, tmp_path: Path, service: str, scenario: str) -> RunProcess:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    environment = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": moto.key_id,
        "AWS_SECRET_ACCESS_KEY": moto.secret,
        "AWS_EC2_METADATA_DISABLED": "true",
        "REVIEWER_AGENT_TOKEN": queue.agent_token,
        "PYTHONUNBUFFERED": "1",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "reviewer", "run", "--api", moto.url, "--queue", queue.url]
        + ["--readable", str(tmp_path), "--api-auth", f"aws-sigv4:{service}:us-east-1"]
        + ["--poll-interval", "0.1", "--", sys.executable, str(agent), scenario],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=ROOT,
    )
    return RunProcess(process)


def dry_run(
    moto: Moto, queue: Queue, tmp_path: Path, service: str, scenario: str
) -> tuple[RunProcess, str, list[dict[str, Any]]]:
    run = start(moto, queue, tmp_path, service, scenario)
    proposal_id, revision = run.wait_for_plan()
    return run, proposal_id, proposal(queue, proposal_id, revision)["calls"]


def child_saw(run: RunProcess, stdout: str, requests: int) -> dict[str, Any]:
    """What the child read from botocore's answers; that it made exactly `requests` requests (no
    retry: botocore retries what it cannot parse) and exited 0."""
    lines = dict(line.split(" ", 1) for line in stdout.splitlines() if line.startswith(("SEEN ", "SENDS ")))
    assert "SEEN" in lines, f"the child failed:\n{stdout}\n{''.join(run.lines)}"
    assert int(lines["SENDS"]) == requests, "botocore retried an answer it could not parse"
    seen: dict[str, Any] = json.loads(lines["SEEN"])
    return seen


def finish(run: RunProcess) -> str:
    """The run's end: it exits 0; the child's output."""
    stdout, rest = run.process.communicate(timeout=90)
    assert run.process.returncode == 0, "".join(run.lines) + rest
    return stdout


def approve(queue: Queue, run: RunProcess, proposal_id: str) -> str:
    reviewer_decides(queue, proposal_id)
    return finish(run)


@pytest.fixture
def bucket(moto: Moto) -> Moto:
    s3 = boto(moto, "s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="old.txt", Body=b"old")
    return moto


def keys(moto: Moto) -> set[str]:
    return {item["Key"] for item in boto(moto, "s3").list_objects_v2(Bucket=BUCKET).get("Contents", [])}


def test_s3_writes_are_answered_as_s3_answers_and_a_multipart_upload_chains_through_approval(
    bucket: Moto, queue: Queue, tmp_path: Path
) -> None:
    run, proposal_id, calls = dry_run(bucket, queue, tmp_path, "s3", "s3")
    assert [call["tool"] for call in calls] == [
        "s3:PutObject",
        "s3:DeleteObjects",
        "s3:CreateMultipartUpload",
        "s3:UploadPart",
        "s3:CompleteMultipartUpload",
    ]
    # By verb, raised to what the method does at least (`proposal.raised_effect`): a PUT is an update.
    assert [call["effect"] for call in calls] == ["update", "delete", "create", "update", "update"]
    assert calls[3]["request"]["query"]["uploadId"] == "<UploadId from call 3>"
    assert calls[4]["request"]["query"]["uploadId"] == "<UploadId from call 3>"
    assert keys(bucket) == {"old.txt"}, "the dry run changed the bucket"
    seen = child_saw(run, approve(queue, run, proposal_id), requests=6)
    assert seen["listed"] == ["old.txt"], "the read did not pass through"
    assert seen["upload"] == "rvw--UploadId--from-call-3--"
    assert seen["part"] == f'"{hashlib.md5(b"part").hexdigest()}"', "the part's ETag is not its MD5"
    assert seen["done"] == "big.bin"
    s3 = boto(bucket, "s3")
    assert keys(bucket) == {"new.txt", "big.bin"}
    assert s3.get_object(Bucket=BUCKET, Key="big.bin")["Body"].read() == b"part"
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
