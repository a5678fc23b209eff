"""Every store layer passes the SDK's own SessionStore contract tests, all of them."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from claude_agent_sdk import SessionStore
from claude_agent_sdk.testing import run_session_store_conformance

from flower.stores import PruningSessionStore, SqliteSessionStore, TrimmingSessionStore

LAYERS: dict[str, Callable[[Path, Path], SqliteSessionStore]] = {
    "sqlite": lambda db, ws: SqliteSessionStore(db),
    "trimming": lambda db, ws: TrimmingSessionStore(db, ws),
    "pruning": lambda db, ws: PruningSessionStore(db, ws),
}


@pytest.mark.anyio
@pytest.mark.parametrize("layer", sorted(LAYERS))
async def test_conformance(
    layer: str, tmp_path: Path, opened: Callable[[SqliteSessionStore], SqliteSessionStore]
) -> None:
    counter = itertools.count()

    def make_store() -> SessionStore:
        return opened(LAYERS[layer](tmp_path / f"{next(counter)}.db", tmp_path / "ws"))

    await run_session_store_conformance(make_store)


def test_every_optional_method_is_implemented(store: SqliteSessionStore) -> None:
    # run_session_store_conformance silently skips what a store does not override.
    for name in ("list_sessions", "list_session_summaries", "delete", "list_subkeys"):
        assert getattr(type(store), name) is not getattr(SessionStore, name), name
