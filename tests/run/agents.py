"""Small agents for `reviewer run`'s tests, each misbehaving in one way: `python agents.py MODE ARGS`.

They speak HTTP with the standard library only, to `REVIEWER_API_URL`, as an agent in any language would.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def send(method: str, path: str, body: object = None, raw: bytes | None = None) -> tuple[int, str]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(
        os.environ["REVIEWER_API_URL"] + path,
        method=method,
        data=data,
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request) as response:
            answer = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        answer = error.code, error.read().decode()
    print(method, path, *answer, flush=True)
    return answer


def drift(counter: str) -> None:
    """The first run closes t1; a later one (a fresh sample) adds a call the plan does not have."""
    runs = int(Path(counter).read_text()) if Path(counter).exists() else 0
    Path(counter).write_text(str(runs + 1))
    send("POST", "/v1/tickets", {"title": "Printer on fire"})
    if runs:
        send("DELETE", "/v1/tickets/t2")
    send("PATCH", "/v1/tickets/t1", {"status": "closed"})


def around(counter: str, when: str, api_url: str, token: str) -> None:
    """Two writes through the gate; in the run `when` names (`dry` is the first, `real` the second),
    one more straight to the API with a credential of its own, around the gate."""
    runs = int(Path(counter).read_text()) if Path(counter).exists() else 0
    Path(counter).write_text(str(runs + 1))
    # What the child could read of the audit log's credential, for the test to look at.
    Path(counter).with_name("log-token-seen").write_text(os.environ.get("LOG_TOKEN", ""))
    send("POST", "/v1/tickets", {"title": "Printer on fire"})
    if ["dry", "real"][min(runs, 1)] == when:
        request = urllib.request.Request(
            api_url + "/v1/tickets/t2",
            method="PATCH",
            data=json.dumps({"status": "closed"}).encode(),
            headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(request) as response:
            print("around the gate: PATCH /v1/tickets/t2", response.status, flush=True)
    send("PATCH", "/v1/tickets/t1", {"status": "closed"})


def tickets() -> None:
    """Open a ticket, close t1, delete t2: what any ticket API's agent does, under plain REST paths."""
    answers = [
        send("POST", "/tickets", {"title": "Printer on fire", "status": "open"}),
        send("PATCH", "/tickets/t1", {"status": "closed"}),
        send("DELETE", "/tickets/t2"),
    ]
    sys.exit(0 if all(status < 500 for status, _ in answers) else 4)


def main() -> None:
    mode, *rest = sys.argv[1:]
    if mode == "drift":
        drift(rest[0])
    elif mode == "around":
        around(*rest)
    elif mode == "tickets":
        tickets()
    elif mode == "not-json":
        send("POST", "/v1/tickets", raw=b"title=Printer on fire")
    elif mode == "big-body":
        send("POST", "/v1/tickets", {"title": "x" * (17 * 1024 * 1024)})
    elif mode == "fail":
        send("POST", "/v1/tickets", {"title": "Printer on fire"})
        sys.exit(3)
    elif mode == "hang":
        send("POST", "/v1/tickets", {"title": "Printer on fire"})
        Path(rest[0]).write_text("started")
        time.sleep(3600)  # the gate's --timeout ends it
    elif mode == "touch":
        Path(rest[0]).write_text("started")
    elif mode == "undeclared":
        status, text = send("POST", "/v1/merge-everything", {"all": True})
        print("refused:", status, text)
        send("POST", "/v1/tickets", {"title": "Printer on fire"})
    elif mode == "late":
        # Leave a process behind that writes once the test says so (through a FIFO, no clock involved).
        go, answered = rest
        if os.fork() == 0:
            os.setsid()
            with open(go) as wait:
                wait.read()
            status, _ = send("POST", "/v1/tickets", {"title": "written after the dry run"})
            with open(answered, "w") as told:
                told.write(str(status))
            os._exit(0)
        send("POST", "/v1/tickets", {"title": "Printer on fire"})
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
