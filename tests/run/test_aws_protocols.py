"""boto3, the AWS CLI and the AWS SDK for JavaScript v3, with their default retries, under `reviewer run
--api-auth aws-sigv4:...` against moto's server with its authentication on: reads pass through, writes
are named by operation, every recorded write is answered in the form the SDK parses (XML for S3, IAM,
SNS; JSON for SQS, DynamoDB), and a value only the real write produces (a multipart `UploadId`, a
`TopicArn`, a `QueueUrl`) chains through the plan and is resolved after approval. After approval moto
holds exactly the approved state, each write sent once, counted from moto's own request log (its
recorder), a retry botocore decides on too."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore import parsers
from botocore.awsrequest import HeadersDict

from reviewer.agent.xml_answers import xml_fields
from reviewer.plan.placeholders import as_minted, placeholder
from reviewer.run.aws_protocols import AwsApi
from tests.run.harness import ROOT, Queue, RunProcess, launch_run, proposal, reviewer_decides
from tests.run.test_any_api import MOTO, Moto
from tests.run.test_any_api import moto as moto  # the fixture: moto's server, authentication on
from tests.system.documented import as_run, documented_block

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
            Bucket="BUCKET", Key="copy.txt", CopySource={"Bucket": "BUCKET", "Key": "old.txt"},
            ServerSideEncryption="AES256", Tagging="team=ops", TaggingDirective="REPLACE",
            Metadata={"owner": "night-shift"}, MetadataDirective="REPLACE",
        )["CopyObjectResult"]["ETag"]
    elif scenario == "s3-delete":
        s3 = client("s3")
        deleted = s3.delete_object(Bucket="BUCKET", Key="old.txt")
        seen["deleted"] = deleted["ResponseMetadata"]["HTTPStatusCode"]
    elif scenario == "s3-retry":
        s3 = client("s3")
        def once(attempts, **_):
            # A retry the SDK itself decides on, after a first attempt that succeeded.
            return 0 if attempts == 1 else None
        s3.meta.events.register("needs-retry.s3.PutObject", once)
        seen["put"] = s3.put_object(Bucket="BUCKET", Key="new.txt", Body=b"hello")["ETag"]
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
    elif scenario == "ec2":
        ec2 = client("ec2")
        seen["before"] = len(ec2.describe_instances()["Reservations"])
        started = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)
        seen["reservation"] = started["ReservationId"]
    print("SEEN", json.dumps(seen), flush=True)
    print("SENDS", len(sends), flush=True)
    """
).replace("BUCKET", BUCKET)

pytestmark = pytest.mark.skipif(
    MOTO is None and not os.environ.get("CI"),
    reason="moto's server is not installed: pip install 'moto[server]' (the test extra has it)",
)


def boto(server: Moto, service: str) -> Any:
    import boto3

    return boto3.client(
        service,
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id=server.key_id,
        aws_secret_access_key=server.secret,
    )


def start(
    server: Moto, queue: Queue, tmp_path: Path, service: str, scenario: str, *options: str
) -> RunProcess:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    environment = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": server.key_id,
        "AWS_SECRET_ACCESS_KEY": server.secret,
        "AWS_EC2_METADATA_DISABLED": "true",
        "REVIEWER_AGENT_TOKEN": queue.agent_token,
        "PYTHONUNBUFFERED": "1",
    }
    return launch_run(
        ["run", "--api", server.url, "--queue", queue.url]
        + ["--readable", str(tmp_path), "--api-auth", f"aws-sigv4:{service}:us-east-1"]
        + ["--poll-interval", "0.1", *options, "--", sys.executable, str(agent), scenario],
        environment,
    )


def dry_run(
    server: Moto, queue: Queue, tmp_path: Path, service: str, scenario: str, *options: str
) -> tuple[RunProcess, str, list[dict[str, Any]]]:
    run = start(server, queue, tmp_path, service, scenario, *options)
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


def reject(queue: Queue, run: RunProcess, proposal_id: str) -> str:
    """The reviewer rejects the plan (for a call the real run cannot send yet); the child's output."""
    reviewer_decides(queue, proposal_id, "reject", "dry run only")
    stdout, _ = run.process.communicate(timeout=90)
    return stdout


def approve(queue: Queue, run: RunProcess, proposal_id: str) -> str:
    reviewer_decides(queue, proposal_id)
    return finish(run)


@pytest.fixture
def bucket(moto: Moto) -> Moto:
    """The bucket holding `old.txt` alone (moto lives for the module)."""
    s3 = boto(moto, "s3")
    s3.create_bucket(Bucket=BUCKET)
    for item in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        s3.delete_object(Bucket=BUCKET, Key=item["Key"])
    s3.put_object(Bucket=BUCKET, Key="old.txt", Body=b"old")
    return moto


def writes(server: Moto, since: int) -> list[str]:
    """The writes moto was sent after its `since`th request, each named as it was sent: the method and
    path, with the operation a JSON protocol names in `X-Amz-Target`."""
    named = []
    for request in server.received()[since:]:
        if request["method"] in ("GET", "HEAD"):
            continue
        target = {name.lower(): value for name, value in request["headers"].items()}.get("x-amz-target")
        path = "/" + request["url"].split("/", 3)[3]
        named.append(f"{request['method']} {path}" + (f" {target}" if target else ""))
    return named


def keys(server: Moto) -> set[str]:
    return {item["Key"] for item in boto(server, "s3").list_objects_v2(Bucket=BUCKET).get("Contents", [])}


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


FORM = {"content-type": "application/x-www-form-urlencoded; charset=utf-8"}
OPERATIONS = [
    # service, method, path, query, headers, body: the operation, its effect, what it produces
    ("s3", "PUT", "/b/k", {}, {}, b"hi", "PutObject", "create", ()),
    ("s3", "PUT", "/b/k", {}, {"x-amz-copy-source": "b/a"}, b"", "CopyObject", "create", ("ETag",)),
    ("s3", "POST", "/b", {"delete": ""}, {}, b"<Delete/>", "DeleteObjects", "delete", ()),
    ("s3", "POST", "/b/k", {"uploads": ""}, {}, b"", "CreateMultipartUpload", "create", ("UploadId",)),
    ("s3", "PUT", "/b/k", {"partNumber": "1", "uploadId": "u"}, {}, b"p", "UploadPart", "create", ()),
    ("s3", "GET", "/b", {"list-type": "2"}, {}, b"", "ListObjectsV2", "read", ()),
    ("iam", "POST", "/", {}, FORM, b"Action=ListUsers&Version=2010-05-08", "ListUsers", "read", ()),
    ("iam", "GET", "/", {"Action": "DeleteUser", "UserName": "a"}, {}, b"", "DeleteUser", "delete", ()),
    ("sts", "POST", "/", {}, FORM, b"Action=GetCallerIdentity", "GetCallerIdentity", "read", ()),
    ("sns", "POST", "/", {}, FORM, b"Action=CreateTopic&Name=t", "CreateTopic", "create", ("TopicArn",)),
    (
        "sqs",
        "POST",
        "/",
        {},
        {"x-amz-target": "AmazonSQS.CreateQueue"},
        b'{"QueueName": "q"}',
        "CreateQueue",
        "create",
        ("QueueUrl",),
    ),
    (
        "dynamodb",
        "POST",
        "/",
        {},
        {"x-amz-target": "DynamoDB_20120810.GetItem"},
        b"{}",
        "GetItem",
        "read",
        (),
    ),
    (
        "dynamodb",
        "POST",
        "/",
        {},
        {"x-amz-target": "DynamoDB_20120810.UpdateItem"},
        b"{}",
        "UpdateItem",
        "update",
        (),
    ),
    ("ec2", "POST", "/", {}, FORM, b"Action=DescribeInstances", "DescribeInstances", "read", ()),
    ("ec2", "POST", "/", {}, FORM, b"Action=TerminateInstances", "TerminateInstances", "delete", ()),
    ("ec2", "POST", "/", {}, FORM, b"Action=RunInstances", "RunInstances", "create", ("reservationId",)),
]


@pytest.mark.parametrize(
    ("service", "method", "path", "query", "headers", "body", "name", "effect", "produces"), OPERATIONS
)
def test_each_request_is_named_by_its_operation_and_its_answer_parses_with_botocore(
    service: str,
    method: str,
    path: str,
    query: dict[str, str],
    headers: dict[str, str],
    body: bytes,
    name: str,
    effect: str,
    produces: tuple[str, ...],
) -> None:
    api = AwsApi.load(service)
    assert api is not None
    operation = api.operation_of(method, path, query, headers, body)
    assert operation is not None and (operation.name, operation.effect) == (name, effect)
    assert set(produces) <= set(operation.produces())
    # The dry run hands the child each produced value as a minted placeholder.
    result = as_minted({path: placeholder(path, 4) for path in operation.produces()})
    answer = operation.answer(result)
    parser = parsers.create_parser(operation.protocol)
    parsed = parser.parse(
        {"status_code": answer.status, "headers": HeadersDict(answer.headers), "body": answer.content},
        operation.model.output_shape,
    )
    assert "Error" not in parsed
    read_back = (
        xml_fields(answer.content) if answer.content.startswith(b"<") else json.loads(answer.content or b"{}")
    )
    for produced in produces:
        # Where the placeholder says, as the real run reads the real answer (`xml_fields`, JSON).
        assert read_back is not None and read_back[produced] == f"rvw--{produced}--from-call-4--"
        assert produced in json.dumps(parsed) or produced.lower() in json.dumps(parsed).lower()


def test_an_s3_write_with_no_output_body_is_an_empty_200_with_the_etag_of_its_bytes() -> None:
    api = AwsApi.load("s3")
    assert api is not None
    operation = api.operation_of("PUT", "/b/k", {}, {}, b"hello")
    assert operation is not None
    answer = operation.answer({})
    assert (answer.status, answer.content) == (200, b"")
    assert answer.headers == {"ETag": f'"{hashlib.md5(b"hello").hexdigest()}"'}


def test_a_query_answer_reads_back_below_its_result_and_an_xml_bomb_is_no_fields() -> None:
    api = AwsApi.load("iam")
    assert api is not None
    operation = api.operation_of(
        "POST", "/", {}, FORM, b"Action=CreateUser&UserName=night-shift&Path=%2Fops%2F"
    )
    assert operation is not None and operation.name == "CreateUser"
    assert "User.Arn" in operation.produces() and "User.UserName" not in operation.produces()
    answer = operation.answer({"User.Arn": "rvw--User-Arn--from-call-1--"})
    read = xml_fields(answer.content)
    assert read is not None
    assert read["User"]["UserName"] == "night-shift" and read["User"]["Path"] == "/ops/"
    assert read["User"]["Arn"] == "rvw--User-Arn--from-call-1--"
    bomb = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>'
    assert xml_fields(bomb) is None and xml_fields(b"not xml") is None


@pytest.fixture
def aws(moto: Moto) -> Moto:
    return moto


def test_iam_list_users_passes_and_create_user_is_answered_as_iam_answers(
    aws: Moto, queue: Queue, tmp_path: Path
) -> None:
    run, proposal_id, calls = dry_run(aws, queue, tmp_path, "iam", "iam")
    assert [call["tool"] for call in calls] == ["iam:CreateUser"], "the read is in the plan"
    assert calls[0]["effect"] == "create"
    iam = boto(aws, "iam")
    assert "night-shift" not in [user["UserName"] for user in iam.list_users()["Users"]]
    seen = child_saw(run, approve(queue, run, proposal_id), requests=2)
    assert "gate" in seen["users"], "ListUsers did not reach moto"
    assert seen["arn"] == "rvw--User-Arn--from-call-1--"
    assert iam.get_user(UserName="night-shift")["User"]["UserName"] == "night-shift"


def test_sts_get_caller_identity_is_a_read_and_makes_no_plan(aws: Moto, queue: Queue, tmp_path: Path) -> None:
    run = start(aws, queue, tmp_path, "sts", "sts")
    stdout, stderr = run.process.communicate(timeout=90)
    assert run.process.returncode == 0, stderr
    seen = child_saw(run, stdout, requests=1)
    assert seen["account"] == boto(aws, "sts").get_caller_identity()["Account"]
    assert "made no write" in stderr


def test_an_sns_topic_arn_chains_from_create_topic_to_publish_through_approval(
    aws: Moto, queue: Queue, tmp_path: Path
) -> None:
    run, proposal_id, calls = dry_run(aws, queue, tmp_path, "sns", "sns")
    assert [call["tool"] for call in calls] == ["sns:CreateTopic", "sns:Publish"]
    assert calls[1]["args"]["TopicArn"] == "<TopicArn from call 1>"
    sns = boto(aws, "sns")
    assert not [topic for topic in sns.list_topics()["Topics"] if topic["TopicArn"].endswith(":alerts")]
    seen = child_saw(run, approve(queue, run, proposal_id), requests=2)
    assert (seen["topic"], seen["message"]) == (
        "rvw--TopicArn--from-call-1--",
        "rvw--MessageId--from-call-2--",
    )
    assert [topic for topic in sns.list_topics()["Topics"] if topic["TopicArn"].endswith(":alerts")]


def test_an_sqs_queue_url_chains_from_create_queue_to_send_message_through_approval(
    aws: Moto, queue: Queue, tmp_path: Path
) -> None:
    run, proposal_id, calls = dry_run(aws, queue, tmp_path, "sqs", "sqs")
    assert [call["tool"] for call in calls] == ["sqs:CreateQueue", "sqs:SendMessage"]
    assert calls[1]["args"]["QueueUrl"] == "<QueueUrl from call 1>"
    sqs = boto(aws, "sqs")
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix="jobs"), "the dry run made the queue"
    since = len(aws.received())
    seen = child_saw(run, approve(queue, run, proposal_id), requests=2)
    assert writes(aws, since) == [
        "POST / AmazonSQS.CreateQueue",
        "POST / AmazonSQS.SendMessage",
    ], "each approved write is sent once"
    assert seen["url"] == "rvw--QueueUrl--from-call-1--"
    assert seen["message"] == "rvw--MessageId--from-call-2--"
    url = sqs.get_queue_url(QueueName="jobs")["QueueUrl"]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [message["Body"] for message in received] == ["go"]


def test_dynamodb_get_item_passes_and_put_and_delete_are_named_apart_and_sent_as_approved(
    aws: Moto, queue: Queue, tmp_path: Path
) -> None:
    table = boto(aws, "dynamodb")
    table.create_table(
        TableName="things",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    table.put_item(TableName="things", Item={"id": {"S": "kept"}})
    run, proposal_id, calls = dry_run(aws, queue, tmp_path, "dynamodb", "dynamodb")
    assert [call["tool"] for call in calls] == ["dynamodb:PutItem", "dynamodb:DeleteItem"]
    assert [call["effect"] for call in calls] == ["create", "delete"]
    assert "Item" in table.get_item(TableName="things", Key={"id": {"S": "kept"}})
    assert "Item" not in table.get_item(TableName="things", Key={"id": {"S": "new"}})
    since = len(aws.received())
    seen = child_saw(run, approve(queue, run, proposal_id), requests=3)
    assert seen["got"] == "kept", "GetItem did not reach moto"
    assert writes(aws, since) == [
        "POST / DynamoDB_20120810.PutItem",
        "POST / DynamoDB_20120810.DeleteItem",
    ], "each approved write is sent once"
    items = table.scan(TableName="things")["Items"]
    assert items == [{"id": {"S": "new"}}]


def test_s3_copy_object_with_encryption_tags_and_metadata_is_planned_and_copied_as_approved(
    bucket: Moto, queue: Queue, tmp_path: Path
) -> None:
    run, proposal_id, calls = dry_run(bucket, queue, tmp_path, "s3", "s3-copy")
    assert [call["tool"] for call in calls] == ["s3:CopyObject"]
    headers = calls[0]["request"]["headers"]
    assert headers["x-amz-copy-source"] == f"{BUCKET}/old.txt"
    assert headers["x-amz-server-side-encryption"] == "AES256"
    assert headers["x-amz-tagging"] == "team=ops"
    assert headers["x-amz-meta-owner"] == "night-shift"
    assert keys(bucket) == {"old.txt"}, "the dry run copied"
    since = len(bucket.received())
    seen = child_saw(run, approve(queue, run, proposal_id), requests=1)
    assert seen["copied"] == "rvw--ETag--from-call-1--"
    assert writes(bucket, since) == [f"PUT /{BUCKET}/copy.txt"], "the copy is sent once"
    s3 = boto(bucket, "s3")
    copy = s3.get_object(Bucket=BUCKET, Key="copy.txt")
    assert copy["Body"].read() == b"old", "the copy does not hold the source's bytes"
    assert copy["ServerSideEncryption"] == "AES256"
    assert copy["Metadata"] == {"owner": "night-shift"}
    tags = s3.get_object_tagging(Bucket=BUCKET, Key="copy.txt")["TagSet"]
    assert tags == [{"Key": "team", "Value": "ops"}]


def test_s3_delete_object_is_planned_and_deletes_once_approved(
    bucket: Moto, queue: Queue, tmp_path: Path
) -> None:
    run, proposal_id, calls = dry_run(bucket, queue, tmp_path, "s3", "s3-delete")
    assert [(call["tool"], call["effect"]) for call in calls] == [("s3:DeleteObject", "delete")]
    assert keys(bucket) == {"old.txt"}, "the dry run deleted"
    since = len(bucket.received())
    seen = child_saw(run, approve(queue, run, proposal_id), requests=1)
    assert seen["deleted"] == 204
    assert writes(bucket, since) == [f"DELETE /{BUCKET}/old.txt"], "the delete is sent once"
    assert keys(bucket) == set()


def test_a_put_object_retried_through_botocores_needs_retry_event_is_one_call_and_one_write(
    bucket: Moto, queue: Queue, tmp_path: Path
) -> None:
    run, proposal_id, calls = dry_run(bucket, queue, tmp_path, "s3", "s3-retry")
    assert [call["tool"] for call in calls] == ["s3:PutObject"], "the retry is a call of its own"
    assert keys(bucket) == {"old.txt"}
    since = len(bucket.received())
    seen = child_saw(run, approve(queue, run, proposal_id), requests=2)
    assert seen["put"] == f'"{hashlib.md5(b"hello").hexdigest()}"'
    assert writes(bucket, since) == [f"PUT /{BUCKET}/new.txt"], "the approved put is sent once"
    assert boto(bucket, "s3").get_object(Bucket=BUCKET, Key="new.txt")["Body"].read() == b"hello"


def test_ec2s_own_dry_run_verdict_is_read_as_validated_and_answered_as_run_instances(
    aws: Moto, queue: Queue, tmp_path: Path
) -> None:
    options = ("--via", "server", "--dry-run-param", "DryRun=true")
    run, proposal_id, calls = dry_run(aws, queue, tmp_path, "ec2", "ec2", *options)
    assert [call["tool"] for call in calls] == ["ec2:RunInstances"], "DescribeInstances is in the plan"
    outcome = calls[0]["outcome"]
    assert outcome["status"] == "ok" and "the API validated it" in outcome["message"], outcome
    assert boto(aws, "ec2").describe_instances()["Reservations"] == [], "the dry run started an instance"
    seen = child_saw(run, reject(queue, run, proposal_id), requests=2)
    assert seen["reservation"] == "rvw--reservationId--from-call-1--"


def test_only_ec2s_dry_run_operation_reads_as_validated_and_other_412s_stay_refusals() -> None:
    from reviewer.agent.backends import answer_from_response
    from reviewer.agent.dry_run_verdicts import dry_run_verdict

    def verdict(status: int, body: bytes) -> tuple[str, str | None]:
        response = httpx.Response(status, content=body)
        answer = dry_run_verdict(response, answer_from_response(response))
        return answer.status, answer.message

    validated = b"<Response><Errors><Error><Code>DryRunOperation</Code></Error></Errors></Response>"
    assert verdict(412, validated) == ("ok", "the API validated it (EC2 DryRunOperation)")
    unauthorized = b"<Response><Errors><Error><Code>UnauthorizedOperation</Code></Error></Errors></Response>"
    assert verdict(403, unauthorized)[0] == "refused"
    assert verdict(412, b"<Error><Code>PreconditionFailed</Code></Error>")[0] == "refused"


AWS_CLI = shutil.which("aws", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(
    AWS_CLI is None and not os.environ.get("CI"),
    reason="the AWS CLI is not installed: pip install awscli (the test extra has it)",
)
def test_the_aws_cli_put_object_as_the_docs_give_it_is_planned_and_written_once_approved(
    bucket: Moto, queue: Queue, tmp_path: Path
) -> None:
    """docs/any-language.md's `aws s3api put-object` line, as written, with the CLI's own retries: the
    child exits 0 in the dry run, the plan holds one `s3:PutObject` with the CLI's checksum, moto gets
    it once approved."""
    assert AWS_CLI is not None, "the AWS CLI is not installed; the test extra has it"
    (documented,) = documented_block(
        "any-language.md", "reviewer run --api https://s3.us-east-1.amazonaws.com"
    )
    words = shlex.split(
        as_run(documented, {"https://s3.us-east-1.amazonaws.com": bucket.url, "reports": BUCKET})
    )
    assert words[:2] == ["reviewer", "run"] and words[-3] == "sh", words
    # The CLI beside this Python, as the environment's PATH finds it; the queue, as any run is given one.
    (tmp_path / "today.txt").write_text("the day report")
    environment = {
        **os.environ,
        "PATH": f"{Path(AWS_CLI).parent}:{os.environ['PATH']}",
        "AWS_ACCESS_KEY_ID": bucket.key_id,
        "AWS_SECRET_ACCESS_KEY": bucket.secret,
        "AWS_EC2_METADATA_DISABLED": "true",
        "REVIEWER_AGENT_TOKEN": queue.agent_token,
    }
    run = launch_run(
        words[1 : words.index("--")]
        + ["--queue", queue.url, "--poll-interval", "0.1", *words[words.index("--") :]],
        environment,
        tmp_path,
    )
    proposal_id, revision = run.wait_for_plan()
    (call,) = proposal(queue, proposal_id, revision)["calls"]
    assert (call["tool"], call["request"]["path"]) == ("s3:PutObject", f"/{BUCKET}/today.txt")
    assert "x-amz-checksum-crc32" in call["request"]["headers"], "the CLI's checksum is not in the plan"
    assert keys(bucket) == {"old.txt"}, "the dry run wrote"
    since = len(bucket.received())
    printed = json.loads(approve(queue, run, proposal_id))
    assert printed["ETag"] == f'"{hashlib.md5(b"the day report").hexdigest()}"'
    assert writes(bucket, since) == [f"PUT /{BUCKET}/today.txt"], "the approved put is sent once"
    assert boto(bucket, "s3").get_object(Bucket=BUCKET, Key="today.txt")["Body"].read() == b"the day report"


NODE = shutil.which("node")
JS_SDK = ROOT / ".test-sdks" / "node_modules"


@pytest.mark.skipif(
    (NODE is None or not (JS_SDK / "@aws-sdk" / "client-s3").is_dir()) and not os.environ.get("CI"),
    reason="the AWS SDK for JavaScript is not installed: npm install --prefix .test-sdks @aws-sdk/client-s3 "
    "(.ci/run does)",
)
def test_the_javascript_sdks_put_then_copy_are_planned_by_operation_and_sent_once_approved(
    bucket: Moto, queue: Queue, tmp_path: Path
) -> None:
    """The AWS SDK for JavaScript v3 with its defaults: each answer parses at the first attempt, the
    plan names both writes with the copy's source and metadata, and the approved run copies the bytes
    its own put wrote."""
    assert NODE is not None, "node is not installed"
    agent = Path(__file__).with_name("aws_js_agent.cjs")
    environment = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": bucket.key_id,
        "AWS_SECRET_ACCESS_KEY": bucket.secret,
        "AWS_EC2_METADATA_DISABLED": "true",
        "REVIEWER_AGENT_TOKEN": queue.agent_token,
    }
    run = launch_run(
        ["run", "--api", bucket.url, "--queue", queue.url]
        + ["--readable", str(JS_SDK), "--api-auth", "aws-sigv4:s3:us-east-1", "--poll-interval", "0.1"]
        + ["--", NODE, str(agent), str(JS_SDK), BUCKET],
        environment,
        ROOT,
    )
    proposal_id, revision = run.wait_for_plan()
    put, copy = proposal(queue, proposal_id, revision)["calls"]
    assert (put["tool"], copy["tool"]) == ("s3:PutObject", "s3:CopyObject")
    assert copy["request"]["headers"]["x-amz-copy-source"] == f"{BUCKET}/js.txt"
    assert copy["request"]["headers"]["x-amz-meta-owner"] == "javascript"
    assert keys(bucket) == {"old.txt"}, "the dry run wrote"
    since = len(bucket.received())
    stdout = approve(queue, run, proposal_id)
    seen = json.loads(next(line for line in stdout.splitlines() if line.startswith("SEEN "))[5:])
    assert seen["attempts"] == [1, 1], "the SDK retried an answer it could not parse"
    assert seen["put"] == f'"{hashlib.md5(b"from javascript").hexdigest()}"'
    assert seen["copied"] == "rvw--ETag--from-call-2--"
    assert writes(bucket, since) == [
        f"PUT /{BUCKET}/js.txt?x-id=PutObject",
        f"PUT /{BUCKET}/js-copy.txt?x-id=CopyObject",
    ], "each approved write is sent once, with the query the SDK sent"
    s3 = boto(bucket, "s3")
    copied = s3.get_object(Bucket=BUCKET, Key="js-copy.txt")
    assert copied["Body"].read() == b"from javascript"
    assert copied["Metadata"] == {"owner": "javascript"}
