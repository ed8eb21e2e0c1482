"""Other users on this machine, for the sandbox's tests: an unprivileged operator and a second local
user, switched to with `setpriv` (the tests run as root), and a copy of the project they can read.

The checkout may sit in a folder only its owner opens (a 0700 home): the copy makes it readable by
any uid wherever the checkout is. Its files are hard links (a copy where the file system differs), its
folders the operator's own, as a real operator owns its virtual environment: a `.pth` the operator
could write there is one the sandbox must keep the child from writing.

Where the tests cannot run (not root, no setpriv, bubblewrap, tmux or ssh-agent), they skip saying
why, and fail under CI (the environment variable CI set), which installs all of it.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from tests.run.harness import ROOT

OPERATOR: Final = 65534
"""The operator: `nobody`, who owns nothing the tests do not hand it."""
SECOND_USER: Final = 64999
"""Another local user, with no account: it owns nothing at all."""
NEEDED_PROGRAMS: Final = ("setpriv", "bwrap", "tmux", "ssh-agent", "ssh-add", "ssh-keygen", "setsid")


def as_user(uid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def missing() -> str | None:
    """Why these tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "switching to other users needs root (setpriv)"
    absent = [name for name in NEEDED_PROGRAMS if shutil.which(name) is None]
    if absent:
        return f"{', '.join(absent)} not installed"
    if _system_python() is None:
        return f"no /usr/bin/python{sys.version_info.major}.{sys.version_info.minor} for other users to run"
    return None


def require_other_users() -> None:
    """Skip saying why these tests cannot run here; under CI, fail instead."""
    reason = missing()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"the sandbox tests must run in CI, and cannot: {reason}")
    pytest.skip(reason)


def _system_python() -> str | None:
    return shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin")


@dataclass(frozen=True)
class SharedInstall:
    """The project and its packages where every uid may read them, folders owned by the operator."""

    folder: Path
    python: str
    site_dirs: tuple[Path, ...]

    @property
    def project(self) -> Path:
        return self.folder / "project"

    @property
    def environment(self) -> dict[str, str]:
        path = [str(self.project), *(str(folder) for folder in self.site_dirs)]
        return {"PYTHONPATH": os.pathsep.join(path), "PYTHONDONTWRITEBYTECODE": "1"}

    def file(self, relative: str) -> str:
        return str(self.project / relative)


def _link_tree(source: Path, target: Path) -> None:
    done = subprocess.run(["cp", "-al", str(source), str(target)], capture_output=True)
    if done.returncode != 0:  # another file system: copy
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target, symlinks=True)


def _installed_for_the_core(packages: Path) -> set[str]:
    """The top-level entries of `packages` that the project's core install needs: its distribution's
    requirements without extras, and theirs, to the end (not the 400 MB every extra brings)."""
    provider = importlib.metadata.packages_distributions().get("reviewer", ["reviewer"])[0]
    wanted, seen, entries = [provider], set(), set()
    while wanted:
        name = re.sub(r"[-_.]+", "-", wanted.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in distribution.files or []:
            top = Path(str(file)).parts[0]
            if (packages / top).exists() and top not in ("..", "__pycache__"):
                entries.add(top)
        for requirement in distribution.requires or []:
            if "extra ==" not in requirement:
                wanted.append(re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0])
    return entries


def shared_install() -> SharedInstall:
    folder = Path(tempfile.mkdtemp(prefix="reviewer-shared-"))
    project = folder / "project"
    (project / "tests" / "run").mkdir(parents=True)
    _link_tree(ROOT / "reviewer", project / "reviewer")
    _link_tree(ROOT / "examples", project / "examples")
    (project / "tests" / "__init__.py").touch()
    for module in (ROOT / "tests" / "run").glob("*.py"):
        shutil.copy(module, project / "tests" / "run" / module.name)
    site_dirs = []
    for number, packages in enumerate(site.getsitepackages()):
        if Path(packages).is_dir():
            target = folder / f"site-{number}"
            target.mkdir()
            for name in sorted(_installed_for_the_core(Path(packages))):
                _link_tree(Path(packages) / name, target / name)
            site_dirs.append(target)
    for where, _folders, _ in os.walk(folder):
        os.chown(where, OPERATOR, OPERATOR)
        os.chmod(where, 0o755)
    python = _system_python()
    assert python is not None
    return SharedInstall(folder, python, tuple(site_dirs))
