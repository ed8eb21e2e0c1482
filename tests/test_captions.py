"""Every package's caption (its `__init__` docstring) names only modules that exist.

A caption lists a package's modules in parentheses, backticked: "signed checkpoints (`checkpoint`)",
"signing in (`sign_in`, `provider_login`)". A module renamed, moved or never written leaves a caption
that sends a new maintainer looking for it; this test reads each such name and finds its file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import reviewer

ROOT = Path(reviewer.__file__).parent
PACKAGES = sorted(path.parent for path in ROOT.rglob("__init__.py") if "__pycache__" not in path.parts)
MODULE_NAME = re.compile(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*")


def named_modules(caption: str) -> list[str]:
    """The backticked lowercase names that open a parenthesis, and those listed after them, up to a colon."""
    names = []
    for group in re.findall(r"\(([^()]*)\)", caption):
        if not group.startswith("`"):
            continue
        listed = group.split(":")[0]
        names += [name for name in re.findall(r"`([^`]*)`", listed) if MODULE_NAME.fullmatch(name)]
    return names


def exists(package: Path, name: str) -> bool:
    parts = name.split(".")
    base = ROOT.parent if parts[0] == "reviewer" else package
    path = base.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_a_caption_is_read_as_it_is_written() -> None:
    caption = (
        "signing in (`sign_in`, `provider_login`), a class (`TrustPolicy`), commands (`commands`: `serve`)"
    )
    assert named_modules(caption) == ["sign_in", "provider_login", "commands"]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda path: ".".join(path.relative_to(ROOT.parent).parts))
def test_each_module_a_caption_names_exists(package: Path) -> None:
    caption = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    missing = [name for name in named_modules(caption) if not exists(package, name)]
    assert not missing, f"{package.name}'s caption names modules that do not exist: {missing}"


def test_the_captions_name_modules_at_all() -> None:
    """Guards the reading itself: the captions that list modules are found to list them."""
    listed = {
        package.name: named_modules(ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or "")
        for package in PACKAGES
    }
    assert {"merkle", "checkpoint", "verify"} <= set(listed["trail"])
    assert {"app", "store", "commands"} <= set(listed["service"])
