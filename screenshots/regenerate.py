"""Regenerate the README's pictures from the snapshot tests: `python screenshots/regenerate.py`.

The snapshot tests already drive the app through each screen at a fixed size; this refreshes their
SVGs and copies the ones the README shows here under plain names, each run of text placed at its
first visible cell (`place_runs`).
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TUI_TESTS = HERE.parent / "tests" / "tui"
SNAPSHOTS = TUI_TESTS / "__snapshots__" / "test_snapshots"
LIVE_SNAPSHOTS = TUI_TESTS / "live" / "__snapshots__" / "test_snapshots"
TRIAGE_SNAPSHOTS = TUI_TESTS / "live" / "__snapshots__" / "test_triage_sizes"
PICTURES = {
    SNAPSHOTS / "test_queue_screen.svg": "queue.svg",
    SNAPSHOTS / "test_review_server_dry_run.svg": "review-server.svg",
    SNAPSHOTS / "test_review_record_dry_run.svg": "review-record.svg",
    SNAPSHOTS / "test_writes_kept_alarm.svg": "writes-kept.svg",
    SNAPSHOTS / "test_outlier_in_extremes.svg": "outlier.svg",
    SNAPSHOTS / "test_hostile_proposal.svg": "hostile.svg",
    SNAPSHOTS / "test_approve_confirmation.svg": "confirm.svg",
    SNAPSHOTS / "test_drift_view.svg": "drift.svg",
    SNAPSHOTS / "test_help_screen.svg": "help.svg",
    SNAPSHOTS / "test_review_at_80x24.svg": "review-80x24.svg",
    SNAPSHOTS / "test_verification_against_an_audit_source.svg": "verification-audit.svg",
    LIVE_SNAPSHOTS / "test_drift_answering_changes_requested[100x30].svg": "drift-changes-requested.svg",
    TRIAGE_SNAPSHOTS / "test_header_and_rows[50x20].svg": "phone-50x20.svg",
    TRIAGE_SNAPSHOTS / "test_header_and_rows[200x50].svg": "wide-200x50.svg",
    TRIAGE_SNAPSHOTS / "test_a_superseded_revision_is_never_pending[50x20].svg": "superseded-50x20.svg",
}


_RUN = re.compile(
    r'(<text class="[^"]*" x=")([\d.]+)(" y="[\d.]+" textLength=")([\d.]+)("[^>]*>)([^<]*)(</text>)'
)
_SPACE = "&#160;"


def place_runs(svg: str) -> str:
    """Each run of text starting at its first visible cell, without the spaces at its edges.

    The terminal's SVG writes a run as it was styled: a cell's text then the space that parts it from
    the next cell often share a run (`&#160;DELETE /v1/tickets`). Renderers that trim a run's edges
    (librsvg does) draw its first letter where the space was, against the run before it:
    `deleteDELETE`. A run moved past its leading spaces, and cut before its trailing ones, reads the
    same in every renderer."""
    cell = min(
        float(match[4]) / len(html.unescape(match[6]))
        for match in _RUN.finditer(svg)
        if match[6] and html.unescape(match[6]).isascii()
    )

    def placed(match: re.Match[str]) -> str:
        text = match[6]
        leading = _edge_spaces(text, from_end=False)
        kept = text[leading * len(_SPACE) :]
        trailing = _edge_spaces(kept, from_end=True)
        kept = kept[: len(kept) - trailing * len(_SPACE)]
        if not kept:
            return ""
        x = float(match[2]) + leading * cell
        length = float(match[4]) - (leading + trailing) * cell
        return f"{match[1]}{x:g}{match[3]}{length:g}{match[5]}{kept}{match[7]}"

    return _RUN.sub(placed, svg)


def _edge_spaces(text: str, *, from_end: bool) -> int:
    """How many escaped spaces `text` starts (or ends) with."""
    count = 0
    while text.endswith(_SPACE * (count + 1)) if from_end else text.startswith(_SPACE * (count + 1)):
        count += 1
    return count


def main() -> int:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--snapshot-update",
            str(TUI_TESTS / "test_snapshots.py"),
            str(TUI_TESTS / "live" / "test_snapshots.py"),
            str(TUI_TESTS / "live" / "test_triage_sizes.py"),
        ],
        check=True,
        cwd=HERE.parent,
    )
    for snapshot, picture in PICTURES.items():
        (HERE / picture).write_text(place_runs(snapshot.read_text()))
        print(f"screenshots/{picture}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
