"""Fixtures shared by every test package."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty folder to run the CLI in (its realpath: the SDK keys sessions by it)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws.resolve()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
