"""schemathesis against /openapi.json with every check on: the document says what the service does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from schemathesis import openapi as schemathesis_openapi

from tests.queue_harness import Service, make_actors, start_service, submit, unique_id

CHECKS = "all"
"""Every check schemathesis has: server errors, status codes, content types, headers, response schemas,
negative data rejected, positive data accepted, missing required headers, unsupported methods
(405 with Allow), ignored auth, use after free and resource availability."""


STRESSED_RUN = 300
"""Seconds one schemathesis run may take: a bound, not a wait (25-35 s alone, 70 s beside the rest of
the suite, over 120 s beside a second suite on 2 cores)."""


def schemathesis(service: Service, token: str, *selection: str) -> subprocess.CompletedProcess[str]:
    command = [
        str(Path(sys.executable).with_name("st")),
        "--config-file",
        str(Path(__file__).with_name("schemathesis.toml")),
        "run",
        f"{service.url}/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        CHECKS,
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        "25",  # per operation and phase, with a fixed seed: the same 25 every run
        "--workers",
        "1",  # with more, hypothesis's lambda-source cache races and schemathesis reports a runtime error
        "--seed",
        "20261015",
        "--suppress-health-check",
        "all",
        *selection,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=STRESSED_RUN, check=False)


@pytest.mark.slow
@pytest.mark.timeout(2 * STRESSED_RUN + 60)
def test_schemathesis_finds_no_server_error_and_no_schema_mismatch(tmp_path: Path) -> None:
    service = start_service(tmp_path)
    actors = make_actors(service)
    try:
        submit(actors.agent, unique_id("fuzz"))
        as_reviewer = schemathesis(service, actors.tokens["alice"])
        assert as_reviewer.returncode == 0, as_reviewer.stdout[-6000:]
        as_agent = schemathesis(
            service, actors.tokens["agent"], "--include-method", "POST", "--exclude-path-regex", "decisions$"
        )
        assert as_agent.returncode == 0, as_agent.stdout[-6000:]
    finally:
        actors.close()
        service.stop()
    assert " 500 " not in service.log()


def test_the_published_openapi_document_is_valid_and_documents_the_execution_routes(service: Service) -> None:
    document = service.client().get("/openapi.json").json()
    schemathesis_openapi.from_dict(document).validate()
    executions = document["paths"]["/v1/proposals/{proposal_id}/executions"]
    assert executions["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ExecutionHistory"
    }
    assert "idempotency-key" in {parameter["name"] for parameter in executions["post"]["parameters"]}
