"""The README's shortest gated agent runs as printed (only the two URLs point at the test's services)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.agent.helpers import received, reviewer_decides_next

README = Path(__file__).resolve().parents[2] / "README.md"


def shortest_example() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("```python\n", text.index("## Gate your agent")) + len("```python\n")
    return text[start : text.index("```\n", start)]


def test_the_shortest_example_closes_t1_once_after_approval(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    code = shortest_example().replace("http://127.0.0.1:8480", sample_api.base_url)
    code = code.replace("http://127.0.0.1:8470", queue.url)
    agent = subprocess.Popen(
        [sys.executable, "-c", code],
        env={**os.environ, "REVIEWER_AGENT_TOKEN": queue.agent_token},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        asyncio.run(reviewer_decides_next(queue.url, queue.reviewer_token, "agent", "approve"))
        _, errors = agent.communicate(timeout=60)
    finally:
        agent.kill()
    assert agent.returncode == 0, errors
    # The default dry run only records: the API receives the write once, after approval.
    assert [(entry["method"], entry["path"], entry["query"]) for entry in received(sample_api)] == [
        ("PATCH", "/v1/tickets/t1", {}),
    ]
    assert sample_api.store.tickets["t1"]["status"] == "closed"
