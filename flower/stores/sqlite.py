"""SqliteSessionStore: the SDK's SessionStore protocol on one SQLite file (sessions.db).

Every byte appended is kept; nothing here reshapes entries (the layers in trim.py and
prune.py change only what ``load()`` hands back). Layout: the seeds' three tables, created
by migration 1 (schema.py). A store key is ``<project_key>/<session_id>[/<subpath>]``.

Durability and concurrency (security-checklist.md, Part B):

* WAL, persistent in the file; ``synchronous=FULL``: an append that returned survives a
  power loss, not only a process crash. The SDK treats a returned append as mirrored and
  never sends it again, and sessions.db is what a resume reads, so losing the last
  acknowledged turns is not acceptable; the price is one WAL fsync per append *call*
  (a batch of up to 500 entries), not per entry.
* One append = one ``BEGIN IMMEDIATE`` transaction (the uid lookup, the inserts, meta and
  the summary sidecar together), retried whole on SQLITE_BUSY; ``busy_timeout`` is set on
  the connection; connections are in autocommit mode (``isolation_level=None``) so Python
  never opens a transaction behind our back.
* ``quick_check`` at open, and a refusal of network filesystems (mounts.py).

The async protocol methods run their SQLite work in a worker thread
(``anyio.to_thread.run_sync``, so asyncio and trio both work): a write may wait up to
``busy_timeout`` for another process's lock, and ``load()`` of a long transcript (plus the
layers' file I/O) takes tens of milliseconds; neither may stall the SDK's message loop.
One connection serves all threads, serialized by a lock.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import anyio.to_thread
import msgspec
from claude_agent_sdk import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStore,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
    fold_session_summary,
)

from flower import text
from flower.stores.errors import StoreError
from flower.stores.mounts import ensure_local
from flower.stores.recent import RecentTranscript, decode
from flower.stores.records import SessionRecord, SessionTranscript, SessionUsage, usage_of
from flower.stores.schema import prepare
from flower.stores.survey import Survey
from flower.stores.transcript import Entry

__all__ = ["BUSY_TIMEOUT_MS", "SYNCHRONOUS", "SqliteSessionStore", "store_key"]

BUSY_TIMEOUT_MS = 5000
SYNCHRONOUS = "FULL"
_WRITE_ATTEMPTS = 4
_UID_CHUNK = 500  # well under SQLite's host-parameter limit

T = TypeVar("T")


def store_key(key: SessionKey | SessionListSubkeysKey) -> str:
    """``<project_key>/<session_id>[/<subpath>]``; ValueError for parts that would alias."""
    project_key, session_id = key["project_key"], key["session_id"]
    for name, part in (("project_key", project_key), ("session_id", session_id)):
        if not part or "/" in part:
            raise ValueError(f"{name} must be non-empty and contain no '/': {part!r}")
    subpath = key.get("subpath")
    return f"{project_key}/{session_id}/{subpath}" if subpath else f"{project_key}/{session_id}"


def _under(prefix: str) -> tuple[str, str]:
    """Bounds of the keys below ``prefix/`` ('0' is the byte after '/'), for an index range."""
    return prefix + "/", prefix + "0"


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _decode(rows: Sequence[tuple[str]]) -> list[Entry]:
    return decode([payload for (payload,) in rows])


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC, which would otherwise run dozens of times over the hundreds of
    thousands of fresh, acyclic dicts a load builds (it more than doubles the decode time).
    Restored only if it was on: whoever turned it off keeps it off.

    On the way out the objects made meanwhile go straight to the oldest generation
    (``gc.freeze()`` + ``gc.unfreeze()``, two list splices): the young-generation pass the
    re-enabled GC would start at once only walks them all (8 ms per 10k entries) to find
    them alive, and surviving it would put them in an older generation anyway. Skipped if
    the process has frozen objects of its own (a pre-fork ``gc.freeze()``), which must stay
    frozen."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


class SqliteSessionStore(SessionStore):
    """The SDK's :class:`~claude_agent_sdk.SessionStore` on the SQLite file at ``path``.

    Entries with a ``uuid`` are deduplicated by it (the SDK retries appends); others are
    appended as they come. ``load()`` returns exactly what was appended, in order, or None
    for a key never written. ``list_sessions`` and the summary sidecar share one strictly
    monotonic clock (epoch ms). Deleting a main key deletes its subagent transcripts.

    Raises :class:`StoreError` at construction if the file is not ours to use. Call
    :meth:`close` when done (or use the store as a context manager).

    ``on_append``, if set, is called with every batch the SDK appended, once it is stored
    (on the caller's event loop): how Runtime learns each response's final usage as soon as
    the CLI has written it.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.on_append: Callable[[SessionKey, list[SessionStoreEntry]], None] | None = None
        self._lock = threading.Lock()
        self._recent = RecentTranscript()
        self._last_mtime = 0
        self.last_report: dict[str, int] = {}
        """Counts per action of the layers during the latest :meth:`view` / ``load()``."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ensure_local(self.path)
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreError(
                self.path, text("store.cannot_open", problem=exc), text("store.fix_permissions")
            ) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            prepare(conn, self.path, synchronous=SYNCHRONOUS)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Checkpoint the WAL if nobody is busy with it, then close. Idempotent."""
        with self._lock:
            if self._conn is None:
                return
            try:
                # A quiet point (checklist S9); never wait for it at close.
                self._conn.execute("PRAGMA busy_timeout = 0")
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass  # a busy checkpoint is skipped; the next close or autocheckpoint does it
            self._conn.close()
            self._conn = None  # type: ignore[assignment]

    def __enter__(self) -> SqliteSessionStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- transactions ----------------------------------------------------------------

    def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one BEGIN IMMEDIATE transaction, retrying it whole when busy."""
        attempt = 0
        while True:
            attempt += 1
            try:
                with self._lock:
                    return self._transaction("BEGIN IMMEDIATE", work)
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                if attempt == _WRITE_ATTEMPTS:
                    raise StoreError(
                        self.path,
                        text("store.locked", attempts=attempt, wait_ms=BUSY_TIMEOUT_MS),
                        text("store.fix_stop_writer"),
                    ) from exc
            time.sleep(0.05 * attempt)  # outside the lock, so readers in this process go on

    def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one read transaction: one snapshot across its statements."""
        with self._lock:
            return self._transaction("BEGIN", work)

    def _transaction(self, begin: str, work: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        conn.execute(begin)
        try:
            result = work(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    def _next_mtime(self, floor: int) -> int:
        """Epoch ms, strictly above both this store's last stamp and ``floor``."""
        mtime = max(time.time_ns() // 1_000_000, self._last_mtime + 1, floor + 1)
        self._last_mtime = mtime
        return mtime

    # -- the SessionStore protocol -----------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        await anyio.to_thread.run_sync(self._append, key, entries)
        if self.on_append is not None:
            self.on_append(key, entries)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        result: list[Any] | None = await anyio.to_thread.run_sync(self.view, key)
        return result

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        return await anyio.to_thread.run_sync(self._list_sessions, project_key)

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        return await anyio.to_thread.run_sync(self._list_summaries, project_key)

    async def delete(self, key: SessionKey) -> None:
        await anyio.to_thread.run_sync(self._delete, key)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        return await anyio.to_thread.run_sync(self._list_subkeys, key)

    # -- synchronous implementations -------------------------------------------------

    def add(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """append() for a synchronous caller (entries already stored, by uuid, are skipped);
        on_append is not told: nothing of a session under way is added this way."""
        self._append(key, entries)

    def read(self, key: SessionKey) -> list[Entry] | None:
        """The entries of ``key`` exactly as appended, or None if it was never written."""
        skey = store_key(key)
        rows = self._read(lambda conn: _payloads(conn, skey))
        return _decode(rows) if rows else None

    def view(self, key: SessionKey) -> list[Entry] | None:
        """What ``load()`` returns: the entries of ``key`` passed through :meth:`reshape`.

        :attr:`last_report` is replaced by what this call's layers did. The rows in the
        database are never changed.
        """
        report: dict[str, int] = {}
        skey = store_key(key)
        with _gc_paused():
            entries = self._read(lambda conn: self._recent.read(conn, skey))
            shaped = None if entries is None else self.reshape(entries, report)
        self.last_report = report
        return shaped

    def reshape(
        self, entries: list[Entry], report: dict[str, int], *, survey: Survey | None = None
    ) -> list[Entry]:
        """The copy handed to the model. Here: unchanged. Each layer calls ``super()`` first,
        then applies its own step and counts what it did in ``report``.

        ``survey``, if given, is the :class:`~flower.stores.survey.Survey` of ``entries``. A
        layer that needs one makes it (unless given) and hands it down, so the chain walks
        the transcript once. Reusing it after ``super()`` is sound only because every
        layer below rewrites tool_result contents at most; a layer that moves entries
        (prune) leaves it stale for any layer above.
        """
        return entries

    def _append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        if not entries:
            return
        skey = store_key(key)
        rows = [(_uid(entry), _payload(entry)) for entry in entries]  # before the lock

        def work(conn: sqlite3.Connection) -> None:
            meta = conn.execute(
                "SELECT mtime, next_seq FROM meta WHERE store_key = ?", (skey,)
            ).fetchone()
            floor, next_seq = meta if meta else (0, 0)
            fresh = _fresh(conn, skey, rows)
            if not fresh:
                return
            conn.executemany(
                "INSERT INTO entries (store_key, seq, uid, payload) VALUES (?, ?, ?, ?)",
                [(skey, next_seq + n, *rows[i]) for n, i in enumerate(fresh)],
            )
            mtime = self._next_mtime(floor)
            conn.execute(
                "INSERT INTO meta (store_key, mtime, next_seq) VALUES (?, ?, ?) "
                "ON CONFLICT (store_key) DO UPDATE SET "
                "mtime = excluded.mtime, next_seq = excluded.next_seq",
                (skey, mtime, next_seq + len(fresh)),
            )
            if not key.get("subpath"):
                _fold_summary(conn, key, [entries[i] for i in fresh], mtime)

        self._write(work)

    def _list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        low, high = _under(project_key)
        rows = self._read(
            lambda conn: conn.execute(
                "SELECT store_key, mtime FROM meta WHERE store_key >= ? AND store_key < ?",
                (low, high),
            ).fetchall()
        )
        found = ((k[len(low) :], mtime) for k, mtime in rows)
        return [{"session_id": sid, "mtime": mtime} for sid, mtime in found if "/" not in sid]

    def _list_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        rows = self._read(
            lambda conn: conn.execute(
                "SELECT session_id, mtime, data FROM summaries WHERE project_key = ?",
                (project_key,),
            ).fetchall()
        )
        return [
            {"session_id": sid, "mtime": mtime, "data": json.loads(data)}
            for sid, mtime, data in rows
        ]

    def _delete(self, key: SessionKey) -> None:
        skey = store_key(key)
        main = not key.get("subpath")

        def work(conn: sqlite3.Connection) -> None:
            for table in ("entries", "meta"):
                conn.execute(f"DELETE FROM {table} WHERE store_key = ?", (skey,))
                if main:
                    conn.execute(
                        f"DELETE FROM {table} WHERE store_key >= ? AND store_key < ?", _under(skey)
                    )
            if main:
                conn.execute(
                    "DELETE FROM summaries WHERE project_key = ? AND session_id = ?",
                    (key["project_key"], key["session_id"]),
                )

        self._write(work)
        with self._lock:
            self._recent.forget()

    def _list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        skey = store_key(key)
        return [k[len(skey) + 1 :] for k in self._read(lambda conn: _keys_under(conn, skey))]

    # -- flower's own queries (synchronous; Runtime and `flower analyze`) ---------------

    def sessions(self, project_key: str | None = None) -> list[SessionRecord]:
        """Every session (of one project, or of all), the most recently written first."""
        where, params = (
            ("WHERE m.store_key >= ? AND m.store_key < ?", _under(project_key))
            if project_key
            else ("", ())
        )
        rows = self._read(
            lambda conn: conn.execute(
                "SELECT m.store_key, m.mtime, "
                "(SELECT count(*) FROM entries e WHERE e.store_key = m.store_key) "
                f"FROM meta m {where}",
                params,
            ).fetchall()
        )
        grouped: dict[tuple[str, str], dict[str, Any]] = {}
        for skey, mtime, count in rows:
            project, session_id, subpath = _parts(skey)
            record = grouped.setdefault(
                (project, session_id), {"mtime": 0, "entries": 0, "subkeys": []}
            )
            record["mtime"] = max(record["mtime"], mtime)
            if subpath is None:
                record["entries"] = count
            else:
                record["subkeys"].append(subpath)
        records = [
            SessionRecord(
                project_key=project,
                session_id=session_id,
                mtime=r["mtime"],
                entries=r["entries"],
                subkeys=tuple(sorted(r["subkeys"])),
            )
            for (project, session_id), r in grouped.items()
        ]
        return sorted(records, key=lambda r: r.mtime, reverse=True)

    def transcript(
        self, session_id: str, *, project_key: str | None = None
    ) -> SessionTranscript | None:
        """The whole session as appended (main and subagent transcripts), or None.

        Without ``project_key`` the session is looked up by id across projects; if the id
        appears in several, the most recently written one is returned.
        """

        Rows = list[tuple[str, list[tuple[str]]]]

        def work(conn: sqlite3.Connection) -> tuple[str, Rows] | None:
            project = project_key or _project_of(conn, session_id)
            if project is None:
                return None
            main = store_key({"project_key": project, "session_id": session_id})
            return project, [(k, _payloads(conn, k)) for k in [main, *_keys_under(conn, main)]]

        found = self._read(work)
        if found is None:
            return None
        project, ((_, main_rows), *subs) = found
        if not (main_rows or subs):
            return None
        return SessionTranscript(
            project_key=project,
            session_id=session_id,
            main=_decode(main_rows) if main_rows else [],
            subagents={k.split("/", 2)[2]: _decode(rows) for k, rows in subs},
        )

    def usage(self, session_id: str, *, project_key: str | None = None) -> SessionUsage | None:
        """Cost and token use of a session (see :class:`SessionUsage`), or None."""
        found = self.transcript(session_id, project_key=project_key)
        return None if found is None else usage_of(found)

    def summary(
        self, session_id: str, *, project_key: str | None = None
    ) -> SessionSummaryEntry | None:
        """The SDK's summary sidecar of a main transcript (title, first prompt...), or None."""

        def work(conn: sqlite3.Connection) -> SessionSummaryEntry | None:
            project = project_key or _project_of(conn, session_id)
            row = conn.execute(
                "SELECT mtime, data FROM summaries WHERE project_key = ? AND session_id = ?",
                (project, session_id),
            ).fetchone()
            return (
                None
                if row is None
                else {"session_id": session_id, "mtime": row[0], "data": json.loads(row[1])}
            )

        return self._read(work)


_encode = msgspec.json.Encoder().encode


def _payload(entry: SessionStoreEntry) -> str:
    """The stored text of an entry: compact JSON, written by msgspec (five times faster than
    ``json.dumps``; non-ASCII text stays UTF-8; a non-finite float, which JSON lacks, becomes
    ``null`` as in the CLI's own JavaScript). What msgspec cannot write (a lone surrogate, a
    key that is neither a string nor a number) goes through ``json.dumps``, whose ASCII
    escapes store it; recent.decode() reads both."""
    try:
        return _encode(entry).decode()
    except (TypeError, ValueError):
        return json.dumps(entry, separators=(",", ":"))


def _uid(entry: SessionStoreEntry) -> str | None:
    uid = entry.get("uuid")
    return uid if isinstance(uid, str) else None


def _fresh(
    conn: sqlite3.Connection, skey: str, rows: Sequence[tuple[str | None, str]]
) -> list[int]:
    """Indices of the rows to insert: no uuid, or a uuid neither stored nor earlier in rows."""
    uids = [uid for uid, _ in rows if uid is not None]
    seen: set[str] = set()
    for start in range(0, len(uids), _UID_CHUNK):
        chunk = uids[start : start + _UID_CHUNK]
        marks = ",".join("?" * len(chunk))
        seen.update(
            uid
            for (uid,) in conn.execute(
                f"SELECT uid FROM entries WHERE store_key = ? AND uid IN ({marks})", (skey, *chunk)
            )
        )
    fresh: list[int] = []
    for i, (uid, _) in enumerate(rows):
        if uid is None or uid not in seen:
            fresh.append(i)
            if uid is not None:
                seen.add(uid)
    return fresh


def _fold_summary(
    conn: sqlite3.Connection, key: SessionKey, entries: list[SessionStoreEntry], mtime: int
) -> None:
    """Fold new main-transcript entries into the SDK's summary sidecar, stamped ``mtime``."""
    project, session_id = key["project_key"], key["session_id"]
    row = conn.execute(
        "SELECT mtime, data FROM summaries WHERE project_key = ? AND session_id = ?",
        (project, session_id),
    ).fetchone()
    prev: SessionSummaryEntry | None = (
        None
        if row is None
        else {"session_id": session_id, "mtime": row[0], "data": json.loads(row[1])}
    )
    folded = fold_session_summary(prev, key, entries)
    conn.execute(
        "INSERT INTO summaries (project_key, session_id, mtime, data) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (project_key, session_id) DO UPDATE SET "
        "mtime = excluded.mtime, data = excluded.data",
        (project, session_id, mtime, json.dumps(folded["data"])),
    )


def _payloads(conn: sqlite3.Connection, skey: str) -> list[tuple[str]]:
    return conn.execute(
        "SELECT payload FROM entries WHERE store_key = ? ORDER BY seq", (skey,)
    ).fetchall()


def _keys_under(conn: sqlite3.Connection, skey: str) -> list[str]:
    """The subkeys of a main store key, sorted."""
    rows = conn.execute(
        "SELECT store_key FROM meta WHERE store_key >= ? AND store_key < ? ORDER BY store_key",
        _under(skey),
    )
    return [k for (k,) in rows]


def _parts(skey: str) -> tuple[str, str, str | None]:
    project, session_id, *rest = skey.split("/", 2)
    return project, session_id, rest[0] if rest else None


def _project_of(conn: sqlite3.Connection, session_id: str) -> str | None:
    """The project holding ``session_id`` (the most recently written, if several do)."""
    best: tuple[int, str] | None = None
    for skey, mtime in conn.execute("SELECT store_key, mtime FROM meta"):
        project, sid, _ = _parts(skey)
        if sid == session_id and (best is None or mtime > best[0]):
            best = (mtime, project)
    return None if best is None else best[1]
