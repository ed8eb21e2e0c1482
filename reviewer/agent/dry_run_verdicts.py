"""An API's own dry-run verdict, read as that API means it.

Most APIs answer a valid dry run as they answer the write, with a 2xx. EC2 answers it with an error:
412 `DryRunOperation`, "Request would have succeeded, but DryRun flag is set". Read as an HTTP status
it is a refusal, and the review would say the real run will be refused too; it says the opposite:
the API validated the request. Only a server dry run's answer is read this way (`ServerBackend`): a
real write that meets this answer did not happen, and stays what its status says.
"""

from __future__ import annotations

from typing import Final

import httpx

from reviewer.agent.http_values import CallAnswer

VALIDATED: Final = "the API validated it"
_EC2_VALIDATED: Final = b"<Code>DryRunOperation</Code>"


def dry_run_verdict(response: httpx.Response, answer: CallAnswer) -> CallAnswer:
    """`answer`, or, when `response` is an API's way of saying its dry run would have succeeded, an
    accepted answer (200, no result: what the write produces is only a placeholder yet) saying so."""
    if response.status_code == 412 and _EC2_VALIDATED in response.content[:4096]:
        return CallAnswer("ok", 200, f"{VALIDATED} (EC2 DryRunOperation)", None)
    return answer
