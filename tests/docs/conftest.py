"""Fixtures for the documentation tests: the generator and the examples, imported by path."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path) -> ModuleType:
    """Import a Python file that is in no package (the generator, an example workflow)."""
    name = f"docs_test_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def load_file() -> Callable[[Path], ModuleType]:
    return _load


@pytest.fixture(scope="session")
def generator() -> ModuleType:
    return _load(ROOT / "docs" / "cli" / "generate.py")
