"""A successful answer written in XML (S3, IAM, SNS, EC2), read as fields, so a placeholder for a value
it holds (`<UploadId from call 1>`, `<TopicArn from call 2>`) is resolved in the real run as one in a
JSON answer is.

The fields are the elements below the document's own: each element with children an object, each
other its text, an element repeated a list; namespaces are dropped. AWS's query protocol wraps the
fields in `OperationResponse` / `OperationResult` beside its `ResponseMetadata`: they are read from
inside the `...Result`. This is the reading `reviewer.run.aws_protocols` writes its placeholders' paths
for. A document that does not parse, or that declares a DTD (entities expand beyond any limit), is no
fields (None): the answer stays its text.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from typing import Any, Final

_XML_START: Final = (b"<?xml", b"<")


def xml_fields(content: bytes) -> dict[str, Any] | None:
    """The fields of an XML answer (see the module), or None when `content` is not such a document."""
    text = content.lstrip()
    if not text.startswith(_XML_START) or b"<!DOCTYPE" in text or b"<!ENTITY" in text:
        return None
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError:
        return None
    if _name(root).endswith("Response"):
        results = [child for child in root if _name(child).endswith("Result")]
        if len(results) == 1:
            root = results[0]
    value = _value(root)
    return value if isinstance(value, dict) else {}


def _name(element: ElementTree.Element) -> str:
    return element.tag.rpartition("}")[2]


def _value(element: ElementTree.Element) -> Any:
    children = list(element)
    if not children:
        return element.text or ""
    fields: dict[str, Any] = {}
    for child in children:
        name, value = _name(child), _value(child)
        if name not in fields:
            fields[name] = value
        elif isinstance(fields[name], list):
            fields[name].append(value)
        else:
            fields[name] = [fields[name], value]
    return fields
