"""The load path's cache of the last transcript: faster, never stale."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from flower.stores import SqliteSessionStore

KEY: Any = {"project_key": "-p", "session_id": "11111111-1111-1111-1111-111111111111"}


def entry(n: int) -> dict[str, Any]:
    return {"type": "user", "uuid": f"u{n}", "parentUuid": f"u{n - 1}" if n else None, "n": n}


def test_appends_between_loads_are_seen(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    try:
        asyncio.run(store.append(KEY, [entry(0), entry(1)]))
        assert [e["n"] for e in store.view(KEY) or []] == [0, 1]
        asyncio.run(store.append(KEY, [entry(2)]))
        assert [e["n"] for e in store.view(KEY) or []] == [0, 1, 2]
        assert [e["n"] for e in store.view(KEY) or []] == [0, 1, 2]
    finally:
        store.close()


def test_another_process_rewriting_the_session_is_not_served_from_the_cache(
    tmp_path: Path,
) -> None:
    mine, theirs = SqliteSessionStore(tmp_path / "s.db"), SqliteSessionStore(tmp_path / "s.db")
    try:
        asyncio.run(mine.append(KEY, [entry(0), entry(1)]))
        assert len(mine.view(KEY) or []) == 2
        asyncio.run(theirs.delete(KEY))  # another connection: mine's cache is now wrong
        asyncio.run(theirs.append(KEY, [{**entry(0), "n": 100}, {**entry(1), "n": 101}]))
        assert [e["n"] for e in mine.view(KEY) or []] == [100, 101]
        asyncio.run(theirs.delete(KEY))
        assert mine.view(KEY) is None
    finally:
        mine.close()
        theirs.close()


def test_the_handed_out_list_is_a_copy(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    try:
        asyncio.run(store.append(KEY, [entry(0)]))
        first = store.view(KEY) or []
        first.append({"not": "stored"})
        assert store.view(KEY) == [entry(0)]
        assert json.loads(json.dumps(store.view(KEY))) == [entry(0)]
    finally:
        store.close()
