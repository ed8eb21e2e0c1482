"""An answer written in the API's own protocol, and what writes it: the seam between the gate and the
readers of API descriptions.

The gate answers a recorded write with JSON unless the call's description knows the form its client
parses (`reviewer.run.aws_protocols`: XML for S3, IAM, SNS, EC2). Such a call carries an `AnswerForm`:
given the result the plan holds for the call (its placeholders minted, or the real answer's fields in
a real run), it writes the exact bytes the child gets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Rendered:
    """An answer's exact status, content type, bytes and headers."""

    status: int
    content_type: str | None
    content: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


class AnswerForm(Protocol):
    """Writes a call's answer in its API's protocol from the result the plan holds for it."""

    def __call__(self, result: Any) -> Rendered: ...
