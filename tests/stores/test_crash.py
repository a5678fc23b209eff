"""Crash safety and contention across processes (security checklist S3, S4).

Children are forked from a multiprocessing forkserver that has imported the store once:
importing claude_agent_sdk takes over a second, twenty fresh interpreters would take half
a minute.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import signal
import sqlite3
import time
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from flower.stores import SqliteSessionStore
from tests.stores.stores_crash_worker import BATCH, append_batches, append_until_killed

ROUNDS = 20


@pytest.fixture(scope="module")
def forkserver() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    # The forkserver does not get our sys.path (tests/stores), only the package: preload the
    # store (and the SDK with it) there; children then import the light worker module.
    ctx.set_forkserver_preload(["flower.stores.sqlite"])
    return ctx


def _received(acks: Connection) -> list[int]:
    got = []
    while True:
        try:
            got.append(acks.recv())
        except (EOFError, OSError):  # the end, or a message the kill cut short (not acked)
            return got


def _query(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def test_kill_9_loses_no_acknowledged_append(tmp_path: Path, forkserver: Any) -> None:
    db = tmp_path / "sessions.db"
    SqliteSessionStore(db).close()  # create the schema before the first kill
    rng = random.Random()
    outcomes = []
    for round_ in range(ROUNDS):
        tag = f"r{round_}"
        receive, send = forkserver.Pipe(duplex=False)
        child = forkserver.Process(target=append_until_killed, args=(str(db), tag, send))
        child.start()
        send.close()
        assert receive.poll(30), "the child never acknowledged an append"
        time.sleep(rng.uniform(0, 0.08))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        acked = _received(receive)
        receive.close()

        assert _query(db, "PRAGMA integrity_check") == [("ok",)], f"round {round_}"
        stored = Counter(
            batch
            for (batch,) in _query(
                db,
                "SELECT json_extract(payload, '$.batch') FROM entries WHERE store_key = ?",
                f"-crash/{tag}",
            )
        )
        assert set(stored.values()) == {BATCH}, f"round {round_}: a batch was stored in part"
        assert set(acked) <= set(stored), (
            f"round {round_}: acknowledged {acked}, stored {sorted(stored)}"
        )
        outcomes.append((len(acked), len(stored)))
    print("acked, stored batches per round:", outcomes)
    assert len(outcomes) == ROUNDS


def test_concurrent_writers_lose_nothing(tmp_path: Path, forkserver: Any) -> None:
    db = tmp_path / "sessions.db"
    SqliteSessionStore(db).close()
    writers, batches = 4, 25
    start = forkserver.Barrier(writers)
    children = [
        forkserver.Process(target=append_batches, args=(str(db), f"w{w}", batches, start))
        for w in range(writers)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    total = writers * batches * BATCH
    assert _query(db, "SELECT count(*), count(DISTINCT uid), min(seq), max(seq) FROM entries") == [
        (total, total, 0, total - 1)
    ]
    assert _query(db, "SELECT next_seq FROM meta") == [(total,)]
    with SqliteSessionStore(db) as store:
        (summary,) = asyncio.run(store.list_session_summaries("-p"))
        assert summary["session_id"] == "shared"
