"""The load path's cache of the last transcript: faster, never stale."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
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


GC_CHECK = """
import asyncio, gc, sys
from flower.stores import SqliteSessionStore
from tests.stores.test_recent import KEY, entry
store = SqliteSessionStore(sys.argv[1])
try:
    asyncio.run(store.append(KEY, [entry(0), entry(1)]))
    assert gc.isenabled()
    store.view(KEY)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    try:
        store.view(KEY)
        assert not gc.isenabled()
    finally:
        gc.enable()
    held = [{"frozen": n} for n in range(10)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert store.view(KEY) == [entry(0), entry(1)]
        # Still frozen (a load that unfroze would leave 0); a frozen object that died during
        # the load leaves the permanent generation, so the count may only fall, never reset.
        assert 0 < gc.get_freeze_count() <= frozen and held
    finally:
        gc.unfreeze()
finally:
    store.close()
"""


def test_a_load_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    # load() pauses the GC and hands its objects to the oldest generation; the GC's
    # on/off state and a process's own frozen objects (a pre-fork gc.freeze()) stay as
    # they were, and the load's objects are not frozen. The collector is the process's:
    # checked in a fresh interpreter, where no other test's thread can touch it meanwhile.
    done = subprocess.run(
        [sys.executable, "-c", GC_CHECK, str(tmp_path / "s.db")],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
