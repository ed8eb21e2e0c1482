"""An AWS API as botocore's service model describes it: which operation a request is, whether it reads
or writes, its name in the plan, and the answer a recorded write gets in the protocol its client parses.

The service is the one `--api-auth aws-sigv4:SERVICE:REGION` signs for, its model the one botocore
ships (the `aws` extra): nothing here is a table of AWS operations. A request names its operation
as its protocol says: by the `X-Amz-Target` header (`json`: DynamoDB, SQS), by the `Action` field of
its form or query (`query`: IAM, STS, SNS; `ec2`), or by its method and path matched against the
operations' `requestUri` (`rest-xml`: S3; `rest-json`), the most specific match winning (S3's
`PUT /{Bucket}/{Key+}` is UploadPart with `partNumber` and `uploadId`, CopyObject with
`x-amz-copy-source`, else PutObject).

Reads are the operations named List, Get, Describe or Head (botocore's models mark no operation
read-only): they pass through, whatever their method (IAM ListUsers and DynamoDB GetItem are POSTs).
Any other operation is a write, named `PREFIX:Operation` (`s3:CopyObject`, `dynamodb:DeleteItem`),
with the effect its verb says (`effect_of`). A request no operation matches is left to the gate's
default (its method), so a model older than the API never stops an agent.

A recorded write is answered with the operation's output as its protocol writes it, holding only what
the gate can stand behind (`_Template`): a member the request carried under the same name keeps that
value (S3's `Bucket` and `Key`); an identifying member (a name ending in Id, Arn, Url or ETag: the
multipart `UploadId`, SNS's `TopicArn`, SQS's `QueueUrl`) or a required text member is a placeholder
the plan records as the call's produced value, which later calls carry and the real run resolves;
an optional structure only at the top and when it holds an identifying member (IAM's `User`);
anything else is left out, as every botocore parser allows. One value is known without the real
write: S3's `ETag` header of an object or part written in one request is the MD5 of its bytes (for
the default encryption), which the child must send back in CompleteMultipartUpload's XML, where no
placeholder could be filled in.

The placeholders' paths are written as the real answer is read (`reviewer.agent.xml_answers`): XML
by element names below the document (and below a query protocol's `...Result`), JSON by member names.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final
from xml.sax.saxutils import escape

from reviewer.plan.proposal import Effect
from reviewer.run.answers import Rendered
from reviewer.run.calls import GateCall

READS: Final = ("List", "Get", "Describe", "Head")
"""The verbs of the operations that only read."""
DELETES: Final = ("Delete", "Remove", "Terminate")
CREATES: Final = ("Create", "Put", "Run", "Copy", "Upload", "Send", "Publish")
IDENTIFYING: Final = re.compile(r"(?:Id|ID|Arn|ARN|Url|URL|ETag)$")
"""An output member that names what the write made: later calls use it, so it is a placeholder."""
_MAX_DEPTH: Final = 4
_REQUEST_ID: Final = "reviewer-dry-run"
_FORM: Final = "application/x-www-form-urlencoded"


def effect_of(operation: str) -> Effect:
    """An operation's effect by its verb: a read, a delete (Delete, Remove, Terminate), a create
    (Create, Put, Run, Copy, Upload, Send, Publish: each makes something new, or a new version of it),
    else an update. The verb is AWS's own naming rule, so one rule covers every service. The plan raises
    it to what the method does at least (`proposal.raised_effect`): S3's PutObject, a PUT, is an update."""
    if operation.startswith(READS):
        return "read"
    if operation.startswith(DELETES):
        return "delete"
    if operation.startswith(CREATES):
        return "create"
    return "update"


@dataclass(frozen=True)
class _Leaf:
    """A text member of an answer: the request's value when it carried one, else the placeholder at
    `path`, found in the result by that path."""

    path: str
    carried: str | None = None


@dataclass(frozen=True)
class _Template:
    """What an answer holds, by element (XML) or member (JSON) name, in the model's order."""

    members: dict[str, _Leaf | _Template] = field(default_factory=dict)

    def leaves(self) -> list[_Leaf]:
        found: list[_Leaf] = []
        for member in self.members.values():
            found += member.leaves() if isinstance(member, _Template) else [member]
        return found

    def filled(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The answer's members with values: the carried ones, and those `values` (by path) holds."""
        out: dict[str, Any] = {}
        for name, member in self.members.items():
            if isinstance(member, _Template):
                inner = member.filled(values)
                if inner:
                    out[name] = inner
            elif member.carried is not None:
                out[name] = member.carried
            elif isinstance(values.get(member.path), str | int | float):
                out[name] = str(values[member.path])
        return out


def _template(shape: Any, carried: Mapping[str, str], prefix: str, depth: int) -> _Template:
    members: dict[str, _Leaf | _Template] = {}
    required = set(getattr(shape, "required_members", ()) or ())
    for name, member in getattr(shape, "members", {}).items():
        if member.serialization.get("location"):
            continue  # headers and the status code: not the body's
        key = str(member.serialization.get("name") or name)
        path = f"{prefix}{key}"
        if member.type_name == "string":
            if name in carried:
                members[key] = _Leaf(path, carried[name])
            elif name in required or IDENTIFYING.search(name):
                members[key] = _Leaf(path)
        elif member.type_name == "structure" and depth < _MAX_DEPTH:
            inner = _template(member, carried, f"{path}.", depth + 1)
            identifying = any(IDENTIFYING.search(leaf.path.rsplit(".", 1)[-1]) for leaf in inner.leaves())
            if inner.members and (name in required or (identifying and depth == 0)):
                members[key] = inner
    return _Template(members)


@dataclass(frozen=True)
class AwsOperation:
    """One request, as the operation of the model it is."""

    prefix: str
    model: Any
    protocol: str
    """The protocol the request was sent in, the answer's too: `rest-xml`, `rest-json`, `query`,
    `ec2` or `json`."""
    carried: Mapping[str, str]
    body_md5: str
    namespace: str | None
    json_version: str

    @property
    def name(self) -> str:
        return str(self.model.name)

    @property
    def effect(self) -> Effect:
        return effect_of(self.name)

    @property
    def is_read(self) -> bool:
        return self.effect == "read"

    def _body_shape(self) -> tuple[str | None, Any]:
        """The element the answer's body is written in and the shape it holds; (None, None) when the
        output has no body."""
        output = self.model.output_shape
        if output is None:
            return None, None
        if self.protocol not in ("rest-xml", "rest-json"):
            return output.serialization.get("resultWrapper") or f"{self.name}Result", output
        payload = output.serialization.get("payload")
        if payload:
            member = output.members[payload]
            if member.type_name != "structure":
                return None, None
            return str(member.serialization.get("name") or payload), member
        if not any(not member.serialization.get("location") for member in output.members.values()):
            return None, None
        return str(output.serialization.get("name") or f"{self.name}Result"), output

    def template(self) -> _Template:
        _, shape = self._body_shape()
        return _template(shape, self.carried, "", 0) if shape is not None else _Template()

    def produces(self) -> tuple[str, ...]:
        """The paths of the answer's placeholders: what the plan records the call produces."""
        return tuple(leaf.path for leaf in self.template().leaves() if leaf.carried is None)

    def named(self, call: GateCall) -> GateCall:
        """`call` named by this operation, producing its placeholders, answered in its protocol."""
        return replace(
            call,
            tool=f"{self.prefix}:{self.name}",
            effect=self.effect,
            produces=self.produces(),
            answer_form=self.answer,
        )

    def answer(self, result: Any) -> Rendered:
        """The answer the child's client parses, from the result the plan holds for this call (its
        placeholders, minted, by path; or the real answer's fields)."""
        values = _flattened(result)
        root, _ = self._body_shape()
        members = self.template().filled(values)
        status = int(self.model.http.get("responseCode", 200))
        headers = self._headers()
        if self.protocol == "json":
            return Rendered(status, f"application/x-amz-json-{self.json_version}", _json(members), headers)
        if self.protocol == "rest-json":
            return Rendered(status, "application/json", _json(members) if root else b"", headers)
        xmlns = f' xmlns="{escape(self.namespace, {chr(34): "&quot;"})}"' if self.namespace else ""
        if self.protocol == "rest-xml":
            if root is None:
                return Rendered(status, None, b"", headers)
            return Rendered(status, "application/xml", _document(root, xmlns, _xml(members)), headers)
        response = f"{self.name}Response"
        if self.protocol == "ec2":
            inner = f"<requestId>{_REQUEST_ID}</requestId>{_xml(members)}"
        else:
            result = f"<{root}>{_xml(members)}</{root}>" if root else ""
            inner = f"{result}<ResponseMetadata><RequestId>{_REQUEST_ID}</RequestId></ResponseMetadata>"
        return Rendered(status, "text/xml", _document(response, xmlns, inner), headers)

    def _headers(self) -> dict[str, str]:
        """The one header member the gate knows: an S3 write's `ETag`, the MD5 of the bytes it sent."""
        output = self.model.output_shape
        if self.protocol != "rest-xml" or output is None:
            return {}
        located = {member.serialization.get("name") for member in output.members.values()}
        return {"ETag": f'"{self.body_md5}"'} if "ETag" in located else {}


def _document(root: str, xmlns: str, inner: str) -> bytes:
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<{root}{xmlns}>{inner}</{root}>'.encode()


def _xml(members: Mapping[str, Any]) -> str:
    return "".join(
        f"<{name}>{_xml(value) if isinstance(value, Mapping) else escape(value)}</{name}>"
        for name, value in members.items()
    )


def _json(members: Mapping[str, Any]) -> bytes:
    return json.dumps(members, separators=(",", ":")).encode()


def _flattened(result: Any, prefix: str = "") -> dict[str, Any]:
    """A result by dotted path (`{"User": {"Arn": ...}}` as `User.Arn`); keys already dotted stay."""
    if not isinstance(result, Mapping):
        return {}
    flat: dict[str, Any] = {}
    for key, value in result.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flattened(value, f"{path}."))
        else:
            flat[path] = value
    return flat


@dataclass(frozen=True)
class _Route:
    """A REST operation's method, path pattern, and what its request must carry to be it."""

    model: Any
    method: str
    pattern: re.Pattern[str]
    query: tuple[tuple[str, str | None], ...]
    """Query keys the `requestUri` names (`?uploads`, `?list-type=2`), with the value it gives."""
    required_query: tuple[str, ...]
    required_headers: tuple[str, ...]

    def matches(self, method: str, path: str, query: Mapping[str, Any], headers: Mapping[str, str]) -> bool:
        if method != self.method or self.pattern.fullmatch(path) is None:
            return False
        for key, value in self.query:
            if key not in query or (value is not None and _first(query[key]) != value):
                return False
        return all(key in query for key in self.required_query) and all(
            name in headers for name in self.required_headers
        )

    @property
    def specificity(self) -> int:
        return len(self.query) + len(self.required_query) + len(self.required_headers)


def _route(model: Any) -> _Route:
    uri, _, literal = str(model.http.get("requestUri", "/")).partition("?")
    pattern = ""
    for index, piece in enumerate(re.split(r"\{([^{}]+)\}", uri)):
        if index % 2:
            greedy = piece.endswith("+")
            name = re.sub(r"\W", "_", piece.rstrip("+"))
            pattern += f"(?P<{name}>.+)" if greedy else f"(?P<{name}>[^/]+)"
        else:
            pattern += re.escape(piece)
    if not pattern.endswith("/"):
        pattern += "/?"
    literals = tuple(
        (key, value if equals else None)
        for key, equals, value in (item.partition("=") for item in literal.split("&") if item)
    )
    shape = model.input_shape
    required = set(getattr(shape, "required_members", ()) or ())
    members = getattr(shape, "members", {})
    located = [
        (member.serialization.get("location"), str(member.serialization.get("name") or name))
        for name, member in members.items()
        if name in required
    ]
    return _Route(
        model,
        str(model.http.get("method", "POST")).upper(),
        re.compile(pattern),
        literals,
        tuple(name for location, name in located if location == "querystring"),
        tuple(name.lower() for location, name in located if location == "header"),
    )


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else value


class AwsApi:
    """One AWS service's model: the operation each request to it is (see the module)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.prefix = str(model.endpoint_prefix)
        self.protocol = str(model.protocol)
        self._routes: list[_Route] | None = None

    @classmethod
    def load(cls, service: str) -> AwsApi | None:
        """The model of the service signed for as `service` (a signing name: `s3`, `iam`, `sqs`), or
        None when botocore is missing or has no such model (the gate then answers as for any API)."""
        try:
            import botocore.exceptions
            import botocore.session
        except ImportError:
            return None
        session = botocore.session.get_session()
        try:
            return cls(session.get_service_model(service))
        except botocore.exceptions.UnknownServiceError:
            pass
        for name in session.get_available_services():  # a signing name that is not the model's name
            model = session.get_service_model(name)
            if model.signing_name == service:
                return cls(model)
        return None

    def routes(self) -> list[_Route]:
        if self._routes is None:
            self._routes = [_route(self.model.operation_model(name)) for name in self.model.operation_names]
        return self._routes

    def operation_of(
        self, method: str, path: str, query: Mapping[str, Any], headers: Mapping[str, str], body: bytes
    ) -> AwsOperation | None:
        """The operation a request is, with what it carried; None when the model names none.
        `headers` by lower-case name."""
        carried: dict[str, str] = {}
        model: Any = None
        protocol = self.protocol
        target = headers.get("x-amz-target", "")
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if target:
            model = self._named(target.rpartition(".")[2])
            protocol = "json"
            try:
                decoded = json.loads(body or b"{}")
            except ValueError:
                decoded = {}
            if isinstance(decoded, dict):
                carried = {key: value for key, value in decoded.items() if isinstance(value, str)}
        elif "Action" in query or content_type == _FORM:
            fields = dict(urllib.parse.parse_qsl(body.decode("latin-1"))) if content_type == _FORM else {}
            fields = {**{key: str(_first(value)) for key, value in query.items()}, **fields}
            model = self._named(fields.get("Action", ""))
            protocol = "ec2" if self.protocol == "ec2" else "query"
            carried = {key: value for key, value in fields.items() if key not in ("Action", "Version")}
        if model is None and self.protocol.startswith("rest-"):
            matching = [route for route in self.routes() if route.matches(method, path, query, headers)]
            if matching:
                best = max(matching, key=lambda route: route.specificity)
                model = best.model
                found = best.pattern.fullmatch(path)
                carried = {
                    key: urllib.parse.unquote(value)
                    for key, value in (found.groupdict() if found else {}).items()
                }
        if model is None:
            return None
        return AwsOperation(
            prefix=self.prefix,
            model=model,
            protocol=protocol,
            carried=carried,
            body_md5=hashlib.md5(body, usedforsecurity=False).hexdigest(),
            namespace=self.model.metadata.get("xmlNamespace"),
            json_version=str(self.model.metadata.get("jsonVersion") or "1.0"),
        )

    def _named(self, name: str) -> Any:
        return self.model.operation_model(name) if name in self.model.operation_names else None


def aws_api_of(auth: object) -> AwsApi | None:
    """The AWS model of the service `--api-auth aws-sigv4:SERVICE:REGION` signs for; None for any
    other credential."""
    from reviewer.agent.request_auth import AwsSigV4Auth

    return AwsApi.load(auth.service) if isinstance(auth, AwsSigV4Auth) else None
