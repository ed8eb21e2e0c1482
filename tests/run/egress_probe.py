"""What a child in `reviewer run --allow-net`'s sandbox reaches: `python3 egress_probe.py SPEC`, SPEC
a JSON object with `report` (where to write what it found), `allowed` (a port on loopback the run
allows), `refused` (ports it does not: the queue's, another) and `proxy` (the proxy's port).

Through the proxy it sends CONNECT to each and, where a tunnel opens, a line the far end echoes;
it sends a plain-HTTP GET to the allowed port; it connects to each port directly, without the proxy."""

from __future__ import annotations

import json
import os
import socket
import sys

NAMES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY")


def through_proxy(proxy: int, request: bytes, after: bytes = b"") -> dict[str, str]:
    with socket.create_connection(("127.0.0.1", proxy), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = conn.recv(4096)
            if not chunk:
                break
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        status = head.split(b"\r\n")[0].decode("latin-1")
        if " 200 " in status + " " and after:
            conn.sendall(after)
            while not body.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                body += chunk
        else:
            while chunk := conn.recv(4096):
                body += chunk
        return {"status": status, "body": body.decode("latin-1")}


def direct(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return "connected"
    except OSError as error:
        return type(error).__name__


def main(spec: dict[str, object]) -> None:
    proxy = int(str(spec["proxy"]))
    allowed = int(str(spec["allowed"]))
    refused = [int(port) for port in spec["refused"]]  # type: ignore[attr-defined]
    found = {
        "environment": {name: os.environ.get(name) for name in NAMES},
        "allowed": through_proxy(
            proxy, f"CONNECT 127.0.0.1:{allowed} HTTP/1.1\r\nHost: x\r\n\r\n".encode(), b"ping through\n"
        ),
        "refused": [
            through_proxy(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode(), b"hello\n")
            for port in refused
        ],
        "plain": through_proxy(
            proxy, f"GET http://127.0.0.1:{allowed}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        ),
        "direct": [direct(port) for port in (allowed, *refused)],
    }
    with open(str(spec["report"]), "w") as report:
        json.dump(found, report)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
