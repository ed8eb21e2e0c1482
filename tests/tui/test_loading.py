"""The load pipeline: a proposal is listed and readable before its checks, digest and analysis end;
approving waits for the digest; a large file never holds the others back; an adversarial file is shown
or refused within a memory bound the OS measures."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.screen import Screen

import reviewer.tui.loader as loader_module
from reviewer.__main__ import COMMAND_MODULES
from reviewer.plan.proposal import MAX_CALL_VALUES
from reviewer.tui.app import ReviewerApp
from reviewer.tui.model.sources import DecisionOutcome, QueueItem
from reviewer.tui.screens.dialogs import ConfirmScreen
from reviewer.tui.screens.review import ReviewScreen
from reviewer.tui.widgets.plan_view import PlanView
from tests.tui.helpers import SAMPLES, wait_until_loaded

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
REFUNDS = "billing-refunds-2000.server.json"
SERVER = "deskline-merge.server.json"


class Gate:
    """Holds a step of the loader's thread until the test opens it (no sleeps, no timing)."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.waiting = threading.Event()

    def hold(self) -> None:
        self.waiting.set()
        assert self.opened.wait(30), "the test never opened the gate"


@pytest.fixture
def gate() -> Iterator[Gate]:
    held = Gate()
    yield held
    held.opened.set()  # whatever the test did, the loader's thread must not stay blocked


def hold_before(monkeypatch: pytest.MonkeyPatch, name: str, gate: Gate, when: Callable[..., bool]) -> None:
    """Make the loader's `name` step wait at `gate` when `when(*its arguments)` holds."""
    original = getattr(loader_module, name)

    def held(*args: Any) -> Any:
        if when(*args):
            gate.hold()
        return original(*args)

    monkeypatch.setattr(loader_module, name, held)


async def until(pilot, predicate: Callable[[], object], what: str, rounds: int = 1500) -> None:  # type: ignore[no-untyped-def]
    for _ in range(rounds):
        if predicate():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"never happened: {what}")


def pane(screen: ReviewScreen, selector: str) -> str:
    return str(screen.query_one(selector).render())


async def test_listed_and_openable_before_the_analysis_finishes(sample_folder, monkeypatch, gate) -> None:
    hold_before(monkeypatch, "compute_figures", gate, lambda analysis, pause: True)
    app = ReviewerApp(sample_folder(REFUNDS))
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, gate.waiting.is_set, "the analysis to start")
        item = app.items["billing-refunds-bulk-2000"]
        assert item.figures() is None
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ReviewScreen), "the review to open")
        review = app.screen
        await pilot.pause()
        rows = [review.query_one(PlanView).render_line(y).text for y in range(1, 4)]
        assert all("create_refund" in row and "validated" in row for row in rows), rows
        await until(pilot, lambda: 1 in item.verified, "the checks and the digest")
        assert "still computing: the analysis" in pane(review, "#ratios")
        assert "still computing: the analysis" in pane(review, "#extremes")
        assert item.digests[1][:12] in str(review.query_one("#chrome").render())
        gate.opened.set()
        await wait_until_loaded(pilot)
        assert "2,000" in pane(review, "#ratios") and "amount_cents" in pane(review, "#extremes")
        assert item.figures() is not None


class RecordingDecider:
    """Records what would be sent, so a test sees that a blocked approval sent nothing."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, str]] = []

    async def decide(
        self, item: QueueItem, revision: int, plan_sha256: str, decision: str, reason: str
    ) -> DecisionOutcome:
        self.sent.append((decision, revision, plan_sha256))
        return DecisionOutcome(True, f"{decision} sent")


async def test_approve_waits_for_the_digest_and_names_the_one_it_showed(
    sample_folder, monkeypatch, gate
) -> None:
    hold_before(monkeypatch, "plan_sha256", gate, lambda proposal, pause: True)
    decider = RecordingDecider()
    app = ReviewerApp(sample_folder(SERVER), decider=decider)
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, gate.waiting.is_set, "the digest to start")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ReviewScreen), "the review to open")
        review = app.screen
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        body = str(app.screen.body)
        assert "CANNOT BE APPROVED YET" in body and "not computed yet" in body
        await pilot.press("y")
        await pilot.pause()
        assert "not approved: not every call has been checked" in pane(review, "#decision")
        await pilot.press("a")  # opened while the digest is unknown, answered once it is known
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the second confirmation")
        gate.opened.set()
        await until(pilot, lambda: 1 in review.item.verified, "the digest")
        await pilot.press("y")
        await pilot.pause()
        assert decider.sent == [], "an approval was sent naming a digest the reviewer never saw"
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the third confirmation")
        digest = review.item.digests[1]
        assert digest in str(app.screen.body) and "CANNOT" not in str(app.screen.body)
        await pilot.press("y")
        await wait_until_loaded(pilot)
        assert decider.sent == [("approve", 1, digest)]


async def test_a_call_refused_after_listing_marks_the_row_broken_and_blocks_approval(sample_folder) -> None:
    folder: Path = sample_folder()
    broken = (SAMPLES / SERVER).read_text().replace('"effect": "delete"', '"effect": "drop"')
    (folder / "late.json").write_text(broken)
    app = ReviewerApp(folder)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        item = app.items["deskline-merge-0042-server"]
        assert "$.calls[3].effect" in item.problems[1]
        assert [broken.name for broken in app.queue_screen.broken] == ["late.json"]
        await pilot.press("enter")
        await wait_until_loaded(pilot)
        review = app.screen
        assert isinstance(review, ReviewScreen)
        assert "BROKEN: $.calls[3].effect" in pane(review, "#alarms")
        await pilot.press("a")
        await pilot.pause()
        assert "CANNOT BE APPROVED YET: the proposal is broken" in str(app.screen.body)


async def test_a_large_file_never_holds_back_the_smaller_ones(sample_folder, monkeypatch, gate) -> None:
    """The large plan is named first; while its analysis is held, the small ones are listed,
    checked, hashed and analysed (smallest first, after the cheap scan of every file)."""
    hold_before(monkeypatch, "compute_figures", gate, lambda analysis, pause: len(analysis) >= 2_000)
    folder: Path = sample_folder(SERVER, "crm-dedupe.writes-kept.json")
    (folder / "a-large.json").write_text((SAMPLES / REFUNDS).read_text())
    app = ReviewerApp(folder)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: len(app.items) == 3 and gate.waiting.is_set(), "all listed")
        small = [app.items["deskline-merge-0042-server"], app.items["crm-dedupe-0311"]]
        assert all(item.figures() is not None and 1 in item.verified for item in small)
        assert app.items["billing-refunds-bulk-2000"].figures() is None
        gate.opened.set()  # let the held analysis finish before the app closes


async def test_invalid_utf8_is_a_broken_file_and_later_files_still_load(sample_folder) -> None:
    folder: Path = sample_folder(SERVER)
    data = (SAMPLES / "crm-dedupe.writes-kept.json").read_bytes()
    (folder / "a-not-utf8.json").write_bytes(data.replace(b"crm-agent", b"crm-\xc3agent"))
    app = ReviewerApp(folder)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        assert set(app.items) == {"deskline-merge-0042-server"}
        problems = {broken.name: broken.problem for broken in app.queue_screen.broken}
        assert problems["a-not-utf8.json"].startswith("is not UTF-8: byte 0xc3 at offset")


# --- memory, read from the OS --------------------------------------------------------------------

MEMORY_BASE = 150 * 1024 * 1024
"""What the app may hold whatever the file: Textual and the app (about 45 MB) and the calls being
decoded at one time (each at most MAX_CALL_VALUES values, about 16 MB decoded, a few at once)."""


def write_shape(folder: Path, args_json: bytes, calls: int) -> Path:
    header = json.loads((SAMPLES / SERVER).read_text())
    header.pop("calls")
    one = b'{"seq": %d, "tool": "t", "effect": "other", "args": ' + args_json + b"}"
    body = json.dumps(header)[:-1].encode() + b', "calls": ['
    body += b",".join(one % (seq + 1) for seq in range(calls)) + b"]}"
    folder.mkdir()
    (folder / "shape.json").write_bytes(body)
    return folder / "shape.json"


def peak_of_the_app(folder: Path) -> dict[str, Any]:
    """Run the demo on `folder` in a fresh process, open the proposal, press end; its VmHWM."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "peak_memory.py"), str(folder), "--open"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    return json.loads(done.stdout.splitlines()[-1])


def empty_arrays(count: int) -> bytes:
    return b'{"x": [' + b",".join([b"[]"] * count) + b"]}"


@pytest.mark.parametrize(
    ("arrays", "calls", "shown"),
    [
        pytest.param(10_000_000, 1, False, id="30 MB of [] in one call: refused"),
        pytest.param(MAX_CALL_VALUES - 10, 4, True, id="calls of [] within the caps: shown"),
    ],
)
def test_an_adversarial_file_is_shown_or_refused_within_three_times_its_size(
    tmp_path: Path, arrays: int, calls: int, shown: bool
) -> None:
    """Two bytes of `[],` decode into about 60 bytes of objects: unbounded, 32 MB took the app to 1.6 GB."""
    # Built here, not as parameters: those every worker would build at collection and keep to the end.
    path = write_shape(tmp_path / "folder", empty_arrays(arrays), calls)
    result = peak_of_the_app(path.parent)
    bound = 3 * path.stat().st_size + MEMORY_BASE
    assert result["peak_rss_bytes"] <= bound, f"{result['peak_rss_bytes']:,} bytes > {bound:,}"
    if shown:
        assert result["opened"] and result["analysed"] == ["deskline-merge-0042-server"]
    else:
        assert result["listed"] == [] and "JSON values; at most" in result["broken"]["shape.json"]


def test_the_demos_start_imports_nothing_its_first_row_does_not_need() -> None:
    """Start-up is measured to the first row (bench_load.py): the command line, the app module and
    the scan that lists the samples before the first frame must not pull in pydantic, the HTTP
    client (the host reading needs it, with the figures), the service, the queue's settings,
    signing, the drift, the analysis (made when a revision is first read), the review screens or
    the dialogs, the digest's hashing (OpenSSL), the prompt for a token, or the modules of the other
    commands."""
    probe = (
        "import sys\n"
        "from reviewer.__main__ import build_parser\n"
        "build_parser('demo').parse_args(['demo'])\n"
        "import reviewer.tui.app\n"
        "from reviewer.tui.loader import Listing\n"
        "from reviewer.tui.model.sources import BUNDLED_SAMPLES, proposal_files\n"
        "assert list(Listing().messages(proposal_files(BUNDLED_SAMPLES)))\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = set(done.stdout.split())
    unwanted = {
        "pydantic",
        "httpx",
        "fastapi",
        "starlette",
        "uvicorn",
        "tomllib",
        "reviewer.service.app",
        "reviewer.queue.config",
        "reviewer.queue.messages",
        "reviewer.signing.sshsig",
        "reviewer.plan.hosts",
        "reviewer.reading.drift",
        "reviewer.reading.analysis",
        "reviewer.tui.screens.dialogs",
        "getpass",
        "hashlib",
        "json",
        *(module for module in COMMAND_MODULES if module != "reviewer.tui.commands"),
    }
    assert not unwanted & loaded, sorted(unwanted & loaded)
    assert "reviewer.tui.screens.review" not in loaded


async def test_a_pushed_screen_holds_the_checks_until_it_is_painted(sample_folder) -> None:
    """The key that opens a plan is answered before its screen is composed: the screen's own claim
    keeps the completion waiting until the screen's first frame."""
    app = ReviewerApp(sample_folder(REFUNDS))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        assert not app.foreground.claimed
        screen = app.create_review_screen(app.items["billing-refunds-bulk-2000"])
        app.push_screen(screen)
        assert app.foreground.claimed and not gc.isenabled()
        await until(pilot, lambda: not app.foreground.claimed, "the claim to be released")
        assert app.screen is screen and screen.query_one(PlanView).render_line(1).text.strip()
        assert gc.isenabled()


async def test_a_replans_drift_is_shown_before_its_checks_and_not_marked_until_they_pass(
    sample_folder, monkeypatch, gate
) -> None:
    """`d` on a re-plan whose checks still run shows the differences at once (compared from the
    scans, first in the completion); the queue's Δ and the re-plan notice wait for the checks."""
    hold_before(monkeypatch, "check_calls", gate, lambda *args: True)
    app = ReviewerApp(sample_folder("deskline-triage.rev1.json", "deskline-triage.rev2.json"))
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, gate.waiting.is_set, "the checks to start")
        (item,) = app.items.values()
        # prepared by the completion thread before the checks; its message may still be on its way
        await until(pilot, lambda: item.known_drift(1, 2) is not None, "the drift prepared before the checks")
        assert not item.verified and item.latest_drift() is None
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ReviewScreen), "the review to open")
        await pilot.press("d")
        await until(pilot, lambda: app.screen.query(PlanView), "the drift view's rows")
        plan = app.screen.query_one(PlanView)
        assert "~ changed" in str(plan.border_title)
        assert "comparing" not in str(app.screen.query_one("#drift-summary").render())
        assert not item.verified and item.latest_drift() is None
        gate.opened.set()
        await wait_until_loaded(pilot)
        assert item.latest_drift() is not None


async def test_a_screen_is_styled_once_as_it_first_shows(sample_folder, monkeypatch) -> None:
    """Textual restyled a whole screen as it first resumed, right after styling it at mount, and the
    review screen a third time when its height's class came with the first resize: the queue and
    review screens are each styled once."""
    restyled: list[Screen[Any]] = []
    original = Screen.update_node_styles

    def update_node_styles(self: Screen[Any], animate: bool = True) -> None:
        restyled.append(self)
        original(self, animate)

    monkeypatch.setattr(Screen, "update_node_styles", update_node_styles)
    app = ReviewerApp(sample_folder(REFUNDS))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until_loaded(pilot)
        assert app.queue_screen not in restyled
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ReviewScreen), "the review to open")
        await wait_until_loaded(pilot)
        assert app.screen not in restyled
        assert app.screen.has_class("-tall")


def test_a_queued_runs_audit_verification_reaches_the_record_the_view_reads() -> None:
    """The live app reads the queue's stored report: its `audit` is carried to the record `v` shows."""
    from datetime import UTC, datetime

    from reviewer.queue.messages import StoredExecution
    from reviewer.tui.model.sources import execution_from_queue
    from tests.tui.helpers import AUDITED

    report = json.loads((SAMPLES / "deskline-merge.server.execution.json").read_text())
    stored = StoredExecution(
        revision=1,
        plan_sha256=report["plan_sha256"],
        executed_by="deskline-agent",
        at=datetime(2026, 12, 2, 1, 0, tzinfo=UTC),
        calls=report["calls"],
        audit=AUDITED,
    )
    assert execution_from_queue(report["proposal_id"], stored).audit == AUDITED
