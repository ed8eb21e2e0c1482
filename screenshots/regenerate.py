"""Regenerate the README's pictures from the snapshot tests: `python screenshots/regenerate.py`.

The snapshot tests already drive the app through each screen at a fixed size; this refreshes their
SVGs and copies the ones the README shows here under plain names.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SNAPSHOTS = HERE.parent / "tests" / "tui" / "__snapshots__" / "test_snapshots"
PICTURES = {
    "test_queue_screen.svg": "queue.svg",
    "test_review_server_dry_run.svg": "review-server.svg",
    "test_review_record_dry_run.svg": "review-record.svg",
    "test_writes_kept_alarm.svg": "writes-kept.svg",
    "test_outlier_in_extremes.svg": "outlier.svg",
    "test_hostile_proposal.svg": "hostile.svg",
    "test_approve_confirmation.svg": "confirm.svg",
    "test_drift_view.svg": "drift.svg",
    "test_help_screen.svg": "help.svg",
    "test_review_at_80x24.svg": "review-80x24.svg",
}


def main() -> int:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--snapshot-update",
            str(SNAPSHOTS.parents[1] / "test_snapshots.py"),
        ],
        check=True,
        cwd=HERE.parent,
    )
    for snapshot, picture in PICTURES.items():
        shutil.copy(SNAPSHOTS / snapshot, HERE / picture)
        print(f"screenshots/{picture}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
