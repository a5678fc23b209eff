"""SqliteSessionStore beyond the SDK's contracts: dedupe, clocks, durability settings,
schema handling, bad files, flower's own queries."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import SessionKey

from flower.stores import SqliteSessionStore, StoreError
from flower.stores.mounts import ensure_local, mount_of
from flower.stores.schema import MIGRATIONS_TABLE

KEY: SessionKey = {"project_key": "-ws", "session_id": "s1"}
SUB: SessionKey = {**KEY, "subpath": "subagents/agent-a1"}

Opened = Callable[[SqliteSessionStore], SqliteSessionStore]


def append(store: SqliteSessionStore, key: SessionKey, entries: list[dict[str, Any]]) -> None:
    asyncio.run(store.append(key, entries))  # type: ignore[arg-type]


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


# -- appends ---------------------------------------------------------------------------


def test_reappending_the_same_uuids_stores_them_once(store: SqliteSessionStore) -> None:
    batch = [{"type": "user", "uuid": "u1"}, {"type": "assistant", "uuid": "a1"}]
    append(store, KEY, batch)
    append(store, KEY, batch)  # the SDK's retry of a batch that did land
    append(store, KEY, [{"type": "user", "uuid": "u2"}, {"type": "user", "uuid": "u2"}])
    assert store.read(KEY) == [*batch, {"type": "user", "uuid": "u2"}]


def test_entries_without_uuid_are_appended_every_time(store: SqliteSessionStore) -> None:
    append(store, KEY, [{"type": "mode", "mode": "x"}])
    append(store, KEY, [{"type": "mode", "mode": "x"}])
    assert store.read(KEY) == [{"type": "mode", "mode": "x"}] * 2


def test_text_json_alone_can_write_or_read_round_trips(db: Path, opened: Opened) -> None:
    # A lone surrogate (a JavaScript string cut mid-pair), non-ASCII text, a non-string key:
    # written by the fallback or as UTF-8, and read back equal, warm and cold.
    odd = [
        {"type": "user", "uuid": "u1", "text": "cut \ud83d here"},
        {"type": "user", "uuid": "u2", "text": "é 中 \U0001f600"},
        {"type": "user", "uuid": "u3", "counts": {None: 1}},
    ]
    store = opened(SqliteSessionStore(db))
    append(store, KEY, odd)
    expected = [odd[0], odd[1], {**odd[2], "counts": {"null": 1}}]  # as json.dumps wrote it
    assert store.read(KEY) == expected and store.view(KEY) == expected
    assert opened(SqliteSessionStore(db)).view(KEY) == expected


def test_a_nan_an_older_flower_stored_still_loads(db: Path, opened: Opened) -> None:
    store = opened(SqliteSessionStore(db))
    append(store, KEY, [{"type": "user", "uuid": "u1", "cost": 1.5}])
    conn = sqlite3.connect(db)  # json.dumps wrote NaN before payloads were strict JSON
    with conn:
        conn.execute("UPDATE entries SET payload = replace(payload, '1.5', 'NaN')")
    conn.close()
    (entry,) = opened(SqliteSessionStore(db)).view(KEY) or []
    assert entry["uuid"] == "u1" and entry["cost"] != entry["cost"]  # NaN


def test_mtimes_are_strictly_monotonic_and_shared_with_summaries(
    store: SqliteSessionStore,
) -> None:
    stamps = []
    for n in range(20):
        append(store, KEY, [{"type": "user", "uuid": f"u{n}"}])
        (listed,) = asyncio.run(store.list_sessions("-ws"))
        (summary,) = asyncio.run(store.list_session_summaries("-ws"))
        assert summary["mtime"] == listed["mtime"]
        stamps.append(listed["mtime"])
    assert stamps == sorted(set(stamps))
    # strictly, even twice in one millisecond (the clock alone would repeat itself)
    first = store._next_mtime(0)
    assert store._next_mtime(0) > first


def test_subagent_appends_skip_the_summary(store: SqliteSessionStore) -> None:
    append(store, SUB, [{"type": "user", "uuid": "x", "customTitle": "sub"}])
    assert asyncio.run(store.list_session_summaries("-ws")) == []


def test_bad_keys_are_refused(store: SqliteSessionStore) -> None:
    with pytest.raises(ValueError, match="session_id"):
        append(store, {"project_key": "p", "session_id": "a/b"}, [{"type": "x"}])
    with pytest.raises(ValueError, match="project_key"):
        store.read({"project_key": "", "session_id": "s"})


def test_a_store_survives_reopening(db: Path, opened: Opened) -> None:
    first = opened(SqliteSessionStore(db))
    append(first, KEY, [{"type": "user", "uuid": "u1"}])
    first.close()
    second = opened(SqliteSessionStore(db))
    append(second, KEY, [{"type": "user", "uuid": "u1"}, {"type": "user", "uuid": "u2"}])
    assert [e["uuid"] for e in second.read(KEY) or []] == ["u1", "u2"]


# -- durability settings (security checklist S1, S2, S5) -------------------------------


def test_wal_is_persistent_and_settings_are_on_the_connection(
    store: SqliteSessionStore, db: Path
) -> None:
    assert rows(db, "PRAGMA journal_mode") == [("wal",)]
    conn = store._conn
    assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000
    assert conn.isolation_level is None


def test_schema_is_the_seeds_plus_a_migration_record(store: SqliteSessionStore, db: Path) -> None:
    tables = {name for (name,) in rows(db, "SELECT name FROM sqlite_schema WHERE type='table'")}
    assert tables == {"entries", "meta", "summaries", MIGRATIONS_TABLE}
    assert rows(db, f"SELECT name FROM {MIGRATIONS_TABLE}") == [("m001_sessions",)]
    index = rows(db, "SELECT sql FROM sqlite_schema WHERE name = 'entries_uid'")[0][0]
    assert "WHERE uid IS NOT NULL" in index


def test_a_seed_era_database_is_adopted(tmp_path: Path, opened: Opened) -> None:
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    from flower.stores.schema import m001_sessions

    m001_sessions(conn)
    conn.execute(
        'INSERT INTO entries VALUES (\'-ws/s1\', 0, \'u1\', \'{"type":"user","uuid":"u1"}\')'
    )
    conn.execute("INSERT INTO meta VALUES ('-ws/s1', 1700000000000, 1)")
    conn.commit()
    conn.close()
    store = opened(SqliteSessionStore(db))
    assert store.read(KEY) == [{"type": "user", "uuid": "u1"}]
    append(store, KEY, [{"type": "user", "uuid": "u2"}])
    assert len(store.read(KEY) or []) == 2


# -- files that are not ours (issue item 7) ------------------------------------------


def _foreign_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('keep me')")
    conn.commit()
    conn.close()


def _not_a_db(path: Path) -> None:
    path.write_bytes(b"this is a text file, not a database\n" * 200)


def _newer_schema(path: Path) -> None:
    SqliteSessionStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} VALUES ('m999_future', 'later')")
    conn.commit()
    conn.close()


def _lookalike(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE entries (id INTEGER)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (_not_a_db, "not a SQLite database"),
        (_foreign_db, "another program (tables: notes)"),
        (_newer_schema, "newer flower"),
        (_lookalike, "other columns"),
    ],
)
@pytest.mark.english
def test_a_file_that_is_not_ours_is_refused_untouched(
    tmp_path: Path, make: Callable[[Path], None], problem: str
) -> None:
    db = tmp_path / "sessions.db"
    make(db)
    before = db.read_bytes()
    with pytest.raises(StoreError) as caught:
        SqliteSessionStore(db)
    assert problem in str(caught.value)
    assert str(db) in str(caught.value)
    assert caught.value.path == db
    assert "pass another run_dir" in caught.value.fix
    assert db.read_bytes() == before
    assert not (tmp_path / "sessions.db-wal").exists()


@pytest.mark.english
def test_a_damaged_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    with SqliteSessionStore(db) as store:
        append(
            store, KEY, [{"type": "user", "uuid": f"u{n}", "pad": "x" * 300} for n in range(200)]
        )
    ((root,),) = rows(db, "SELECT rootpage FROM sqlite_schema WHERE name = 'entries'")
    data = bytearray(db.read_bytes())
    start = (root - 1) * 4096
    data[start + 8 : start + 40] = b"\x7f" * 32  # the root page's child and cell pointers
    db.write_bytes(bytes(data))
    before = db.read_bytes()
    with pytest.raises(StoreError, match="quick_check|malformed") as caught:
        SqliteSessionStore(db)
    assert "backup" in caught.value.fix or "move it aside" in caught.value.fix.lower()
    assert db.read_bytes() == before


# -- network filesystems (checklist S7) ------------------------------------------------


@pytest.mark.english
def test_network_filesystems_are_refused(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/vda / ext4 rw 0 0\n"
        f"server:/export {tmp_path}/nfs nfs4 rw 0 0\n"
        f"sshfs#me@host: {tmp_path}/my\\040sshfs fuse.sshfs rw 0 0\n"
    )
    ensure_local(tmp_path / "local" / "sessions.db", mounts_file=mounts)
    for where in ("nfs", "my sshfs"):
        with pytest.raises(StoreError, match="Put the run directory on a local disk"):
            ensure_local(tmp_path / where / "runs" / "sessions.db", mounts_file=mounts)
    found = mount_of(tmp_path / "my sshfs" / "x", mounts_file=mounts)
    assert found is not None and found.fstype == "fuse.sshfs"


def test_this_machine_is_local(db: Path) -> None:
    ensure_local(db)  # /proc/mounts is read for real


# -- flower's own queries ------------------------------------------------------------


def _turn(uid: str, mid: str, usage: dict[str, int]) -> dict[str, Any]:
    message = {"id": mid, "model": "claude-opus-5-5", "content": [], "usage": usage}
    return {"type": "assistant", "uuid": uid, "message": message}


def test_sessions_transcript_usage_and_summary(store: SqliteSessionStore) -> None:
    usage = {"input_tokens": 100, "output_tokens": 5, "cache_read_input_tokens": 1000}
    append(
        store, KEY, [{"type": "user", "uuid": "p", "message": {"role": "user", "content": "hi"}}]
    )
    # Two entries of one API response (one per block) count once.
    append(store, KEY, [_turn("a1", "m1", usage), _turn("a2", "m1", usage)])
    append(store, SUB, [_turn("s1", "m9", {"input_tokens": 7, "output_tokens": 1})])
    append(store, KEY, [{"type": "cost-state", "totalCostUSD": 0.25}])
    append(store, {"project_key": "-other", "session_id": "s2"}, [{"type": "user", "uuid": "o"}])

    listed = store.sessions("-ws")
    assert [(r.session_id, r.entries, r.subkeys) for r in listed] == [
        ("s1", 4, ("subagents/agent-a1",))
    ]
    assert [r.session_id for r in store.sessions()] == ["s2", "s1"]

    found = store.transcript("s1")
    assert found is not None and found.project_key == "-ws"
    assert [e.get("uuid") for e in found.main] == ["p", "a1", "a2", None]
    assert list(found.subagents) == ["subagents/agent-a1"]

    used = store.usage("s1")
    assert used is not None
    assert (used.cost_usd, used.api_calls, used.input_tokens, used.output_tokens) == (
        0.25,
        2,
        107,
        6,
    )
    assert used.context_tokens == 1100 and used.model == "claude-opus-5-5"

    summary = store.summary("s1")
    assert summary is not None and summary["session_id"] == "s1"
    assert store.transcript("nope") is None and store.usage("nope") is None
    assert store.summary("nope") is None


def test_close_is_idempotent_and_checkpoints(db: Path) -> None:
    store = SqliteSessionStore(db)
    append(store, KEY, [{"type": "user", "uuid": "u"}])
    store.close()
    store.close()
    wal = db.with_name(db.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
