"""Fixtures of the conformance tests."""

from __future__ import annotations

import os
import subprocess
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


CHECKOUT = Path(__file__).resolve().parents[2]


def _checkout_state() -> str:
    """What git sees in the checkout: changed, untracked and ignored paths (runs/, .flower/
    included; a folder is one line)."""
    return subprocess.run(
        ["git", "-C", str(CHECKOUT), "status", "--porcelain", "--ignored"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture(autouse=True)
def leaves_the_checkout_alone() -> Iterator[None]:
    """No conformance test writes into the checkout (a run dir defaulting to ./runs did)."""
    before = _checkout_state()
    yield
    assert _checkout_state() == before, "the test wrote into the checkout"
