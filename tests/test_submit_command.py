"""`reviewer submit FILE...` against a real queue on a loopback port: every bundled sample proposal
goes on the queue under an agent token and prints the line that opens it; a malformed file is refused
in the format's words before anything is sent; a queue's refusal is one line saying what was not sent."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reviewer.__main__ import main
from tests.queue_harness import Actors, Service, proposal, served_with_actors, unique_id

SAMPLES = Path(__file__).resolve().parent.parent / "reviewer" / "sample_proposals"
SAMPLE_PROPOSALS = sorted(
    path for path in SAMPLES.glob("*.json") if not path.name.endswith(".execution.json")
)


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Actors]]:
    yield from served_with_actors(tmp_path_factory.mktemp("queue"))


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def submit(
    queue: tuple[Service, Actors], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Ran]:
    """`reviewer submit ARGS` (in this process: the command line's own entry) under the named
    actor's agent token, the queue from REVIEWER_QUEUE."""
    service, actors = queue

    def run(*args: str | Path, token: str = "agent") -> Ran:
        monkeypatch.setenv("REVIEWER_QUEUE", service.url)
        monkeypatch.setenv("REVIEWER_AGENT_TOKEN", actors.tokens[token] if token else "")
        capsys.readouterr()
        code = main(["submit", *map(str, args)])
        said = capsys.readouterr()
        return Ran(code, said.out, said.err)

    return run


def written(folder: Path, document: dict[str, object] | str, name: str | None = None) -> Path:
    path = folder / (name or f"{unique_id('file')}.json")
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_every_sample_proposal_submits_and_prints_the_line_that_opens_it(
    queue: tuple[Service, Actors],
    submit: Callable[..., Ran],
) -> None:
    """All the bundled samples in one command, in name order (the triage's revision 1 before its
    revision 2): each prints its id, revision, digest and state, then `reviewer review ID`; the queue
    holds each under that id, with that digest."""
    service, actors = queue
    result = submit(*SAMPLE_PROPOSALS)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2 * len(SAMPLE_PROPOSALS) >= 20
    for path, said, opens in zip(SAMPLE_PROPOSALS, lines[::2], lines[1::2], strict=True):
        document = json.loads(path.read_text())
        proposal_id, revision = document["proposal_id"], document["revision"]
        head = re.fullmatch(
            rf"{re.escape(str(path))}: (\S+) revision (\d+) \(sha256 ([0-9a-f]{{12}})…\), pending", said
        )
        assert head and head.group(1) == proposal_id and int(head.group(2)) == revision, said
        assert opens == f"  reviewer review {proposal_id}"
        record = actors.alice.get(f"/v1/proposals/{proposal_id}").json()
        stored = {info["revision"]: info["plan_sha256"] for info in record["revisions"]}
        assert stored[revision].startswith(head.group(3))
    assert actors.alice.get("/v1/proposals/deskline-triage-0107/decision").json()["revision"] == 2
    again = submit(SAMPLE_PROPOSALS[0])
    assert again.returncode == 0 and again.stdout.splitlines()[1].startswith("  reviewer review "), (
        again.stderr
    )


def test_new_id_files_each_proposal_under_one_fresh_id_its_revisions_share(
    queue: tuple[Service, Actors],
    submit: Callable[..., Ran],
) -> None:
    """`--new-id`: the triage's two revision files go under one fresh id, random part first, as
    revisions 1 and 2; run again, another id: a sample can be tried on a queue that saw it."""
    from reviewer.queue.ids import ID_RANDOM_CHARS

    actors = queue[1]
    revisions = [SAMPLES / "deskline-triage.rev1.json", SAMPLES / "deskline-triage.rev2.json"]
    ids = []
    for _ in range(2):
        result = submit("--new-id", *revisions)
        assert result.returncode == 0, result.stderr
        opened = [line.split()[-1] for line in result.stdout.splitlines()[1::2]]
        assert len(set(opened)) == 1 and re.fullmatch(rf"[2-9a-z]{{{ID_RANDOM_CHARS}}}-[a-z0-9-]+", opened[0])
        ids.append(opened[0])
        state = actors.alice.get(f"/v1/proposals/{opened[0]}/decision").json()
        assert (state["revision"], state["state"]) == (2, "pending")
    assert ids[0] != ids[1]


def test_a_malformed_file_is_refused_in_the_formats_words_and_nothing_is_sent(
    queue: tuple[Service, Actors], submit: Callable[..., Ran], tmp_path: Path
) -> None:
    """A good file, a call with an effect the format does not know, a truncated file, a run's report
    and a missing file: one line for each bad one, exit 2, and the good one is not on the queue."""
    actors = queue[1]
    good_id, bad_id = unique_id("good"), unique_id("bad")
    good = written(tmp_path, proposal(good_id))
    document = proposal(bad_id)
    document["calls"][1]["effect"] = "destroy"  # type: ignore[index]
    bad = written(tmp_path, document)
    truncated = written(tmp_path, json.dumps(proposal(unique_id("cut")))[:-40])
    report = SAMPLES / "deskline-merge.server.execution.json"
    missing = tmp_path / "missing.json"
    result = submit(good, bad, truncated, report, missing)
    assert result.returncode == 2 and result.stdout == ""
    refused = result.stderr.splitlines()
    assert len(refused) == 4, result.stderr
    assert all(
        line.startswith("reviewer submit: ") and line.endswith("; nothing was submitted") for line in refused
    )
    assert refused[0].startswith(f"reviewer submit: {bad}: $.calls[1].effect: ") and "'destroy'" in refused[0]
    assert refused[1].startswith(f"reviewer submit: {truncated}: is not valid JSON")
    assert "this is a run's report, reviewer.execution/v1, not a proposal" in refused[2]
    assert refused[3].startswith(f"reviewer submit: cannot read {missing}: No such file")
    assert actors.alice.get(f"/v1/proposals/{good_id}").status_code == 404, "nothing of the batch was sent"


def test_what_the_queue_refuses_is_one_line_naming_what_was_not_sent(
    queue: tuple[Service, Actors], submit: Callable[..., Ran], tmp_path: Path
) -> None:
    """Another plan under a revision not above the latest is the queue's 409: the files before it
    are on the queue, it and those after are not, said in one line. A reviewer's token proposes
    nothing, and without an agent token the command says how to mint one."""
    actors = queue[1]
    first_id, later_id = unique_id("first"), unique_id("later")
    first = written(tmp_path, proposal(first_id))
    stale = written(tmp_path, proposal(first_id, calls=3))  # another plan under revision 1
    later = written(tmp_path, proposal(later_id))
    result = submit(first, stale, later)
    assert result.returncode == 1
    assert result.stdout.splitlines()[1] == f"  reviewer review {first_id}"
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"reviewer submit: {stale}: ") and "(HTTP 409)" in result.stderr
    assert result.stderr.rstrip().endswith("; this file and the 1 after it were not submitted")
    assert actors.alice.get(f"/v1/proposals/{later_id}").status_code == 404

    as_reviewer = submit(later, token="alice")
    assert as_reviewer.returncode == 1 and "(HTTP 403)" in as_reviewer.stderr
    assert len(as_reviewer.stderr.splitlines()) == 1 and "Traceback" not in as_reviewer.stderr
    tokenless = submit(later, token="")
    assert tokenless.returncode == 2
    assert "no agent token: set REVIEWER_AGENT_TOKEN or pass --token-file" in tokenless.stderr
    assert "reviewer token create --name NAME --role agent" in tokenless.stderr
    assert actors.alice.get(f"/v1/proposals/{later_id}").status_code == 404


def test_a_ca_file_that_is_not_one_is_a_line_and_nothing_is_sent(
    queue: tuple[Service, Actors], submit: Callable[..., Ran], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--ca-file` is this process's for every client it opens (`use_ca_file`): taken back after the test.
    monkeypatch.setenv("REVIEWER_CA_FILE", "")
    actors = queue[1]
    proposal_id = unique_id("ca")
    not_a_certificate = tmp_path / "ca.pem"
    not_a_certificate.write_text("\x1b[31mnot a certificate\n")
    result = submit(written(tmp_path, proposal(proposal_id)), "--ca-file", not_a_certificate)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.startswith("reviewer submit: ") and result.stderr.endswith("; nothing was sent\n")
    assert "Traceback" not in result.stderr and "\x1b" not in result.stderr
    assert actors.alice.get(f"/v1/proposals/{proposal_id}").status_code == 404
