"""`reviewer serve`'s "listening on" line is true the moment it is printed: scripts and supervisors
wait for it, then connect."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

from tests.queue_harness import reviewer_command
from tests.service.ports import free_port


def test_a_service_stopped_the_moment_it_says_it_listens_accepts_a_connection(tmp_path: Path) -> None:
    """Stopped (SIGSTOP) as the line arrives, the service has done nothing more; the kernel still takes
    the connection into its backlog. A socket bound but not yet listening refuses it: between the line
    and uvicorn's own `listen` were start-up's collection and the server's set-up."""
    port = free_port()
    process = subprocess.Popen(
        [*reviewer_command("serve", "--db", str(tmp_path / "queue.sqlite3"), "--port", str(port))],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        said = []
        for line in process.stderr:
            said.append(line)
            if "listening on" in line:
                os.kill(process.pid, signal.SIGSTOP)
                break
        assert "listening on" in said[-1], "".join(said)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        os.kill(process.pid, signal.SIGCONT)
        process.terminate()
        process.wait(timeout=30)
