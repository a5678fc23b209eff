"""Child processes of test_crash.py: a separate module so the forkserver can preload it
(and the store with it) without pytest."""

from __future__ import annotations

import asyncio
import itertools
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from typing import Any

from flower.stores import SqliteSessionStore

BATCH = 40


def _batch(tag: str, n: int) -> list[dict[str, Any]]:
    return [
        {"type": "user", "uuid": f"{tag}-{n}-{i}", "batch": n, "pad": "x" * 300}
        for i in range(BATCH)
    ]


def append_until_killed(db: str, tag: str, acks: Connection) -> None:
    """Append batches forever; send the batch number once each append has returned."""
    store = SqliteSessionStore(db)
    key = {"project_key": "-crash", "session_id": tag}

    async def run() -> None:
        for n in itertools.count():
            await store.append(key, _batch(tag, n))  # type: ignore[arg-type]
            acks.send(n)

    asyncio.run(run())


def append_batches(db: str, tag: str, batches: int, start: Barrier) -> None:
    with SqliteSessionStore(db) as store:
        start.wait()
        for n in range(batches):
            asyncio.run(store.append({"project_key": "-p", "session_id": "shared"}, _batch(tag, n)))  # type: ignore[arg-type]
