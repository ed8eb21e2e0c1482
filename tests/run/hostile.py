"""A child that tries everything an unprivileged process of the operator's user could to get past the
gate: `python hostile.py look REPORT API_URL QUEUE_URL CONFIG_DIR SOCKET CREDENTIAL_FILE`.

It reads the environment and command line of every process it can see in /proc (its ancestors among
them), every file under the reviewer's configuration folder, the credential's file and the agent socket,
then sends a write straight to the API and asks the queue who it is, with every token-like word it
found. It writes what it saw and what answered to REPORT (JSON). Standard library only.

`wait PORT_FILE GO` writes the gate's port (not its secret) and waits on the FIFO GO; `intrude GATE` is
another user trying the gate at that port without the secret, printing each answer's status.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

TOKEN_LIKE = re.compile(rb"[A-Za-z0-9_\-.~+/]{12,}")
MAX_TRIES = 400


def read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        return f"<{type(error).__name__}>".encode()


def processes() -> dict[str, dict[str, str]]:
    """Every process /proc shows: its command line and its initial environment, or why not."""
    seen: dict[str, dict[str, str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            seen[entry.name] = {
                "cmdline": read(entry / "cmdline").replace(b"\0", b" ").decode("utf-8", "replace"),
                "environ": read(entry / "environ").replace(b"\0", b"\n").decode("utf-8", "replace"),
            }
    return seen


def files_under(folder: Path) -> dict[str, str]:
    if not folder.is_dir():
        return {}
    return {str(path): read(path).decode("utf-8", "replace") for path in folder.rglob("*") if path.is_file()}


def agent_socket(path: str) -> str:
    """What the agent socket answers a request for its identities, or why it does not."""
    try:
        with socket.socket(socket.AF_UNIX) as connection:
            connection.settimeout(5)
            connection.connect(path)
            connection.sendall(b"\0\0\0\1\x0b")  # SSH_AGENTC_REQUEST_IDENTITIES
            return connection.recv(4096).hex()
    except OSError as error:
        return f"<{type(error).__name__}>"


def status_with(url: str, method: str, word: str, body: object = None) -> int:
    request = urllib.request.Request(
        url,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"authorization": f"Bearer {word}", "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def look(report_path: str, api: str, queue: str, config: str, agent: str, credential_file: str) -> None:
    seen = {
        "environ": dict(os.environ),
        "processes": processes(),
        "config": files_under(Path(config)),
        "credential_file": read(Path(credential_file)).decode("utf-8", "replace"),
        "agent_socket": agent_socket(agent),
    }
    words = sorted({word.decode() for word in TOKEN_LIKE.findall(json.dumps(seen).encode())} - {api, queue})[
        :MAX_TRIES
    ]
    accepted = {
        "api": [
            word
            for word in words
            if status_with(f"{api}/v1/tickets/t3", "PATCH", word, {"status": "closed"}) < 400
        ],
        "queue": [word for word in words if status_with(f"{queue}/v1/whoami", "GET", word) == 200],
    }
    Path(report_path).write_text(json.dumps({"seen": seen, "words": words, "accepted": accepted}))


def wait(port_file: str, go: str) -> None:
    Path(port_file).write_text(str(urllib.parse.urlsplit(os.environ["REVIEWER_API_URL"]).port))
    with open(go) as released:
        released.read()


def intrude(gate: str) -> None:
    for method, path in [("POST", "/v1/tickets"), ("GET", "/v1/tickets"), ("POST", "/x/v1/tickets")]:
        print(status_with(gate + path, method, "guess", {} if method == "POST" else None))


if __name__ == "__main__":
    mode, *arguments = sys.argv[1:]
    {"look": look, "wait": wait, "intrude": intrude}[mode](*arguments)
