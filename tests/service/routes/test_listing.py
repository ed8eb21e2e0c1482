"""The list a reviewer reads: each row carries the reading the queue stored when the plan was
submitted, the same `reviewer show` computes from the plan; filters by environment, agent, alarm and
age narrow it, page by page, and a value no filter takes is a 422 in words; a reviewer sees first the
environments the policy lets them decide. Against a real queue on a loopback port, with a policy."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reviewer.plan.proposal import parse_proposal
from reviewer.reading.summary import read_plan
from reviewer.service.auth import Identity
from reviewer.service.bodies import submission
from reviewer.service.listing import ListFilter
from reviewer.service.store import StoreSettings
from reviewer.service.store.sqlite import SQLiteStore
from tests.builders import proposal_document
from tests.forked_commands import run_reviewer
from tests.queue_harness import Actors, Service, body, make_actors, proposal, reviewer_command, unique_id

SAMPLES = Path(__file__).resolve().parents[3] / "sample_proposals"
POLICY = """
[environments.production]
reviewers = ["bob"]
"""


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Actors]]:
    folder = tmp_path_factory.mktemp("queue")
    (folder / "policy.toml").write_text(POLICY)
    service = Service(
        db=folder / "queue.sqlite3",
        log_path=folder / "service.log",
        serve_args=("--policy", str(folder / "policy.toml")),
    )
    service.start()
    actors = make_actors(service)
    yield service, actors
    actors.close()
    service.stop()


def submitted(client: httpx.Client, document: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/proposals", content=body(document))
    assert response.status_code == 201, response.text
    return document


def production_plan(proposal_id: str) -> dict[str, Any]:
    """The bundled scale-down: production, three deletes, one real refusal."""
    document: dict[str, Any] = json.loads((SAMPLES / "k8s-shop-scale-down.server.json").read_text())
    return {**document, "proposal_id": proposal_id}


def listed(client: httpx.Client, **query: str) -> dict[str, dict[str, Any]]:
    """Every pending row the query keeps, by id, read page after page."""
    rows: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    while True:
        response = client.get("/v1/proposals", params={**query, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        page = response.json()
        rows.update({row["proposal_id"]: row for row in page["proposals"]})
        cursor = page.get("next_cursor")
        if cursor is None:
            return rows


def test_each_row_carries_what_show_reads_from_its_plan(queue: tuple[Service, Actors]) -> None:
    _service, actors = queue
    document = submitted(actors.agent, production_plan(unique_id("prod")))
    row = listed(actors.bob, state="pending")[document["proposal_id"]]
    reading = read_plan(parse_proposal(json.dumps(document)))
    assert row["reading"]["environment"] == "production" and row["reading"]["deletes"] == 3
    assert [alarm["name"] for alarm in row["reading"]["alarms"]] == list(reading.alarm_names)
    assert "real_refusals" in reading.alarm_names and "deletes" in reading.alarm_names
    assert row["reading"]["calls"] == reading.calls and row["call_count"] == reading.calls


def test_a_reviewer_the_policy_leaves_out_of_an_environment_sees_its_plans_only_when_asking_for_all(
    queue: tuple[Service, Actors],
) -> None:
    """Production's plans are bob's to decide: alice's list leaves them out unless she asks for
    every row, and then each says whose it is; staging lists no reviewers, so it is anyone's."""
    _service, actors = queue
    prod = submitted(actors.agent, production_plan(unique_id("prod")))["proposal_id"]
    stage = submitted(actors.agent, proposal(unique_id("stage")))["proposal_id"]
    alices = listed(actors.alice, yours="true")
    assert stage in alices and prod not in alices
    every = listed(actors.alice)
    assert (every[prod]["yours"], every[stage]["yours"]) == (False, True)
    bobs = listed(actors.bob, yours="true")
    assert prod in bobs and stage in bobs and bobs[prod]["yours"] is True


def test_filters_keep_an_environment_an_agent_or_an_alarm(queue: tuple[Service, Actors]) -> None:
    _service, actors = queue
    prod = submitted(actors.agent, production_plan(unique_id("prod")))["proposal_id"]
    stage = submitted(actors.other_agent, proposal(unique_id("stage")))["proposal_id"]
    by_alarm = listed(actors.bob, alarm="deletes")
    assert prod in by_alarm and stage not in by_alarm
    by_token = listed(actors.bob, agent="other")
    assert stage in by_token and prod not in by_token
    # The name a plan gives its agent is anyone's to write: it narrows to no token's plans.
    assert listed(actors.bob, agent="deskline-agent") == {}
    staging = listed(actors.bob, environment="staging")
    assert stage in staging and prod not in staging
    assert all(row["reading"]["environment"] == "staging" for row in staging.values())
    assert listed(actors.bob, older_than="1d") == {}  # nothing here waited a day
    # What a person typed of an id: anywhere in it, in one request (`reviewer show k3j5`).
    middle = prod[2:]
    holding = listed(actors.bob, holding=middle)
    assert prod in holding and stage not in holding
    assert all(middle in proposal_id for proposal_id in holding)


def test_a_filtered_list_is_paged_with_a_cursor(queue: tuple[Service, Actors]) -> None:
    _service, actors = queue
    environment = unique_id("paging")
    ids = [
        submitted(
            actors.agent,
            proposal_document(
                [{"tool": "list_tickets", "effect": "read", "args": {}}],
                proposal_id=unique_id("paged"),
                target={"api": "deskline", "environment": environment},
            ),
        )["proposal_id"]
        for _ in range(3)
    ]
    first = actors.bob.get("/v1/proposals", params={"environment": environment, "limit": 2}).json()
    assert [row["proposal_id"] for row in first["proposals"]] == ids[:0:-1]
    rest = actors.bob.get(
        "/v1/proposals", params={"environment": environment, "limit": 2, "cursor": first["next_cursor"]}
    ).json()
    assert [row["proposal_id"] for row in rest["proposals"]] == ids[:1] and "next_cursor" not in rest


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ({"alarm": "nope"}, "alarm 'nope' is none of the alarms: writes_kept, "),
        ({"older_than": "soon"}, "older_than: 'soon' is not a duration like 90d, 12h, 30m or 3600"),
        ({"older_than": "-5m"}, "older_than: '-5m': a duration is more than 0"),
        ({"environment": ""}, "$.query.environment: String should have at least 1 character"),
        ({"agent": "a" * 301}, "$.query.agent: String should have at most 300 characters"),
    ],
)
def test_a_filter_value_it_cannot_be_is_a_422_in_words(
    queue: tuple[Service, Actors], query: dict[str, str], words: str
) -> None:
    """As a bad `wait` is: the API's description says what each takes, and its fuzzing sends only that."""
    response = queue[1].bob.get("/v1/proposals", params=query)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid" and words in response.json()["message"]


def run_list(queue: tuple[Service, Actors], who: str, *args: str) -> subprocess.CompletedProcess[str]:
    service, actors = queue
    env = {key: value for key, value in os.environ.items() if key != "XDG_CONFIG_HOME"}
    env.update(
        REVIEWER_QUEUE=service.url,
        REVIEWER_TOKEN=actors.tokens[who],
        XDG_CONFIG_HOME=str(Path(service.db).parent / "no-config"),
        COLUMNS="100",
    )
    return run_reviewer(reviewer_command("list", *args), capture_output=True, text=True, env=env, timeout=60)


def test_reviewer_list_shows_yours_and_with_all_the_rest_after_them(queue: tuple[Service, Actors]) -> None:
    _service, actors = queue
    prod = submitted(actors.agent, production_plan(unique_id("prod")))["proposal_id"]
    stage = submitted(actors.agent, proposal(unique_id("stage")))["proposal_id"]
    yours = run_list(queue, "alice")
    assert yours.returncode == 0, yours.stderr
    assert stage in yours.stdout and prod not in yours.stdout
    every = run_list(queue, "alice", "--all").stdout
    heading = "waiting in environments the policy does not let you decide:"
    assert every.index(stage) < every.index(heading) < every.index(prod)
    assert every[every.index(prod) :].splitlines()[3:5] == [
        "  9 calls, 0 create, 6 update, 3 delete",
        "  ! 1 real refusal",
    ]
    one = json.loads(run_list(queue, "bob", "--alarm", "deletes", "--limit", "1", "--json").stdout)
    assert [row["proposal_id"] for row in one] == [prod] and one[0]["deletes"] == 3
    refused = run_list(queue, "bob", "--older-than", "soon")
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        "reviewer list: older_than: 'soon' is not a duration like 90d, 12h, 30m or 3600 (HTTP 422)\n"
    )


def test_older_than_keeps_what_waited_that_long_by_the_queues_clock(tmp_path: Path) -> None:
    now = [1_000.0]
    store = SQLiteStore(
        tmp_path / "queue.sqlite3", StoreSettings(clock=lambda: now[0], pending_ttl=10_000, approval_ttl=10)
    )
    try:
        with store.write() as db:
            db.run(
                "INSERT INTO tokens (name, role, token_sha256, created_at) VALUES ('agent', 'agent', 'h', 1)"
            )
        agent = store.resolve_token("h")
        assert isinstance(agent, Identity)
        store.submit(agent, submission(body(proposal("early"))))
        now[0] += 3600
        store.submit(agent, submission(body(proposal("late"))))
        now[0] += 60

        def kept(seconds: float) -> list[str]:
            page = store.list_proposals("pending", None, 10, ListFilter(older_than=seconds))
            return [summary.proposal_id for summary in page.proposals]

        assert kept(60) == ["late", "early"]
        assert kept(61) == ["early"]
        assert kept(3660) == ["early"] and kept(3661) == []
    finally:
        store.close()
