"""What `reviewer mcp-gate` costs a host: start to tools listed, and one call, through the gate and direct.

Prints figures; no assertion. The upstream is the tests' small ticket server; the gate needs no queue
until a plan is submitted, so none runs here.

    python bench/bench_mcp_gate.py [CALLS]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = [sys.executable, str(ROOT / "tests" / "adapters" / "upstream_server.py")]
GATE = [sys.executable, "-m", "reviewer", "mcp-gate", "--"]


async def measure(command: list[str], calls: int) -> dict[str, float]:
    parameters = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env={"REVIEWER_AGENT_TOKEN": "bench-token-not-used"},
        cwd=str(ROOT),
    )
    started = time.perf_counter()
    async with Client(parameters, read_timeout_seconds=60) as host:
        await host.list_tools()
        listed = time.perf_counter() - started
        figures = {"start to tools listed (s)": listed}
        for name, arguments in (("list_tickets", {}), ("close_ticket", {"id": "t1"})):
            times = []
            for _ in range(calls):
                begin = time.perf_counter()
                await host.call_tool(name, arguments)
                times.append(time.perf_counter() - begin)
            figures[f"{name} median (ms)"] = statistics.median(times) * 1000
    return figures


async def main(calls: int) -> None:
    direct = await measure(UPSTREAM, calls)
    gated = await measure(GATE + UPSTREAM, calls)
    print(f"{calls} calls of each tool; close_ticket is recorded by the gate, sent by the direct host")
    print(f"{'':32} {'direct':>10} {'gated':>10}")
    for key in direct:
        print(f"{key:32} {direct[key]:10.2f} {gated[key]:10.2f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
