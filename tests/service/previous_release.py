"""The previous release, built from this repository's own history for the tests that make two
releases meet (a rollback, a rolling upgrade): its tree at `PREVIOUS_RELEASE` (`git archive`) on the
path of a venv of its own under `.previous-release/` (ignored by git, kept between runs), with the
libraries of the venv the tests run in. It runs with `-I`, so nothing of this checkout reaches it.

A clone holds that commit (`git clone` takes the whole history); a shallow one does not, and the
tests say to fetch it rather than pass without it.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Final

PREVIOUS_RELEASE: Final = "3ce5bd1992bfb73dfb76b903e70ff951af61cfaa"
"""The last queue before plans carried their dry run's request ids (queue schema 6): it refuses a
plan with a field it does not read, `$.dry_run: Object contains unknown field 'request_ids'`, and
answers no `GET /v1`, as the release a rollback returns to did."""

ROOT: Final = Path(__file__).resolve().parents[2]


def previous_release_python() -> tuple[str, ...]:
    """The command that runs Python with the previous release's `reviewer` (built once)."""
    home = ROOT / ".previous-release" / PREVIOUS_RELEASE[:12]
    python = home / "venv" / "bin" / "python"
    command = (str(python), "-I")
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers build it once
        if not (home / "ready").exists():
            _build(home, python)
    return command


def _build(home: Path, python: Path) -> None:
    found = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{PREVIOUS_RELEASE}^{{commit}}"], capture_output=True
    )
    if found.returncode != 0:
        raise RuntimeError(
            f"this clone lacks commit {PREVIOUS_RELEASE} (the previous release): a shallow clone? "
            "run `git fetch --unshallow`"
        )
    source = home / "src"
    source.mkdir(exist_ok=True)
    archive = subprocess.Popen(
        ["git", "-C", str(ROOT), "archive", PREVIOUS_RELEASE, "reviewer"], stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "-x", "-C", str(source)], stdin=archive.stdout, check=True)
    assert archive.wait() == 0
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home / "venv")], check=True)
    purelib = subprocess.run(
        [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    libraries = sysconfig.get_path("purelib")
    Path(purelib, "previous_release.pth").write_text(f"{source}\n{libraries}\n")
    (home / "ready").touch()
