"""Fixtures for the session-store tests: stores that are always closed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from flower.stores.sqlite import SqliteSessionStore

S = TypeVar("S", bound=SqliteSessionStore)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def opened() -> Iterator[Callable[[S], S]]:
    """Register a store to be closed at teardown; returns it for chaining."""
    stores: list[SqliteSessionStore] = []

    def track(store: S) -> S:
        stores.append(store)
        return store

    yield track
    for store in stores:
        store.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "runs" / "sessions.db"


@pytest.fixture
def store(
    db: Path, opened: Callable[[SqliteSessionStore], SqliteSessionStore]
) -> SqliteSessionStore:
    return opened(SqliteSessionStore(db))
