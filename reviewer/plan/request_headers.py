"""The headers of a write that carry meaning: what the plan holds, the reviewer reads and the real run sends.

One rule, everywhere: a request's headers are part of what it asks for, except those of the transport,
of authentication and of the client's own bookkeeping. S3's CopyObject names its source only in
`x-amz-copy-source`, a DynamoDB call its operation only in `X-Amz-Target`, and encryption, ACLs, tags,
metadata and `Cache-Control` travel in headers too; a plan without them approves another request than
the one sent. Dropped, by name (lower case):

- transport, hop by hop or the HTTP client's to write: `Connection`, `Keep-Alive`, `Proxy-Connection`,
  `Transfer-Encoding`, `TE`, `Trailer`, `Upgrade`, `Host`, `Content-Length`, `Expect`, `Accept-Encoding`;
- how the answer is written, not what is written (`Accept`, `Accept-Language`): the gate answers the
  child itself;
- authentication: `Authorization`, `Proxy-Authorization`, `Cookie`, and the signature's own
  `x-amz-date`, `x-amz-content-sha256`, `x-amz-security-token` (the executor signs with its own
  credential and clock), with any header the executor's client sets itself (its credential);
- the client's bookkeeping: `User-Agent`, `x-amz-user-agent`, `amz-sdk-invocation-id`, `amz-sdk-request`,
  `X-Stainless-*`, the request id the executor stamps on each request, and `Idempotency-Key`: it makes
  an SDK's retries one request (the gate records a retry once, `reviewer.run.retries`), but the real run
  must not send the dry run's key, which an API that remembers keys (Stripe) would answer with the dry
  run's answer instead of writing;
- `Content-Type`: the call's `content_type` holds it, beside the body it describes.

Every other header is kept, its name lower case: every other `x-amz-*`, `Content-MD5`, `Cache-Control`,
`Content-Disposition`, `Content-Encoding`, `Expires`, `If-*` and an API's own (`Stripe-Version`). A name
sent twice is one header, its values joined by `, ` as HTTP reads them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

TRANSPORT: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "host",
        "content-length",
        "expect",
        "accept-encoding",
        "accept",
        "accept-language",
    }
)
AUTHENTICATION: Final = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "x-amz-date",
        "x-amz-content-sha256",
        "x-amz-security-token",
    }
)
BOOKKEEPING: Final = frozenset(
    {"user-agent", "x-amz-user-agent", "amz-sdk-invocation-id", "amz-sdk-request", "idempotency-key"}
)
BOOKKEEPING_PREFIXES: Final = ("x-stainless-",)
HELD_ELSEWHERE: Final = frozenset({"content-type"})
DROPPED: Final = TRANSPORT | AUTHENTICATION | BOOKKEEPING | HELD_ELSEWHERE

_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9a-z]+")
MAX_HEADERS: Final = 100


class HeaderError(ValueError):
    """A header a plan cannot hold or a request cannot send; the message names it."""


def is_dropped(name: str, also: Iterable[str] = ()) -> bool:
    """Whether the header `name` is left out of the plan (see the module); `also` names more to drop
    (the executor's request-id header, its credential's headers), in any case."""
    lowered = name.lower()
    return (
        lowered in DROPPED
        or lowered.startswith(BOOKKEEPING_PREFIXES)
        or lowered in {other.lower() for other in also}
    )


def meaningful_headers(sent: Iterable[tuple[str, str]], also: Iterable[str] = ()) -> dict[str, str]:
    """The headers of `sent` (name and value pairs, as received) the plan holds, by lower-case name in
    the order first sent; `also` as `is_dropped` takes it."""
    dropped = {name.lower() for name in also}
    kept: dict[str, str] = {}
    for name, value in sent:
        lowered = name.lower()
        if is_dropped(lowered, dropped):
            continue
        kept[lowered] = f"{kept[lowered]}, {value}" if lowered in kept else value
    return kept


def check_headers(headers: Mapping[str, object], also: Iterable[str] = ()) -> None:
    """Refuse (`HeaderError`) headers a plan may not hold: a name that is not a lower-case HTTP token or
    that the rule drops (a plan cannot carry its own `Authorization` or `Host`), a value that is not
    text a header line carries (a line break would start another header), or too many."""
    if len(headers) > MAX_HEADERS:
        raise HeaderError(f"{len(headers)} headers; a call holds at most {MAX_HEADERS}")
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise HeaderError(f"{name[:80]!r} is not a header name in lower case")
        if is_dropped(name, also):
            raise HeaderError(
                f"{name!r} is transport, authentication or the client's bookkeeping: the executor "
                "writes it, a plan does not hold it"
            )
        if not isinstance(value, str) or not all(" " <= char <= "~" or char == "\t" for char in value):
            raise HeaderError(f"the value of {name!r} is not printable ASCII text a header line carries")
