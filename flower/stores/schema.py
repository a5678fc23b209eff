"""The sessions.db schema: named migrations recorded in a table, and the checks at open.

Each migration is a function that takes a connection inside a write transaction; its name
is recorded in ``_flower_migrations`` once applied (the pattern of simonw/llm). A new schema
change is a new function appended to :data:`MIGRATIONS`, never an edit of an old one.

Before the first write, :func:`prepare` makes sure the file is ours to change: it must be
a SQLite database that passes ``quick_check`` and holds only our tables. A file that was
written by the seeds' flower (the three tables, no migration table) is adopted as it is.
"""

from __future__ import annotations

import datetime
import sqlite3
from collections.abc import Callable
from pathlib import Path

from flower import text
from flower.stores.errors import StoreError

__all__ = ["MIGRATIONS", "MIGRATIONS_TABLE", "prepare"]

MIGRATIONS_TABLE = "_flower_migrations"

Migration = Callable[[sqlite3.Connection], None]


def m001_sessions(conn: sqlite3.Connection) -> None:
    """The seeds' three tables (configuration page, "Schéma de sessions.db")."""
    conn.execute(
        """CREATE TABLE entries (
            store_key TEXT NOT NULL,
            seq       INTEGER NOT NULL,
            uid       TEXT,
            payload   TEXT NOT NULL,
            PRIMARY KEY (store_key, seq)
        )"""
    )
    conn.execute("CREATE UNIQUE INDEX entries_uid ON entries(store_key, uid) WHERE uid IS NOT NULL")
    conn.execute(
        """CREATE TABLE meta (
            store_key TEXT PRIMARY KEY,
            mtime     INTEGER NOT NULL,
            next_seq  INTEGER NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TABLE summaries (
            project_key TEXT NOT NULL,
            session_id  TEXT NOT NULL,
            mtime       INTEGER NOT NULL,
            data        TEXT NOT NULL,
            PRIMARY KEY (project_key, session_id)
        )"""
    )


MIGRATIONS: tuple[Migration, ...] = (m001_sessions,)

#: Tables (and their columns) that migration 1 creates; a file holding exactly these and no
#: migration table is a sessions.db of the seeds' flower.
_SEED_TABLES = {
    "entries": ("store_key", "seq", "uid", "payload"),
    "meta": ("store_key", "mtime", "next_seq"),
    "summaries": ("project_key", "session_id", "mtime", "data"),
}
_OUR_TABLES = frozenset({*_SEED_TABLES, MIGRATIONS_TABLE})


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    )
    return {name for (name,) in rows}


def _columns(conn: sqlite3.Connection, table: str) -> tuple[str, ...]:
    return tuple(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))


def _inspect(conn: sqlite3.Connection, path: Path) -> set[str]:
    """The tables of a usable file; StoreError for anything we must not write to."""
    try:
        verdict = [row[0] for row in conn.execute("PRAGMA quick_check")]
        tables = _tables(conn)
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            path, text("store.not_sqlite", problem=exc), text("store.fix_move_aside")
        ) from exc
    if verdict != ["ok"]:
        raise StoreError(
            path,
            text("store.quick_check", verdict="; ".join(map(str, verdict[:3]))),
            text("store.fix_restore"),
        )
    foreign = tables - _OUR_TABLES
    if foreign:
        raise StoreError(
            path,
            text("store.foreign", tables=", ".join(sorted(foreign))),
            text("store.fix_move_aside"),
        )
    if tables and MIGRATIONS_TABLE not in tables:
        bad = [t for t, cols in _SEED_TABLES.items() if _columns(conn, t) != cols]
        if bad:
            raise StoreError(
                path, text("store.lookalike", tables=", ".join(bad)), text("store.fix_move_aside")
            )
    return tables


def _migrate(conn: sqlite3.Connection, path: Path, tables: set[str]) -> None:
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} "
        "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    applied = {name for (name,) in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")}
    known = [m.__name__ for m in MIGRATIONS]
    newer = applied - set(known)
    if newer:
        raise StoreError(
            path,
            text("store.newer", migrations=", ".join(sorted(newer))),
            text("store.fix_upgrade"),
        )
    if not applied and set(_SEED_TABLES) <= tables:
        # The seeds' flower made this file: migration 1 is already in it.
        applied = {m001_sessions.__name__}
        _record(conn, m001_sessions.__name__)
    for migration in MIGRATIONS:
        if migration.__name__ not in applied:
            migration(conn)
            _record(conn, migration.__name__)


def _record(conn: sqlite3.Connection, name: str) -> None:
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (?, ?)", (name, now))


def prepare(conn: sqlite3.Connection, path: Path, *, synchronous: str) -> None:
    """Check the file, then switch it to WAL and bring its schema up to date.

    Nothing is written before the checks pass. ``conn`` must be in autocommit mode
    (``isolation_level=None``); the migrations run in one ``BEGIN IMMEDIATE`` transaction so
    two processes opening a new file at once do not both create the tables.
    """
    _inspect(conn, path)
    (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if str(mode).lower() != "wal":
        raise StoreError(path, text("store.no_wal", mode=repr(mode)), text("store.fix_local_disk"))
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Re-read inside the lock: another process may have migrated since _inspect.
        _migrate(conn, path, _tables(conn))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
