"""Fixtures for the terminal app: folders holding chosen sample proposals."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tui.helpers import SAMPLES


@pytest.fixture
def sample_folder(tmp_path: Path) -> Callable[..., Path]:
    """A folder holding copies of the named sample files, so a test shows exactly those."""

    def make(*names: str) -> Path:
        folder = tmp_path / "proposals"
        folder.mkdir(exist_ok=True)
        for name in names:
            shutil.copy(SAMPLES / name, folder / name)
        return folder

    return make
