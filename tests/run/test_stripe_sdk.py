"""Stripe's own Python SDK under `reviewer run`, against localstripe (a local server that answers as
Stripe's API does), set up as docs/any-language.md gives it: Stripe is not AWS, so the gate answers a
recorded create with its generic JSON and a minted id. The SDK percent-encodes that id into the path of
the next call, which the plan shows as `<id from call 1>`, and the approved run sends with the id the
real create answered."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.run.harness import ROOT, Queue, launch_run, proposal, reviewer_decides
from tests.service.ports import free_port

LOCALSTRIPE = shutil.which("localstripe", path=str(Path(sys.executable).parent))
KEY = "sk_test_held_by_the_gate"
AGENT = textwrap.dedent(
    """
    import json, os
    import stripe
    stripe.api_base = os.environ["REVIEWER_API_URL"]
    stripe.api_key = "sk_test_child_holds_no_key"
    created = stripe.Customer.create(email="night@example.com", name="Night Shift")
    modified = stripe.Customer.modify(created.id, name="Night Shift Ops", metadata={"team": "ops"})
    print("SEEN", json.dumps({"created": created.id, "modified": modified.id}), flush=True)
    """
)

pytestmark = pytest.mark.skipif(
    LOCALSTRIPE is None and not os.environ.get("CI"),
    reason="localstripe is not installed: pip install localstripe (the test extra has it)",
)


@pytest.fixture
def localstripe(tmp_path: Path) -> Iterator[str]:
    """localstripe on a free port, with no customers; its URL."""
    assert LOCALSTRIPE is not None, "localstripe is not installed; the test extra has it"
    port = free_port()
    process = subprocess.Popen(
        [LOCALSTRIPE, "--port", str(port), "--from-scratch"],
        stdout=(tmp_path / "localstripe.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            with contextlib.suppress(httpx.TransportError):
                customers(url)
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def customers(url: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{url}/v1/customers", headers={"Authorization": f"Bearer {KEY}"}, timeout=5)
    assert answer.status_code == 200, answer.text
    listed: list[dict[str, Any]] = answer.json()["data"]
    return listed


def test_stripes_sdk_creates_then_modifies_what_it_created_through_approval(
    localstripe: str, queue: Queue, tmp_path: Path
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    environment = {
        **os.environ,
        "STRIPE_KEY": KEY,
        "REVIEWER_AGENT_TOKEN": queue.agent_token,
        "PYTHONUNBUFFERED": "1",
    }
    run = launch_run(
        ["run", "--api", localstripe, "--queue", queue.url]
        + ["--api-header", "Authorization: Bearer env:STRIPE_KEY", "--readable", str(tmp_path)]
        + ["--poll-interval", "0.1", "--", sys.executable, str(agent)],
        environment,
        ROOT,
    )
    proposal_id, revision = run.wait_for_plan()
    create, modify = proposal(queue, proposal_id, revision)["calls"]
    assert (create["request"]["method"], create["request"]["path"]) == ("POST", "/v1/customers")
    assert create["effect"] == "create"
    assert (modify["request"]["method"], modify["request"]["path"]) == (
        "POST",
        "/v1/customers/<id from call 1>",
    )
    assert modify["effect"] == "update", "a POST to the customer call 1 created is an update of it"
    assert customers(localstripe) == [], "the dry run created a customer"
    reviewer_decides(queue, proposal_id)
    stdout, rest = run.process.communicate(timeout=90)
    assert run.process.returncode == 0, "".join(run.lines) + rest
    seen = json.loads(next(line for line in stdout.splitlines() if line.startswith("SEEN "))[5:])
    # Without an API description a POST is a create, answered with an id of its own: a later call that
    # carried it would be sent with the id the real modify answered, the same customer's.
    assert seen == {"created": "rvw--id--from-call-1--", "modified": "rvw--id--from-call-2--"}
    (customer,) = customers(localstripe)
    assert (customer["email"], customer["name"]) == ("night@example.com", "Night Shift Ops")
    assert customer["metadata"] == {"team": "ops"}
