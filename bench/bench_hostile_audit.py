"""The audit readers on sources made to hang them or eat memory: `/dev/zero` behind a symlink, a FIFO
nobody writes, one line nested 2,000 deep and one line of 100 MB, next to a small honest log.

Run: `.venv/bin/python bench/bench_hostile_audit.py`. Each source is read with `access-log:` (the
two hostile lines with `cloudtrail:` too, which reads a file as one document) and matched
(`match_audit`) in a fresh process, which prints how the read ended (its clear word), the seconds it
took, and its peak resident memory (VmHWM, as `bench/peak_memory.py` reads it), one JSON object a
line. The honest log's peak is the baseline: a reader whose memory followed its input would stand
out by the size of the input. It prints figures and asserts nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.peak_memory import peak_rss_bytes

START = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
HUGE_LINE_BYTES = 100 * 1024 * 1024
DEEP_LEVELS = 2_000


def honest_line(second: int) -> str:
    time_text = (START + timedelta(seconds=second)).isoformat()
    return json.dumps(
        {"time": time_text, "method": "POST", "uri": "/v1/tickets", "status": 201, "request_id": f"r{second}"}
    )


def make_sources(folder: Path) -> dict[str, Path]:
    """The sources by name; the two files with a hostile line hold an honest line after it, which a
    reader that survives the hostile one still reads."""
    honest = folder / "honest.log"
    honest.write_text("".join(honest_line(second) + "\n" for second in range(100)), encoding="utf-8")
    zero = folder / "zero.log"
    zero.symlink_to("/dev/zero")
    fifo = folder / "fifo.log"
    os.mkfifo(fifo)
    deep = folder / "deep.log"
    deep.write_text(
        '{"time": ' + "[" * DEEP_LEVELS + "]" * DEEP_LEVELS + "}\n" + honest_line(1) + "\n", encoding="utf-8"
    )
    huge = folder / "huge.log"
    with huge.open("wb") as file:  # sparse: 100 MB of NUL bytes on one line, then an honest line
        file.truncate(HUGE_LINE_BYTES)
        file.seek(HUGE_LINE_BYTES)
        file.write(b"\n" + honest_line(2).encode() + b"\n")
    return {"honest": honest, "/dev/zero": zero, "fifo": fifo, "2,000 deep": deep, "100 MB line": huge}


READS = [
    ("honest", "access-log"),
    ("/dev/zero", "access-log"),
    ("fifo", "access-log"),
    ("2,000 deep", "access-log"),
    ("100 MB line", "access-log"),
    ("2,000 deep", "cloudtrail"),
    ("100 MB line", "cloudtrail"),
]
"""Each source with the kind it is read as: `cloudtrail:` reads a file as one document."""


def read_one(spec: str) -> dict[str, object]:
    """One source read to its end, or refused, in this process: how it ended and what it cost."""
    from reviewer.audit.inputs import AuditSourceUnreadable
    from reviewer.audit.matching import Window, match_audit
    from reviewer.audit.registry import audit_source

    started = time.perf_counter()
    try:
        result = match_audit([], audit_source(spec).rows(), Window(START, START))
    except AuditSourceUnreadable as error:
        ended = f"could not be read: {error}"
    else:
        problems = sorted({line.problem for line in result.malformed})
        ended = f"{result.rows_read} rows read, {result.malformed_count} lines could not be read" + (
            f" ({'; '.join(problems)})" if problems else ""
        )
    return {
        "ended": ended,
        "seconds": round(time.perf_counter() - started, 3),
        "peak_rss_bytes": peak_rss_bytes(),
    }


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(read_one(sys.argv[2])))
        return
    with tempfile.TemporaryDirectory(prefix="hostile-audit-") as directory:
        sources = make_sources(Path(directory))
        for name, kind in READS:
            done = subprocess.run(
                [sys.executable, __file__, "--one", f"{kind}:{sources[name]}"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            figures = json.loads(done.stdout) if done.returncode == 0 else {"failed": done.stderr[-2000:]}
            print(json.dumps({"source": name, "kind": kind, **figures}))


if __name__ == "__main__":
    main()
