"""The broker's ledger: runs, their hashed tokens, one row per request or refusal of a live
run, and the counts of the refusals that name none (flowerbox.broker.refusals).

A SQLite file in the broker's host-only folder (0600, WAL, synchronous=NORMAL): every row is
committed before the client is answered, so a broker killed at any moment loses nothing. A
request is written twice: *begun* when its budget is reserved (before it is forwarded), with
its worst case, and *settled* with what it cost once answered. A row still begun when a
broker opens the ledger was cut by a crash: it is settled at its worst case, as the gateway
charges a stream cut before its usage arrived. Tokens are never stored, only their SHA-256.

`outcomes` counts the requests and refusals the ledger holds per listener, outcome and cause
(flowerbox.broker.tally): summed once when the ledger opens, then kept up with each write, so
`flowerbox broker --metrics` reads them without a query (and equal to the ledger by making).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flower import text
from flowerbox.broker.tally import REFUSED, Tally, cause, outcome
from flowerbox.errors import BrokerError
from flowerbox.note import Spend
from flowerbox.sidecar.meter import TOKEN_FIELDS
from flowerbox.sidecar.redact import Redactor

__all__ = ["CUT_NOTE", "Ledger", "RunEntry", "token_hash"]

CUT_NOTE = "the broker stopped mid-request: charged its worst case"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    token_sha256 TEXT NOT NULL,
    budget_usd REAL,
    allow TEXT,
    socket_dir TEXT NOT NULL,
    gateway_dir TEXT NOT NULL,
    registered_at TEXT NOT NULL,
    revoked_at TEXT,
    allow_api_fetch INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    time TEXT NOT NULL,
    method TEXT,
    path TEXT,
    status INTEGER,
    model TEXT,
    {", ".join(f"{name} INTEGER NOT NULL DEFAULT 0" for name in TOKEN_FIELDS)},
    cost_usd REAL NOT NULL DEFAULT 0,
    reserved_usd REAL NOT NULL DEFAULT 0,
    ms INTEGER,
    note TEXT,
    settled INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_run ON requests (run_id);
CREATE TABLE IF NOT EXISTS refusals (
    minute TEXT NOT NULL,
    listener TEXT NOT NULL,
    cause TEXT NOT NULL,
    peer TEXT NOT NULL,
    run_id TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (minute, listener, cause, peer, run_id)
);
"""


def _add_missing_columns(db: sqlite3.Connection) -> None:
    """A ledger made before `runs.allow_api_fetch` existed gets it (its runs: not allowed)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    if "allow_api_fetch" not in columns:
        db.execute("ALTER TABLE runs ADD COLUMN allow_api_fetch INTEGER NOT NULL DEFAULT 0")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class RunEntry:
    """One registered run. `allow` None: no egress proxy (`--net open`);
    `allow_api_fetch`: its `--allow-api-fetch` (flowerbox.sidecar.reach)."""

    run_id: str
    token_sha256: str
    budget_usd: float | None
    allow: tuple[str, ...] | None
    socket_dir: Path
    gateway_dir: Path
    allow_api_fetch: bool = False


class Ledger:
    """The ledger file, shared by the broker's threads (one connection behind a lock)."""

    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        """Open (or create, 0600) the ledger at `path` and settle rows a crash left begun;
        every text written passes `redactor` (bounded, no credential).

        Raises:
            BrokerError: the file is a link, or not a SQLite ledger.
        """
        try:
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # A commit is in the WAL file before the client is answered: a killed broker loses
            # nothing. (Durable across a power cut only from the next checkpoint on: FULL
            # would fsync every commit, and all runs wait on each other's fsyncs.)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            _add_missing_columns(self._db)
        except (OSError, sqlite3.Error) as exc:
            raise BrokerError(text("broker.ledger_unopened", path=path, problem=exc)) from exc
        self._lock = threading.Lock()
        self.redactor = redactor or Redactor()
        self.cut = self._write(
            "UPDATE requests SET cost_usd = reserved_usd, settled = 1, note = ? WHERE settled = 0",
            (CUT_NOTE,),
        ).rowcount
        self.outcomes = self._outcomes()

    def _outcomes(self) -> Tally:
        """What the ledger holds so far, per (listener, outcome, cause)."""
        tally = Tally()
        sql = "SELECT status, note, method, COUNT(*) FROM requests GROUP BY status, note, method"
        for status, note, method, count in self._read(sql):
            tally.add(("api", *outcome(status, note, method)), count)
        sql = "SELECT listener, cause, SUM(count) FROM refusals GROUP BY listener, cause"
        for listener, said, count in self._read(sql):
            tally.add((listener, REFUSED, cause(said)), count)
        return tally

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def register(self, entry: RunEntry) -> None:
        allow = None if entry.allow is None else json.dumps(list(entry.allow))
        self._write(
            "INSERT INTO runs (run_id, token_sha256, budget_usd, allow, socket_dir, gateway_dir,"
            " registered_at, allow_api_fetch) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.run_id,
                entry.token_sha256,
                entry.budget_usd,
                allow,
                str(entry.socket_dir),
                str(entry.gateway_dir),
                _now(),
                int(entry.allow_api_fetch),
            ),
        )

    def revoke(self, run_id: str) -> None:
        self._write(
            "UPDATE runs SET revoked_at = ? WHERE run_id = ? AND revoked_at IS NULL",
            (_now(), run_id),
        )

    def active(self) -> list[RunEntry]:
        """The runs not revoked, oldest first."""
        rows = self._read(
            "SELECT run_id, token_sha256, budget_usd, allow, socket_dir, gateway_dir,"
            " allow_api_fetch FROM runs WHERE revoked_at IS NULL ORDER BY registered_at"
        )
        return [
            RunEntry(
                run_id=row[0],
                token_sha256=row[1],
                budget_usd=row[2],
                allow=None if row[3] is None else tuple(json.loads(row[3])),
                socket_dir=Path(row[4]),
                gateway_dir=Path(row[5]),
                allow_api_fetch=bool(row[6]),
            )
            for row in rows
        ]

    def token_hashes(self) -> list[str]:
        """Every run's token hash, served or revoked: what the redaction must know."""
        return [str(row[0]) for row in self._read("SELECT token_sha256 FROM runs")]

    def known(self, run_id: str) -> bool:
        return bool(self._read("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)))

    def run_of(self, token_sha256: str) -> str | None:
        """The run a token was made for, served or revoked; None for a token never seen."""
        rows = self._read("SELECT run_id FROM runs WHERE token_sha256 = ?", (token_sha256,))
        return str(rows[0][0]) if rows else None

    def begin(self, run_id: str, reserved: float) -> int:
        """A request admitted with `reserved` of the budget, before it is forwarded."""
        cursor = self._write(
            "INSERT INTO requests (run_id, time, reserved_usd, settled) VALUES (?, ?, ?, 0)",
            (run_id, _now(), reserved),
        )
        return int(cursor.lastrowid or 0)

    def settle(self, row: int | None, run_id: str, fields: dict[str, Any]) -> None:
        """A request's answer (or refusal): the begun `row` completed, or a new row."""
        tokens = fields.get("tokens") or {}
        texts = {name: fields.get(name) for name in ("method", "path", "model", "note")}
        clean = {k: self.redactor.note(v) if isinstance(v, str) else v for k, v in texts.items()}
        values = {
            "method": clean["method"],
            "path": clean["path"],
            "status": fields.get("status"),
            "model": clean["model"],
            **{name: int(tokens.get(name, 0)) for name in TOKEN_FIELDS},
            "cost_usd": fields.get("cost_usd") or 0.0,
            "ms": fields.get("ms"),
            "note": clean["note"] or None,
            "settled": 1,
        }
        counted = ("api", *outcome(fields.get("status"), clean["note"] or None, clean["method"]))
        if row is None:
            names = ", ".join(["run_id", "time", *values])
            marks = ", ".join("?" * (len(values) + 2))
            sql = f"INSERT INTO requests ({names}) VALUES ({marks})"  # noqa: S608 - our names
            self._write(sql, (run_id, _now(), *values.values()))
        else:
            assignments = ", ".join(f"{name} = ?" for name in values)
            sql = f"UPDATE requests SET {assignments} WHERE id = ?"  # noqa: S608 - our names
            self._write(sql, (*values.values(), row))
        self.outcomes.add(counted)

    def count_refusals(self, counts: dict[tuple[str, str, str, str, str], int]) -> None:
        """Add refusal counts, keyed (minute, listener, cause, peer, run id), in one commit."""
        sql = (
            "INSERT INTO refusals VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT"
            " (minute, listener, cause, peer, run_id) DO UPDATE SET count = count + excluded.count"
        )
        clean = self.redactor.note
        rows = [(*(clean(text) for text in key), count) for key, count in counts.items()]
        with self._lock:
            try:
                with self._db:  # one transaction
                    self._db.execute("BEGIN IMMEDIATE")
                    self._db.executemany(sql, rows)
            except sqlite3.Error as exc:
                raise BrokerError(text("broker.ledger_write", problem=exc)) from exc
        for (_, listener, said, _, _), count in counts.items():
            self.outcomes.add((listener, REFUSED, cause(said)), count)

    def refusals(self) -> list[dict[str, Any]]:
        """The refusal counts, oldest minute first: `flowerbox broker --ledger`, the tests."""
        names, rows = self._query("SELECT * FROM refusals ORDER BY minute, rowid", ())
        return [dict(zip(names, row, strict=True)) for row in rows]

    def spent(self, run_id: str | None = None) -> float:
        """What one run (None: every run, the team) has spent, settled rows and begun ones
        at their worst case."""
        where, args = ("WHERE run_id = ?", (run_id,)) if run_id else ("", ())
        sql = (
            "SELECT COALESCE(SUM(CASE settled WHEN 1 THEN cost_usd ELSE reserved_usd END), 0)"
            f" FROM requests {where}"  # noqa: S608 - our own clause
        )
        return float(self._read(sql, args)[0][0])

    def spend(self, run_id: str) -> Spend | None:
        """A run's spend for its provenance note (the git relay's `spent`): its cost as
        `spent` counts it, its rows and the models they named; None for a run with none."""
        (count,) = self._read("SELECT COUNT(*) FROM requests WHERE run_id = ?", (run_id,))[0]
        if not count:
            return None
        sql = "SELECT DISTINCT model FROM requests WHERE run_id = ? AND model IS NOT NULL"
        models = tuple(sorted(str(model) for (model,) in self._read(sql, (run_id,))))
        return Spend(self.spent(run_id), int(count), models)

    def rows(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Every row (of one run), oldest first: `flowerbox broker --ledger`, and the tests."""
        where, args = ("WHERE run_id = ?", (run_id,)) if run_id else ("", ())
        sql = f"SELECT * FROM requests {where} ORDER BY id"  # noqa: S608 - our own clause
        names, rows = self._query(sql, args)
        return [dict(zip(names, row, strict=True)) for row in rows]

    def _write(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        """Run one statement (autocommit: durable when this returns)."""
        with self._lock:
            try:
                return self._db.execute(sql, args)
            except sqlite3.Error as exc:
                raise BrokerError(text("broker.ledger_write", problem=exc)) from exc

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self._query(sql, args)[1]

    def _query(self, sql: str, args: tuple[Any, ...]) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Column names and rows, fetched under the lock (the connection is shared)."""
        with self._lock:
            try:
                cursor = self._db.execute(sql, args)
                return [c[0] for c in cursor.description], cursor.fetchall()
            except sqlite3.Error as exc:
                raise BrokerError(text("broker.ledger_read", problem=exc)) from exc
