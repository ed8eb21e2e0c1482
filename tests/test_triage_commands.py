"""Triage from a shell against a real queue on a loopback port: `reviewer show` reads every call of a
plan and the money it moves, any unique part of an id works in every command that takes one, and a
reader that stops early (`| head`) ends the command quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.builders import proposal_document
from tests.forked_commands import reviewer_process, run_reviewer
from tests.queue_harness import Actors, Service, body, reviewer_command, served_with_actors, submit
from tests.test_queue_commands import run, submit_sample


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Actors]]:
    yield from served_with_actors(tmp_path_factory.mktemp("queue"))


_ids = iter(range(1_000_000))


def fresh(word: str) -> str:
    """An id no other test of this module holds a piece of: `word`, the process, a counter, then `-x`."""
    return f"{word}{os.getpid()}n{next(_ids)}-x"


def three_call_plan(proposal_id: str) -> bytes:
    """Close t1, then t2 (each its own id and comment), then delete t3: three calls of two tools."""
    calls = [
        {
            "tool": "update_ticket",
            "effect": "update",
            "args": {"id": ticket, "status": "closed", "comment": comment},
            "request": {"method": "PATCH", "path": f"/v1/tickets/{ticket}", "body": {"status": "closed"}},
            "outcome": {"status": "ok", "http_status": 200},
        }
        for ticket, comment in (("t1", "merged into t9"), ("t2", "duplicate of t1"))
    ]
    calls.append(
        {
            "tool": "delete_ticket",
            "effect": "delete",
            "args": {"id": "t3"},
            "request": {"method": "DELETE", "path": "/v1/tickets/t3"},
            "outcome": {"status": "refused", "http_status": 409, "message": "ticket t3 is locked"},
        }
    )
    return body(
        proposal_document(
            calls,
            proposal_id=proposal_id,
            title="Close t1 and t2, delete t3",
            target={"api": "deskline", "base_url": "https://desk.example", "environment": "production"},
            dry_run={"via": "server", "write_requests": 3, "writes_kept": 0},
        )
    )


def test_show_of_a_three_call_plan_lists_every_call(queue: tuple[Service, Actors]) -> None:
    """Each call on its line: number, verdict, method, path, and the arguments that tell it apart
    (`status=closed`, the same on both updates, said once above them)."""
    proposal_id = fresh("three")
    response = queue[1].agent.post("/v1/proposals", content=three_call_plan(proposal_id))
    assert response.status_code == 201, response.text
    shown = run(queue, "show", proposal_id, columns=200)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    calls = [line.strip() for line in lines if line.strip().startswith("#")]
    assert calls == [
        "#1 validated update PATCH /v1/tickets/t1 (update_ticket)  id=t1, comment=merged into t9",
        "#2 validated update PATCH /v1/tickets/t2 (update_ticket)  id=t2, comment=duplicate of t1",
        "#3 real refusal delete DELETE /v1/tickets/t3 (delete_ticket) [del]  id=t3",
    ], shown.stdout
    assert "  every update_ticket: status=closed" in lines
    assert "calls (3):" in lines
    assert "first delete: #3 delete_ticket /v1/tickets/t3" in [line.strip() for line in lines]
    assert "! 1 real refusal" in lines
    scripted = json.loads(run(queue, "show", proposal_id, "--json").stdout)
    assert [(call["seq"], call["verdict"], call["method"], call["path"]) for call in scripted["plan"]] == [
        (1, "validated", "PATCH", "/v1/tickets/t1"),
        (2, "validated", "PATCH", "/v1/tickets/t2"),
        (3, "real refusal", "DELETE", "/v1/tickets/t3"),
    ]
    assert scripted["plan"][2]["flags"] == ["del"]


def test_the_refund_sample_shows_the_euros_it_moves(queue: tuple[Service, Actors]) -> None:
    """1,800 refunds in cents add up to EUR 84,641.64, to the cent, in the list, `show` and its JSON."""
    proposal_id = fresh("refunds")
    submit_sample(queue[1], "billing-refunds-2000.server.json", proposal_id)
    shown = run(queue, "show", proposal_id, columns=100)
    assert shown.returncode == 0, shown.stderr
    assert "moves EUR 84,641.64 (1,800 calls)" in shown.stdout.splitlines()
    assert "  every create_refund: currency=EUR, reason=late delivery" in shown.stdout.splitlines()
    assert sum(line.startswith("  #") for line in shown.stdout.splitlines()) == 2_000
    scripted = json.loads(run(queue, "show", proposal_id, "--json").stdout)
    assert scripted["totals"] == [
        {"currency": "EUR", "amount": "84641.64", "out": "84641.64", "in": "0", "calls": 1800}
    ]
    listed = run(queue, "list", columns=100).stdout
    block = listed[listed.index(proposal_id) :]
    assert "  moves EUR 84,641.64 (1,800 calls)" in block.splitlines()[:8]


def test_a_unique_start_of_an_id_works_in_every_command(queue: tuple[Service, Actors]) -> None:
    """`show`, `request-changes`, `reject` and `approve` each take the start of an id; the queue
    records each decision under the whole id."""
    service, actors = queue
    ids = {name: fresh(name) for name in ("approved", "rejected", "replanned")}
    answers = {name: submit(actors.agent, proposal_id) for name, proposal_id in ids.items()}

    def start(name: str) -> str:
        return ids[name][: len(name) + 3]

    shown = run(queue, "show", start("approved"), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["proposal_id"] == ids["approved"]
    digest = answers["approved"]["plan_sha256"]
    approved = run(queue, "approve", start("approved"), "--revision", "1", "--digest", digest)
    assert approved.returncode == 0, approved.stderr
    assert (
        approved.stdout.startswith(f"{ids['approved']} revision 1") and "approved by alice" in approved.stdout
    )
    rejected = run(queue, "reject", start("rejected"), "--revision", "1", "--reason", "not now")
    assert rejected.returncode == 0 and "rejected by alice" in rejected.stdout, rejected.stderr
    asked = run(queue, "request-changes", start("replanned"), "--revision", "1", "--reason", "keep t2")
    assert asked.returncode == 0 and "changes requested by alice" in asked.stdout, asked.stderr
    states = {name: actors.alice.get(f"/v1/proposals/{ids[name]}/decision").json() for name in ids}
    assert {name: state["state"] for name, state in states.items()} == {
        "approved": "approved",
        "rejected": "rejected",
        "replanned": "changes_requested",
    }


def test_an_ambiguous_start_lists_the_candidates_and_sends_nothing(queue: tuple[Service, Actors]) -> None:
    service, actors = queue
    word = fresh("twin")[:-2]
    first, second = f"{word}-a", f"{word}-b"
    submit(actors.agent, first, title="Close t1")
    submit(actors.agent, second, title="Close t2")
    result = run(queue, "reject", word, "--revision", "1", "--reason", "no")
    assert result.returncode == 1, result.stdout
    assert f"'{word}' is part of 2 proposal ids" in result.stderr and "nothing was sent" in result.stderr
    assert f"  {second}  rev 1  pending  Close t2" in result.stderr.splitlines()
    assert f"  {first}  rev 1  pending  Close t1" in result.stderr.splitlines()
    assert "Traceback" not in result.stderr
    for proposal_id in (first, second):
        assert actors.alice.get(f"/v1/proposals/{proposal_id}/decision").json()["state"] == "pending"
    shown = run(queue, "show", word)
    assert shown.returncode == 1 and "is part of 2 proposal ids" in shown.stderr
    exact = run(queue, "show", first, "--json")  # a whole id is itself, though others hold it
    assert json.loads(exact.stdout)["proposal_id"] == first


def test_text_with_no_letter_or_digit_names_no_proposal(queue: tuple[Service, Actors]) -> None:
    """ "" and "-" are part of every id: they name none, though one proposal waits alone."""
    for typed in ("", "-", ".-_"):
        result = run(queue, "reject", typed, "--revision", "1", "--reason", "no")
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert "is part of" not in result.stderr


def test_a_planted_id_that_is_the_start_of_the_announced_one_names_neither(
    queue: tuple[Service, Actors],
) -> None:
    """An agent saw `announced` in a notification and submitted a proposal whose whole id is its first
    characters, with the same title and a delete: what the reviewer types names neither, lists both,
    and sends nothing; `=ID` names the short one alone, and more of the long id names it."""
    actors = queue[1]
    announced = fresh("announced")
    planted = announced[:12]
    submit(actors.agent, announced, title="Close t1")
    submit(actors.agent, planted, title="Close t1")
    for command in (["show", planted], ["reject", planted, "--revision", "1", "--reason", "no"]):
        typed = run(queue, *command)
        assert typed.returncode == 1, typed.stderr
        assert f"'{planted}' is part of 2 proposal ids" in typed.stderr, typed.stderr
        assert f"  {announced}  rev 1  pending  Close t1" in typed.stderr.splitlines()
        assert f"  {planted}  rev 1  pending  Close t1" in typed.stderr.splitlines()
    assert actors.alice.get(f"/v1/proposals/{planted}/decision").json()["state"] == "pending"
    exact = run(queue, "show", f"={planted}", "--json")
    assert exact.returncode == 0 and json.loads(exact.stdout)["proposal_id"] == planted, exact.stderr
    longer = run(queue, "show", announced[:14], "--json")
    assert json.loads(longer.stdout)["proposal_id"] == announced


def test_the_end_of_the_random_part_names_the_proposal_and_a_planted_start_names_neither(
    queue: tuple[Service, Actors],
) -> None:
    """Ids lead with their random part; a reviewer who can see only its end types that. An agent
    that plants an id beginning with those characters makes them name neither proposal: a start is
    not preferred to a middle."""
    from reviewer.queue.ids import ID_RANDOM_CHARS, new_proposal_id

    actors = queue[1]
    announced = new_proposal_id("Close t1")
    end_of_random = announced[ID_RANDOM_CHARS - 6 : ID_RANDOM_CHARS]
    submit(actors.agent, announced, title="Close t1")
    shown = run(queue, "show", end_of_random, "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["proposal_id"] == announced, shown.stderr
    planted = f"{end_of_random}-close-t1"
    submit(actors.agent, planted, title="Close t1")
    typed = run(queue, "show", end_of_random)
    assert typed.returncode == 1 and f"'{end_of_random}' is part of 2 proposal ids" in typed.stderr
    assert f"  {planted}  rev 1  pending  Close t1" in typed.stderr.splitlines()


@pytest.mark.parametrize("command", ["show", "list"])
def test_a_pipe_closed_after_one_line_leaves_no_traceback(
    queue: tuple[Service, Actors], command: str
) -> None:
    """`reviewer show ID | head -1` and `reviewer list | head -1`: the reader takes one line and
    closes the pipe; the command ends quietly, with status 0 and nothing on stderr."""
    service, actors = queue
    proposal_id = fresh("piped")
    submit_sample(actors, "billing-refunds-2000.server.json", proposal_id)
    env = {key: value for key, value in os.environ.items() if key not in ("SSH_AUTH_SOCK", "XDG_CONFIG_HOME")}
    env.update(
        REVIEWER_QUEUE=service.url,
        REVIEWER_TOKEN=actors.tokens["alice"],
        XDG_CONFIG_HOME=str(Path(service.db).parent / "no-config"),
    )
    args = [command, proposal_id] if command == "show" else [command]
    writer = reviewer_process(
        reviewer_command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert writer.stdout is not None and writer.stderr is not None
    first = writer.stdout.readline()
    writer.stdout.close()  # what `head -1` does after its line
    stderr = writer.stderr.read().decode()
    assert writer.wait(timeout=60) == 0, stderr
    assert first.strip() and stderr == "", stderr


def test_show_goes_through_the_pager_on_a_terminal(queue: tuple[Service, Actors], tmp_path: Path) -> None:
    """On a terminal (a pty), `show` hands its text to $PAGER, here a program that keeps what it got."""
    import pty

    service, actors = queue
    proposal_id = fresh("paged")
    response = actors.agent.post("/v1/proposals", content=three_call_plan(proposal_id))
    assert response.status_code == 201
    kept = tmp_path / "paged.txt"
    pager = tmp_path / "pager.py"
    pager.write_text(f"import sys\nopen({str(kept)!r}, 'w').write(sys.stdin.read())\n")
    env = {key: value for key, value in os.environ.items() if key not in ("SSH_AUTH_SOCK", "XDG_CONFIG_HOME")}
    env.update(
        REVIEWER_QUEUE=service.url,
        REVIEWER_TOKEN=actors.tokens["alice"],
        XDG_CONFIG_HOME=str(tmp_path / "no-config"),
        PAGER=f"{sys.executable} {pager}",
        COLUMNS="120",
    )
    controller, terminal = pty.openpty()
    try:
        finished = run_reviewer(
            reviewer_command("show", proposal_id),
            stdin=subprocess.DEVNULL,
            stdout=terminal,
            stderr=subprocess.PIPE,
            env=env,
            timeout=60,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert finished.returncode == 0, finished.stderr
    paged = kept.read_text().splitlines()
    assert "  #3 real refusal delete DELETE /v1/tickets/t3 (delete_ticket) [del]  id=t3" in paged


def test_review_takes_the_start_of_an_id(queue: tuple[Service, Actors]) -> None:
    """`reviewer review START` opens the whole id's proposal; an ambiguous start lists the
    candidates before any screen starts; a queue that cannot answer leaves the id as typed."""
    from reviewer.queue.config import Secret, Settings
    from reviewer.tui.commands import _whole_id

    service, actors = queue
    word = fresh("opened")[:-2]
    submit(actors.agent, f"{word}-only")
    token = Secret(actors.tokens["alice"])
    assert _whole_id(Settings(service.url, token), word[:-1]) == f"{word}-only"
    submit(actors.agent, f"{word}-again")
    result = run(queue, "review", word)
    assert result.returncode == 1 and f"'{word}' is part of 2 proposal ids" in result.stderr, result.stderr
    assert _whole_id(Settings("http://127.0.0.1:9", token), word) == word


def test_show_counts_calls_of_unknown_effect_and_reads_apart_never_as_creates() -> None:
    """`reviewer show` and `list` word each kind: an MCP tool that says nothing of itself is an
    effect unknown, a read is a read."""
    import json as json_module

    from reviewer.plan.proposal import parse_proposal
    from reviewer.queue.overview import QueueFacts, reading_lines, summarize
    from tests.builders import proposal_document

    calls = [
        {"tool": tool, "effect": effect, "args": {}, "outcome": {"status": "ok"}}
        for tool, effect in [("open", "create"), ("query", "other"), ("run_sql", "other"), ("list", "read")]
    ]
    proposal = parse_proposal(json_module.dumps(proposal_document(calls, via="record")))
    facts = QueueFacts(
        plan_sha256="0" * 64, proposed_by="agent", submitted_at="now", latest_revision=1, state="pending"
    )
    lines = reading_lines(summarize(proposal, facts).reading, 100)
    assert lines[0] == "4 calls, 1 create, 0 update, 0 delete, 2 effect unknown, 1 read"
