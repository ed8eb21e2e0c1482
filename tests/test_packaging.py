"""What a wheel holds: a package's modules and the files `[tool.setuptools.package-data]` names. Every
other file under `reviewer/` (the samples, the app's styles, the look-alike table) must be named
there, or an installed `reviewer` lacks it; `.ci/run`'s release check builds the wheel and looks too
(`tools/check_installed.py`), this finds it without a build."""

from __future__ import annotations

import fnmatch
import os
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "reviewer"


def data_files() -> list[Path]:
    """Every file under `reviewer/` that is not a module, links followed (the samples are a link)."""
    found = []
    for folder, folders, files in os.walk(PACKAGE, followlinks=True):
        folders[:] = [name for name in folders if name != "__pycache__"]
        found += [Path(folder) / name for name in files if not name.endswith((".py", ".pyc"))]
    return sorted(found)


def named(path: Path, package_data: dict[str, list[str]]) -> bool:
    """Whether a glob of a package above `path` names it, one path component a glob component."""
    for package in path.parents:
        if not (package / "__init__.py").exists() or not package.is_relative_to(PACKAGE):
            continue
        dotted = ".".join(package.relative_to(ROOT).parts)
        parts = path.relative_to(package).parts
        for pattern in package_data.get(dotted, []):
            globs = pattern.split("/")
            if len(globs) == len(parts) and all(map(fnmatch.fnmatchcase, parts, globs)):
                return True
    return False


def test_every_file_the_package_reads_at_run_time_is_named_for_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    package_data = config["tool"]["setuptools"]["package-data"]
    files = data_files()
    assert {path.name for path in files} >= {
        "reviewer.tcss",
        "confusables.txt",
        "py.typed",
        "hostile-markup.json",
    }
    assert [str(path.relative_to(ROOT)) for path in files if not named(path, package_data)] == []


def test_a_file_no_glob_names_is_found() -> None:
    package_data = {"reviewer": ["py.typed"], "reviewer.tui": ["*.css"]}
    assert named(PACKAGE / "py.typed", package_data)
    assert not named(PACKAGE / "tui" / "reviewer.tcss", package_data)
    assert not named(PACKAGE / "sample_proposals" / "hostile-markup.json", package_data)
