"""Two reviewers deciding the same proposal at the same moment: exactly one wins, every time."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.queue_harness import Actors, decide, submit, unique_id

ROUNDS = 50


def race(
    start: threading.Barrier, reviewer: httpx.Client, proposal_id: str, plan_sha256: str, decision: str
) -> httpx.Response:
    start.wait()
    return decide(reviewer, proposal_id, 1, plan_sha256, decision)


@pytest.mark.slow
def test_exactly_one_of_two_racing_reviewers_wins(actors: Actors) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        for round_number in range(ROUNDS):
            proposal_id = unique_id("race")
            answer = submit(actors.agent, proposal_id)
            start = threading.Barrier(2)
            decisions = ("approve", "reject") if round_number % 2 else ("approve", "approve")

            futures = [
                pool.submit(race, start, reviewer, proposal_id, answer["plan_sha256"], decision)
                for reviewer, decision in zip((actors.alice, actors.bob), decisions, strict=True)
            ]
            responses = [future.result() for future in futures]
            statuses = sorted(response.status_code for response in responses)
            assert statuses == [201, 409], [response.text for response in responses]
            winner = next(response for response in responses if response.status_code == 201).json()
            loser = next(response for response in responses if response.status_code == 409).json()
            assert loser["decided_by"] == winner["decided_by"]
            history = actors.alice.get(f"/v1/proposals/{proposal_id}").json()["history"]
            assert [event["event"] for event in history].count("submitted") == 1
            assert len(history) == 2, "one decision recorded, not two"
