"""Fixtures of the conformance tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.core import env


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """os.environ and load_dotenv()'s record put back afterwards: load_dotenv() sets keys
    that monkeypatch never saw."""
    saved = dict(os.environ)
    monkeypatch.setattr(env, "_loaded", {})
    yield
    os.environ.clear()
    os.environ.update(saved)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
