"""Check an installed `reviewer` (a wheel, in an environment of its own) against the checkout it was
built from: every file of the package is there, and the data the commands read at run time loads.

    .venv-release/bin/python tools/check_installed.py reviewer

Run by `.ci/run` after it installs the built wheel in a fresh environment, from outside the checkout
(so `import reviewer` finds the installed copy, never the source). A file the source package holds
and the wheel does not (a sample, the app's styles, the look-alike table) is named, and the exit is 1.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SKIPPED_PARTS = ("__pycache__",)


def package_files(root: Path) -> set[str]:
    """Every file under `root`, as paths relative to it, links followed (the samples are a link to
    the project's `sample_proposals/` in a checkout, and files in the wheel)."""
    found = set()
    for folder, folders, files in os.walk(root, followlinks=True):
        folders[:] = [name for name in folders if name not in SKIPPED_PARTS]
        for name in files:
            if not name.endswith(".pyc"):
                found.add(str((Path(folder) / name).relative_to(root)))
    return found


def main(source: str) -> int:
    import reviewer

    installed = Path(reviewer.__file__).parent
    source_root = Path(source).resolve()
    if installed.resolve() == source_root:
        print(f"{installed} is the checkout, not an installed copy: run from outside it", file=sys.stderr)
        return 2
    missing = sorted(package_files(source_root) - package_files(installed))
    for name in missing:
        print(f"the installed package lacks {name}", file=sys.stderr)
    if missing:
        return 1

    from reviewer.plan.lookalikes import skeleton
    from reviewer.plan.proposal import parse_proposal
    from reviewer.tui.app import ReviewerApp
    from reviewer.tui.model.sources import BUNDLED_SAMPLES, proposal_files

    samples = [path for path in proposal_files(BUNDLED_SAMPLES) if not path.name.endswith(".execution.json")]
    for path in samples:
        parse_proposal(path.read_bytes(), str(path))
    assert skeleton("dеlete") == skeleton("delete"), "the look-alike table did not load"  # Cyrillic е
    assert Path(ReviewerApp.CSS_PATH).read_text().strip(), "the app's styles are empty"  # type: ignore[arg-type]
    print(f"installed {installed}: {len(package_files(installed))} files, {len(samples)} sample proposals")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "reviewer"))
