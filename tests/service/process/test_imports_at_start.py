"""What `reviewer serve` loads before it answers: a library that serves one feature loads on a queue
that has the feature on, at start (so its first request does not pay for it), and never on one that
has it off. Read from the real process: Python prints each import to stderr, the service's log, when
`PYTHONPROFILEIMPORTTIME` is set."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.policies import WORKING_HOURS_AND_YEAR_END_FREEZE
from tests.queue_harness import Service
from tests.service.ports import free_port

FEATURE_LIBRARIES = {
    "webauthn": "the review pages' passkeys (--web-origin)",
    "croniter": "a policy's change windows",
    "jwt": "reviewers signed in through a provider (--oidc-issuer)",
    "cryptography": "the queue's own keys (--trail-key, --policy-key) and reviewers' signatures",
}


def imported_at_start(folder: Path, *serve_args: str, port: int | None = None) -> set[str]:
    """Every module the service imported from its start to its first answer on /healthz."""
    service = Service(
        db=folder / "queue.sqlite3",
        log_path=folder / "service.log",
        serve_args=serve_args,
        port=port or free_port(),
        env={"PYTHONPROFILEIMPORTTIME": "1"},
    )
    service.start()
    try:
        log = service.log_since_launch()
    finally:
        service.stop()
    return {line.rsplit("|", 1)[1].strip() for line in log.splitlines() if line.startswith("import time:")}


def test_a_queue_with_no_feature_on_starts_without_the_features_libraries(tmp_path: Path) -> None:
    loaded = imported_at_start(tmp_path)
    assert {"fastapi", "uvicorn", "reviewer.service.app"} <= loaded, "the log lists the imports"
    assert sorted(set(FEATURE_LIBRARIES) & loaded) == []


def test_pages_windows_and_a_trail_key_load_their_libraries_before_the_first_request(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(WORKING_HOURS_AND_YEAR_END_FREEZE)
    trail_key = tmp_path / "trail_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(trail_key)], check=True)
    port = free_port()
    loaded = imported_at_start(
        tmp_path,
        *("--web-origin", f"http://localhost:{port}", "--policy", str(policy), "--trail-key", str(trail_key)),
        port=port,
    )
    assert {"webauthn", "croniter", "cryptography"} <= loaded
