"""The pages' rate limit, on an injected clock: a minute's allowance per address, then 429 with the
seconds to wait, and a fresh allowance the next minute."""

from __future__ import annotations

import pytest

from reviewer.service.web.limits import RateLimit, TooManyRequests


def test_an_address_past_its_allowance_waits_for_the_next_minute_and_others_do_not() -> None:
    now = [1000.0]
    limit = RateLimit(3, lambda: now[0])
    for _ in range(3):
        limit.check("10.0.0.1")
    now[0] += 20
    with pytest.raises(TooManyRequests) as refused:
        limit.check("10.0.0.1")
    assert refused.value.status == 429 and refused.value.retry_after == 40
    assert "more than 3 requests a minute from this address; try again in 40 s" in refused.value.message
    limit.check("10.0.0.2")
    now[0] += 40
    limit.check("10.0.0.1")
