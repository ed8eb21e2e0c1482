"""What a policy may cost the queue: evaluation off the event loop, under a deadline, failing closed.

A rule the deadline cuts short is a rule that failed to evaluate: it asks at least what it asks when
it matches (a reject rule rejects), and the decision state says which rule and why; the
service answers other requests while an evaluation runs. Walks over the calls are linear.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reviewer.plan.proposal import scan_proposal
from reviewer.policy.bounded import EvaluatorClosed, PolicyEvaluator, RuleOutcome, fail_closed
from reviewer.policy.expressions import EvaluationError, compile_expression, context
from reviewer.policy.file import Policy, parse_policy
from reviewer.policy.quorum import Requirement
from reviewer.policy.verdict import evaluate, needs
from reviewer.service.app import create_app
from reviewer.service.auth import hash_token, mint_token
from reviewer.service.store.opener import open_store
from tests.builders import proposal_document
from tests.policies import ONE_APPROVAL
from tests.queue_harness import Service, body, proposal, unique_id

REVIEWER = [sys.executable, "-m", "reviewer"]
SLOW = "plan.calls.exists(c, c.args.items.exists(i, c.args.items.exists(j, j == -1)))"
"""Quadratic in the items of one call's list, as written (every item against every item): 20,000
items are 400 million steps, minutes, far past any deadline below."""

POLICY = f"""\
[default]
approvals = 1

[environments.production]
base_urls = ["http://127.0.0.1:9/*"]
approvals = 2

[[rules]]
name = "updates"
when = "plan.counts.update >= 0"
approvals = 2

[[rules]]
name = "slow"
when = '{SLOW}'
approvals = 3
reviewers = ["alice", "bob", "carol"]

[[rules]]
name = "slow approve"
when = '{SLOW}'
approve = true
"""


def slow_plan(items: int = 20_000) -> dict[str, Any]:
    document = proposal(unique_id("cost"), calls=2)
    document["calls"][0]["args"]["items"] = list(range(items))
    return document


def children(pid: int) -> list[int]:
    """The processes `pid` started, from every one of its threads."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def wait_for(condition: Callable[[], object], *, limit: float) -> None:
    done = threading.Event()
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"not within {limit} s"
        done.wait(0.01)


def test_rules_the_deadline_cut_short_ask_what_they_ask_and_a_reject_rule_rejects() -> None:
    policy = parse_policy(POLICY)
    plan = scan_proposal(body(slow_plan(10)))
    decided = {0: RuleOutcome(True, None, 0.01)}
    verdict = fail_closed(policy, plan, decided, "not decided within the 10 s deadline", signing=True)
    # `slow` asks 3 by alice, bob, carol; `slow approve` approves nothing it did not decide
    assert verdict.requirement == Requirement(3, False, (("alice", "bob", "carol"),))
    assert verdict.outcome == "human"
    errors = {match.rule: match.error for match in verdict.matched}
    assert errors == {
        "updates": None,
        "slow": "not decided within the 10 s deadline",
        "slow approve": "not decided within the 10 s deadline",
    }
    failed = ", ".join(
        f"rule `{rule}` failed (not decided within the 10 s deadline), so it asks as if it held"
        for rule in ("slow", "slow approve")
    )
    assert needs(verdict) == f"needs 3 approvals, by alice, bob, carol: rule `updates`; {failed}"

    rejecting = parse_policy(
        POLICY
        + f"""
[[rules]]
name = "slow reject"
when = '{SLOW}'
reject = "never"
"""
    )
    verdict = fail_closed(rejecting, plan, decided, "not decided within the 10 s deadline", signing=True)
    assert verdict.outcome == "reject" and verdict.decided_by == "policy:slow reject"
    assert "not decided within the 10 s deadline" in (verdict.reason or "")


def test_the_deadline_bounds_the_whole_evaluation_however_many_reports_the_worker_sends() -> None:
    """`--policy-deadline` counts from the plan's arrival (docs/design.md, "Policies that read the
    plan"): a worker reporting each rule as it ends does not start the deadline again. The clock moves
    0.3 s at each reading the evaluator makes, so a 1 s deadline passes after three of the worker's
    reports, however fast it sends them; with the clock standing still, the same plan is decided."""
    rules = "".join(
        f'[[rules]]\nname = "rule {number}"\nwhen = "true"\napprovals = 2\n' for number in range(8)
    )
    policy = parse_policy(ONE_APPROVAL + rules)
    step = [0.0]
    now = [0.0]

    def clock() -> float:
        now[0] += step[0]
        return now[0]

    evaluator = PolicyEvaluator(policy, 1.0, workers=1, clock=clock)
    try:
        standing = evaluator.evaluate(body(proposal("deadline")))
        step[0] = 0.3
        moving = evaluator.evaluate(body(proposal("deadline")))
    finally:
        evaluator.close()
    assert standing.finished and len(standing.outcomes) == 8
    assert not moving.finished and len(moving.outcomes) < 8
    assert moving.verdict.outcome == "human" and moving.verdict.requirement.approvals == 2


def test_an_evaluation_that_finishes_gives_the_verdict_evaluated_in_process() -> None:
    policy = parse_policy(POLICY.split('[[rules]]\nname = "slow"')[0])
    document = slow_plan(10)
    raw = body(document)
    evaluator = PolicyEvaluator(policy, 60.0)
    try:
        bounded = evaluator.evaluate(raw)
        again = evaluator.evaluate(raw)  # the same worker, kept
    finally:
        evaluator.close()
    assert bounded.finished and again.finished
    assert bounded.verdict == evaluate(policy, scan_proposal(raw)) == again.verdict
    assert bounded.outcomes[0].holds is True


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, httpx.Client, httpx.Client]]:
    folder: Path = tmp_path_factory.mktemp("cost")
    (folder / "policy.toml").write_text(POLICY)
    service = Service(
        db=folder / "queue.sqlite3",
        log_path=folder / "service.log",
        serve_args=("--policy", str(folder / "policy.toml"), "--policy-deadline", "2"),
    )
    service.start()
    agent = service.client(service.token("agent", "agent"))
    alice = service.client(service.token("alice", "reviewer"))
    yield service, agent, alice
    agent.close()
    alice.close()
    service.stop()


def test_a_plan_past_the_deadline_needs_the_strict_requirement_and_the_queue_serves_meanwhile(
    queue: tuple[Service, httpx.Client, httpx.Client],
) -> None:
    service, agent, alice = queue
    document = slow_plan()
    answers: list[httpx.Response] = []
    submitted = threading.Event()

    def submit() -> None:
        answers.append(agent.post("/v1/proposals", content=body(document), timeout=120))
        submitted.set()

    thread = threading.Thread(target=submit)
    thread.start()
    try:
        # the evaluation has begun once the service started a worker for it (workers start on first use)
        assert service.process is not None
        wait_for(lambda: children(service.process.pid) or submitted.is_set(), limit=60)
        assert not submitted.is_set(), "the submission was answered without an evaluating process"
        for _ in range(3):
            # each request has its own deadline: an event loop the evaluation stopped answers none
            assert alice.get("/v1/whoami", timeout=30).status_code == 200
        assert not submitted.is_set(), "the evaluation ended before the queue was asked"
    finally:
        thread.join(timeout=120)
    assert answers and answers[0].status_code == 201, answers
    assert answers[0].json()["state"] == "pending"
    state = alice.get(f"/v1/proposals/{document['proposal_id']}/decision").json()
    policy = state["policy"]
    assert policy["needs"].startswith(
        "needs 3 approvals, by alice, bob, carol: rule `updates`; "
        "rule `slow` failed (not decided within the 2 s deadline), so it asks as if it held"
    )
    errors = {rule["rule"]: rule.get("error") for rule in policy["rules"]}
    assert errors["slow"] == "not decided within the 2 s deadline"
    assert errors["updates"] is None


EQUIVALENT = [
    "plan.calls.map(c, c.tool).size() > 3",
    'plan.calls.filter(c, c.effect == "create").size() == 6',
    'size(plan.calls.filter(c, c.effect == "create")) == 6',
    "plan.calls.map(c, c.args).exists(a, a.amount > 100)",
    'plan.calls.map(c, c.args).filter(a, a.currency == "USD").map(a, a.amount).exists(x, x == 80)',
    'plan.calls.filter(c, c.effect == "delete").all(c, c.seq % 2 == 1)',
    'plan.calls.map(c, c.effect == "create", c.seq).size() == 6',
    'plan.calls.map(c, c.effect == "create", c.seq)[1] == 2',
    "plan.calls.filter(c, c.args.amount > 50 && c.args.amount < 90)[0].seq == 6",
    '"b" in plan.calls.map(c, c.tool)',
    "plan.calls.map(c, c.tool) == plan.calls.map(c, c.tool)",
    'size(plan.calls) == 12 && plan.calls[3].tool == "a" && plan.calls.exists(c, c.path.endsWith("/11"))',
    'plan.calls.filter(c, c.path.contains(", )")).size() == 0 // ).filter(',
    "plan.calls.exists_one(c, c.seq == 3) && plan.calls.map(x, 1.5).size() == 12",
    # walked once for each distinct value of the fields they read, weighed by how many calls hold it
    'plan.calls.all(c, c.effect != "update") && plan.calls.exists(c, c.tool == "c")',
    'plan.calls.exists_one(c, c.tool == "a" && c.effect == "create")',
    'plan.calls.exists_one(c, c.path == "/v1/x/4") && !plan.calls.exists(c, has(c.method))',
    'plan.calls.map(c, c.tool == "b", c.effect).size() == 4',
    'plan.calls.exists(c, c.tool == "a" || c.tool / 2 == 1)',  # true before the error, as walked
    'plan.calls.all(c, c.tool != "a" && c.tool / 2 == 1)',  # false before the error, as walked
]
FAILING = [
    'plan.calls.filter(c, c.args.odd == "5").size() > 0',  # a call without the field
    "plan.calls.filter(c, c.seq).size() > 0",  # a condition that is not true or false
    "plan.calls.map(c, c.args.amount / (c.seq - 3)).size() > 0",  # division by zero
    'plan.calls.exists(c, c.tool == "b" || c.tool / 2 == 1)',  # the error first, as walked
    "plan.calls.filter(c, c.tool).size() > 0",
    "plan.calls.exists_one(c, c.effect)",
    "plan.calls.all(c, c.path)",
    "plan.calls.map(c, c.tool + 1).size() > 0",
]


def small_plan() -> dict[str, Any]:
    calls = [
        {
            "seq": seq,
            "tool": "abc"[seq % 3],
            "effect": ("create", "delete")[seq % 2],
            "path": f"/v1/x/{seq}",
            "args": {
                "amount": seq * 10,
                "currency": "EUR" if seq % 4 else "USD",
                **({"odd": 5} if seq == 7 else {}),
            },
        }
        for seq in range(12)
    ]
    return {
        "plan": {"calls": calls, "counts": {"create": 6}},
        "environment": None,
        "alarms": [],
        "target": {},
    }


@pytest.mark.parametrize("source", EQUIVALENT + FAILING)
def test_walks_over_the_calls_answer_as_the_binding_does_and_build_their_lists_once(source: str) -> None:
    """A `map` or `filter` over the calls is taken out of the rule (the binding builds its list by
    copying it at every step) and gives what the binding gives on the rule as written, or fails."""
    import cel

    values = small_plan()
    try:
        expected: object = cel.compile(source).execute(cel.Context(values))
    except Exception:
        expected = EvaluationError
    expression = compile_expression(source)
    walks = source.split("//")[0].count(".map(") + source.split("//")[0].count(".filter(")
    taken = [walk for walk in expression.walks if walk.kind in ("map", "filter")]
    assert len(taken) == walks, "a map or filter over the calls was left to the binding"
    assert ".map(" not in expression.program.source.replace(" ", "")
    assert ".filter(" not in expression.program.source.replace(" ", "")
    try:
        answer: object = expression.evaluate(context(values))
    except EvaluationError:
        answer = EvaluationError
    assert answer == expected, expected


def test_policy_check_times_each_rule_on_a_made_up_plan_and_warns_of_one_past_the_deadline(
    tmp_path: Path,
) -> None:
    from reviewer.plan.proposal import MAX_CALLS
    from reviewer.policy.commands import LARGEST_PLAN, made_up_plan

    assert LARGEST_PLAN == MAX_CALLS
    assert [call.effect for call in scan_proposal(made_up_plan(5)).calls] == [
        "update",
        "delete",
        "read",
        "other",
        "create",
    ]
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.split('[[rules]]\nname = "slow approve"')[0].replace("c.args.items", "[c.tool]"))
    checked = subprocess.run(
        [*REVIEWER, "policy", "check", str(policy), "--calls", "300", "--deadline", "60"],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr
    assert "cost on a made-up plan of 300 calls, deadline 60 s: the plan's values " in checked.stdout
    for rule in ("updates", "slow"):
        assert re.search(rf"^  rule '{rule}': [0-9.]+ s$", checked.stdout, re.M), checked.stdout
    assert checked.stderr == ""
    late = subprocess.run(
        [*REVIEWER, "policy", "check", str(policy), "--calls", "300", "--deadline", "0.000001"],
        capture_output=True,
        text=True,
    )
    assert late.returncode == 0, late.stderr
    for rule in ("updates", "slow"):
        assert (
            f"warning: rule '{rule}' did not finish within the 1e-06 s deadline on 300 calls; "
            "the queue would ask at least what it asks of every such plan"
        ) in late.stderr


def test_a_walk_read_only_for_its_size_gives_the_size_and_converts_nothing_back() -> None:
    counted = compile_expression(
        'size(plan.calls.filter(c, c.effect == "delete")) > 10 || plan.calls.map(c, c).size() > 1'
    )
    assert [walk.counted for walk in counted.walks] == [True, True]
    assert counted.program.source == "_walk0 > 10 || _walk1 > 1"
    listed = compile_expression(
        'plan.calls.filter(c, c.effect == "delete").size() > 10 && "t" in plan.calls.map(c, c.tool)'
    )
    assert [walk.counted for walk in listed.walks] == [True, False]


def test_a_worker_outlives_the_thread_that_first_asked_for_a_verdict() -> None:
    """The service asks from threads of a pool that end when idle; Linux kills a worker when the
    thread that started it ends, so workers are started by the evaluator's own thread."""
    evaluator = PolicyEvaluator(parse_policy(POLICY.split('[[rules]]\nname = "slow"')[0]), 60.0, workers=1)
    try:
        asker = threading.Thread(target=evaluator.evaluate, args=(body(slow_plan(10)),))
        asker.start()
        asker.join()
        (worker,) = evaluator._idle
        with pytest.raises(subprocess.TimeoutExpired):
            worker.process.wait(timeout=1)  # alive a second after the thread that asked ended
        assert evaluator.evaluate(body(slow_plan(10))).finished
        assert evaluator._idle == [worker]
    finally:
        evaluator.close()


GROUPED = [
    'plan.calls.exists(c, c.method == "DELETE" && c.path.startsWith("/v1/tickets/"))',
    'plan.calls.all(c, c.tool != "merge_tickets" || c.effect == "update")',
    'plan.calls.filter(c, c.effect == "delete" && c.method == "DELETE").size() == 3',
    'plan.calls.exists_one(c, c.path == "/v1/tickets/5")',
    'plan.calls.exists_one(c, c.method == "")',  # false: three calls hold the one value
    'plan.calls.map(c, c.tool == "close_ticket", c.path).size() == 4',
    "plan.calls.map(c, c.effect).size() == 12 && plan.counts.destructive == 5",
    'plan.calls.exists(c, c.method == "POST" || c.path / 2 == 1)',
    "plan.calls.all(c, c.path.size() > 0)",  # false: a call without a request reads ""
]
PROJECTED = [
    "plan.calls.map(c, c.args).exists(a, a.ticket == 7)",
    "plan.calls.map(c, c.args).filter(a, a.ticket > 6).size() == 6",
    "plan.calls.map(c, c.args).map(a, a.ticket).exists(t, t == 13)",
    "plan.calls.map(c, c.args).map(a, a.missing).size() > 0",  # no such field: fails
]


def varied_plan() -> bytes:
    """Twelve calls of three tools and four effects, some without a request, one destructive update."""
    calls: list[dict[str, Any]] = []
    for seq in range(1, 13):
        tool, effect, method = (
            ("close_ticket", "delete", "DELETE"),
            ("merge_tickets", "update", "PATCH"),
            ("read_ticket", "read", "GET"),
        )[seq % 3]
        call: dict[str, Any] = {"tool": tool, "effect": effect, "args": {"ticket": seq}}
        if seq % 4:
            call["request"] = {"method": method, "path": f"/v1/tickets/{seq}"}
        if seq == 2:
            call["destructive"] = True
        calls.append(call)
    return body(proposal_document(calls, proposal_id=unique_id("varied")))


@pytest.mark.parametrize("source", GROUPED + PROJECTED)
def test_walks_in_the_queue_answer_as_the_binding_over_every_call(source: str) -> None:
    """The queue walks the first once for each distinct value of the fields they read (counted in
    its one pass over the calls), weighed by how many calls hold it, and reads a `map` of one field
    of each call out of the calls as Python holds them; the binding, on the rule as written over
    every call as a CEL value, gives the same answer or also fails."""
    import cel

    from reviewer.policy.verdict import activation

    policy = parse_policy(f"[[rules]]\nname = 'r'\nwhen = '{source}'\napprovals = 2\n")
    walks = policy.rules[0].when.walks
    if source in GROUPED:
        assert walks and all(walk.fields is not None for walk in walks)
        assert not policy.reads_call_list, "the calls were read one by one"
    else:
        assert walks[0].projection == "args" and not policy.rules[0].when.reads_call_list
    plan = scan_proposal(varied_plan())
    every_call = parse_policy(
        "[[rules]]\nname = 'r'\nwhen = 'plan.calls[0].seq + plan.calls[0].tool.size() + "
        "plan.calls[0].effect.size() + plan.calls[0].method.size() + plan.calls[0].path.size() + "
        "plan.calls[0].args.size() > 0'\n"
        "approvals = 2\n"
    )
    values = activation(every_call, plan, every_call.default, [])
    values.pop("_groups")
    try:
        expected: object = cel.compile(source).execute(cel.Context(values))
    except Exception:
        expected = EvaluationError
    verdict = evaluate(policy, plan)
    (match,) = verdict.matched or (None,)
    answer = EvaluationError if match is not None and match.error else match is not None
    assert answer == expected, expected


HUGE = (
    "plan.calls.exists(c, [c.args.items + c.args.items].exists(a, [a + a].exists(b, [b + b].exists(d, "
    "[d + d].exists(e, [e + e].exists(f, [f + f].exists(g, (g + g).size() < 0)))))))"
)
"""256 copies of one call's list, doubled walk by walk: 20,000 items (130 kB of JSON) make over
400 MB, past a worker's bound of 40 times the plan plus 256 MB."""


def test_a_rule_that_builds_past_the_memory_bound_fails_closed_and_says_so() -> None:
    policy = parse_policy(f"[[rules]]\nname = 'huge'\nwhen = '{HUGE}'\napprovals = 3\n")
    document = proposal(unique_id("huge"), calls=1)
    document["calls"][0]["args"]["items"] = list(range(20_000))
    evaluator = PolicyEvaluator(policy, 120.0, workers=1)
    try:
        result = evaluator.evaluate(body(document))
        assert not result.finished, "the rule built its lists unbounded"
        assert result.verdict.requirement.approvals == 3
        assert re.fullmatch(
            r"needs 3 approvals; rule `huge` failed \(not decided: the evaluation passed its memory limit "
            r"\(2\d\d MB for a plan of 0\.1 MB\)\), so it asks as if it held",
            needs(result.verdict),
        ), needs(result.verdict)
        document["calls"][0]["args"]["items"] = [1]
        assert evaluator.evaluate(body(document)).finished, "no worker after the one that ran out"
    finally:
        evaluator.close()


class _EndsTheWorkerThatLoadsIt(Policy):
    """A policy that a worker cannot load: unpickling it ends the worker before it is ready."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (os._exit, (3,))


def test_a_worker_that_ends_before_it_is_ready_is_reaped_and_forgotten() -> None:
    policy = parse_policy('[[rules]]\nname = "u"\nwhen = "plan.counts.update >= 0"\napprovals = 2\n')
    ending = _EndsTheWorkerThatLoadsIt(**vars(policy))
    evaluator = PolicyEvaluator(ending, 60.0, workers=1)
    started: list[Any] = []
    start = evaluator._start
    evaluator._start = lambda: started.append(start()) or started[-1]  # type: ignore[method-assign]
    try:
        result = evaluator.evaluate(body(proposal(unique_id("ends"))))
        assert not result.finished
        assert result.verdict.requirement.approvals == 2, "the plan did not fail closed"
        kept = {worker.process.pid for worker in evaluator._idle}
        assert set(evaluator._started) == kept, "a worker that never started is still counted"
        ended = [worker for worker in started if worker.process.pid not in kept]
        assert ended and all(worker.process.returncode == 3 for worker in ended), "not reaped"
    finally:
        evaluator.close()
    assert evaluator._started == {}


UNDER_A_HARD_LIMIT = """\
import json, sys
from reviewer.policy.bounded import PolicyEvaluator
from reviewer.policy.file import Policy, parse_policy
from reviewer.policy.verdict import needs
plan = sys.stdin.buffer.read()
answers = []
for source in json.loads(sys.argv[1]):
    evaluator = PolicyEvaluator(parse_policy(source), 60.0, workers=1)
    try:
        result = evaluator.evaluate(plan)
    finally:
        evaluator.close()
    answers.append([result.finished, needs(result.verdict)])
print(json.dumps(answers))
"""
"""Each policy of argv[1] evaluated on the plan read from stdin: whether it finished, and what it needs."""


def test_a_worker_under_a_hard_memory_limit_below_its_bound_evaluates_within_that_limit() -> None:
    """`ulimit -v` below what a worker would allow itself: the bound is the hard limit (setting
    it past that raised in the worker, and every plan failed closed), and a rule that builds past
    it says the hard limit capped it."""
    import resource

    document = proposal(unique_id("capped"), calls=1)
    document["calls"][0]["args"]["items"] = list(range(20_000))
    small = '[[rules]]\nname = "small"\nwhen = "plan.counts.update >= 0"\napprovals = 2\n'
    huge = f"[[rules]]\nname = 'huge'\nwhen = '{HUGE}'\napprovals = 3\n"
    hard = 200 * 1024 * 1024  # a worker holds about 60 MB: less than its 256 MB of headroom is left
    run = subprocess.run(
        [sys.executable, "-c", UNDER_A_HARD_LIMIT, json.dumps([small, huge])],
        input=body(document),
        capture_output=True,
        timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (hard, hard)),
    )
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    (small_finished, small_needs), (huge_finished, huge_needs) = json.loads(run.stdout)
    assert small_finished, small_needs
    assert not huge_finished
    assert "capped by the service's hard address-space limit" in huge_needs, huge_needs
    assert "less than it would allow" in run.stderr.decode(), "the operator was not told"


SLOW_REJECT = f"""\
[[rules]]
name = "slow reject"
when = '{SLOW}'
reject = "never"
"""
"""A reject rule that outlives any test: undecided, it would reject the plan."""


def test_closing_the_evaluator_stops_its_workers_evaluating_or_idle_and_starts_no_more() -> None:
    """A shutdown decides nothing: the evaluation it cuts short raises, where failing closed would
    have rejected the plan (its `reject` rule undecided) for good."""

    evaluator = PolicyEvaluator(parse_policy(POLICY + SLOW_REJECT), 120.0, workers=1)
    results: list[Any] = []

    def evaluate_slow_plan() -> None:
        try:
            results.append(evaluator.evaluate(body(slow_plan())))
        except EvaluatorClosed as closed:
            results.append(closed)

    evaluating = threading.Thread(target=evaluate_slow_plan)
    try:
        evaluating.start()
        wait_for(lambda: evaluator._started, limit=60)
        workers = list(evaluator._started.values())
    finally:
        evaluator.close()
        evaluating.join(timeout=60)
    assert not evaluating.is_alive(), "the evaluation went on after close"
    assert all(worker.process.returncode is not None for worker in workers)
    assert not set(children(os.getpid())) & {worker.process.pid for worker in workers}
    assert evaluator._started == {}, "a worker was started after close"
    assert len(results) == 1 and isinstance(results[0], EvaluatorClosed), f"a verdict: {results}"
    with pytest.raises(EvaluatorClosed):
        evaluator.evaluate(body(slow_plan(10)))


def test_a_submission_the_stopping_queue_cannot_judge_is_answered_503_and_not_stored(tmp_path: Path) -> None:
    """Not a `policy:` rejection written for good: the agent submits again, to a queue that runs."""
    policy = parse_policy('[[rules]]\nname = "all"\nwhen = "true"\nreject = "no"\n')
    store = open_store(
        tmp_path / "queue.sqlite3",
        clock=time.time,
        pending_ttl=600,
        approval_ttl=60,
        policy=policy,
        policy_evaluator=PolicyEvaluator(policy),
        create=True,
    )
    store.policy_evaluator.close()
    token = mint_token()
    store.create_token("agent", "agent", hash_token(token))
    app = create_app(None, store=store)

    async def submit_then_read() -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://queue", headers=headers) as client:
            submitted = await client.post("/v1/proposals", content=body(proposal("stopping")))
            return submitted, await client.get("/v1/proposals/stopping/decision")

    try:
        submitted, decision = asyncio.run(submit_then_read())
    finally:
        store.close()
    assert (submitted.status_code, submitted.json()["error"]) == (503, "unavailable"), submitted.text
    assert decision.status_code == 404, decision.text


def test_the_service_stops_its_evaluating_processes_when_it_stops(tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(POLICY.split('[[rules]]\nname = "slow"')[0])
    service = Service(
        db=tmp_path / "queue.sqlite3",
        log_path=tmp_path / "service.log",
        serve_args=("--policy", str(tmp_path / "policy.toml")),
    )
    service.start()
    try:
        with service.client(service.token("agent", "agent")) as agent:
            answer = agent.post("/v1/proposals", content=body(proposal(unique_id("stop"))))
        assert answer.status_code == 201, answer.text
        assert service.process is not None
        workers = children(service.process.pid)
        assert workers, "the policy was evaluated without a worker"
    finally:
        service.stop()
    left = [pid for pid in workers if Path(f"/proc/{pid}").exists()]
    assert left == [], f"processes {left} outlived the service"


NESTED = [
    "plan.calls.exists(c, c.args.items.map(i, i * 2).exists(x, x == 38))",
    "plan.calls.map(c, c.args).exists(a, a.items.filter(i, i % 3 == 0).size() == 7)",
    "plan.calls.all(c, c.args.items.map(i, i > 5, [i, i]).map(p, p[0]).size() == 14)",
    "plan.calls.exists(c, c.args.items.map(i, [1, 0].map(d, 1 / d).size() > 0 || i > 9) == [])",
    # each inner walk raises, and `|| true` takes the error: its list is left open, then dropped
    "plan.calls.exists(c, c.args.items.map(i, [1, 0].map(d, 1 / d).size() > 0 || true).all(x, x))",
    '{"a": 1}.map(k, k) == ["a"] && [[3, 1], [2]].map(l, l.filter(x, x > 1)) == [[3], [2]]',
    "plan.calls.exists(c, c.args.items.filter(i, i).size() > 0)",  # a condition not true or false
]


@pytest.mark.parametrize("source", NESTED)
def test_maps_and_filters_over_any_list_answer_as_the_binding_and_take_one_step_a_value(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `map` or `filter` over a call's own list (or any list a rule writes) is made an `exists`
    that hands each kept value to Python: no `map` or `filter` is left to the binding (which copies
    the list at every step), and the steps grow as the items do (20, 40, 60: equal differences)."""
    import cel

    from reviewer.policy.expressions import Activation

    steps: list[int] = []
    """How many lists were open at each step: as many as the places nested, never more (a list left
    open by a walk that raised would otherwise be searched past at every later step)."""
    put = Activation._put
    monkeypatch.setattr(
        Activation, "_put", lambda self, *args: steps.append(len(self._places)) or put(self, *args)
    )
    expression = compile_expression(source)
    programs = [
        expression.program.source,
        *(walk.program.source for walk in expression.walks if walk.program),
    ]
    assert not [text for text in programs if re.search(r"\.\s*(map|filter)\s*\(", text)], programs

    def answers(items: int) -> tuple[object, object, int]:
        values = small_plan()
        values["plan"]["calls"] = [{"seq": 1, "args": {"items": list(range(items))}}]
        try:
            expected: object = cel.compile(source).execute(cel.Context(values))
        except Exception:
            expected = EvaluationError
        steps.clear()
        try:
            answer: object = expression.evaluate(context(values))
        except EvaluationError:
            answer = EvaluationError
        return answer, expected, len(steps)

    taken = []
    for items in (20, 40, 60):
        answer, expected, count = answers(items)
        assert answer == expected
        assert max(steps, default=0) <= 2, "lists left open pile up"
        taken.append(count)
    assert taken[2] - taken[1] == taken[1] - taken[0], f"steps not linear in the items: {taken}"
