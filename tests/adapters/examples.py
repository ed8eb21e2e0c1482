"""Load a file of `examples/` as a module, as a user would run it, so a test can call its `main`."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def example_fixture(name: str, sdk: str) -> Any:
    """A module-scoped fixture of the example `name`, loaded with the SDK it needs when the first test
    asks for it (skipping, naming the SDK, when it is not installed). Collecting the test file then
    imports no SDK: every test worker collects every file, and an SDK takes seconds to import."""

    @pytest.fixture(scope="module")
    def example() -> ModuleType:
        pytest.importorskip(sdk)
        return load_example(name)

    return example
