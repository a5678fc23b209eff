"""manifest.json: one row per step, shared by every flower writing to a run_dir.

The file is a JSON list of rows (dicts). Each row carries a `run` field, the id of the
flower process that wrote it. A write replaces that run's rows and keeps everyone else's, so
two flowers under one run_dir never erase each other's accounts as long as their run ids
differ. The read-dedupe-write cycle runs under the file's lock (statefile.update_json), which
makes it safe where the seeds' plain re-read was racy.

A step's row is opened when its first attempt starts (`state: "running"`) and rewritten as
usage streams in, so a process killed mid-attempt leaves its tokens, cost and session behind;
it becomes `state: "ended"` when the step ends. Those running writes are coalesced in a
background thread (`ManifestWriter`): the newest snapshot wins, the final write is ordered
after every earlier one, and the event loop never waits for a disk. A row carries its
writer's `pid` and `host`, and its writer holds a lock (`RunDir.writer(run)`, a flock the
kernel drops when the process dies) for as long as it lives: `row_state` reads a running row
whose writer holds no lock any more as `"interrupted"`, never as running forever.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import threading
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from flower.core.lang import text
from flower.core.rundir import RunDir
from flower.core.statefile import CorruptStateError, read_json, update_json

__all__ = [
    "ENDED",
    "INTERRUPTED",
    "RUNNING",
    "ManifestWriter",
    "WriterLock",
    "checked_rows",
    "merge_rows",
    "record_rows",
    "row_state",
    "spent",
    "writer_alive",
]

RUNNING = "running"  # written: the step is under way
ENDED = "ended"  # written: the step ended (ok or not); rows older than issue 19 have no state
INTERRUPTED = "interrupted"  # read: a running row whose writer is gone (killed, crashed)


def merge_rows(current: Sequence[Any], rows: Sequence[Mapping[str, Any]], *, run: str) -> list[Any]:
    """`current` with the rows of `run` replaced by `rows`, each stamped with `run`.

    Other runs' rows keep their order; this run's rows take the place of its first old row,
    or go at the end. A row whose `run` names another run is a caller bug and raises.
    """
    stamped = []
    for row in rows:
        if row.get("run", run) != run:
            raise ValueError(f"row {row!r} belongs to run {row['run']!r}, not {run!r}")
        stamped.append({**row, "run": run})
    merged: list[Any] = []
    placed = False
    for old in current:
        if not (isinstance(old, dict) and old.get("run") == run):
            merged.append(old)
        elif not placed:
            merged.extend(stamped)
            placed = True
    if not placed:
        merged.extend(stamped)
    return merged


def record_rows(path: Path, rows: Sequence[Mapping[str, Any]], *, run: str) -> list[Any]:
    """Write `rows` as run `run`'s rows of the manifest at `path`; return the whole list.

    Raises:
        CorruptStateError: the manifest is not valid JSON or not a list; it is left as is.
        LockTimeoutError: the manifest's lock stayed held (statefile.DEFAULT_LOCK_TIMEOUT).
    """

    def merge(current: Any) -> list[Any]:
        return merge_rows(checked_rows(path, current), rows, run=run)

    return update_json(path, merge, default=[])


def checked_rows(path: Path, rows: Any) -> list[dict[str, Any]]:
    """`rows`, read from the manifest at `path`, if they are a list of JSON objects.

    Raises:
        CorruptStateError: they are not; the file is left as it is.
    """
    if not isinstance(rows, list):
        raise CorruptStateError(
            path, text("state.manifest_not_list", path=path, kind=type(rows).__name__)
        )
    if not all(isinstance(row, dict) for row in rows):
        raise CorruptStateError(path, text("state.manifest_row", path=path))
    return rows


def row_state(row: Mapping[str, Any], run_dir: Path) -> str:
    """How a row's step stands: "ended", "running", or "interrupted" (its writer is gone)."""
    state = row.get("state")
    if state is None:
        return ENDED  # written before rows were opened early: only finished steps had one
    if state != RUNNING:
        return str(state)
    run = row.get("run")
    alive = isinstance(run, str) and writer_alive(RunDir(run_dir).writer(run))
    return RUNNING if alive else INTERRUPTED


def spent(path: Path, runs: Collection[str]) -> float:
    """What the rows of `runs` in the manifest at `path` cost, interrupted ones included."""
    rows = read_json(path, [])
    if not isinstance(rows, list):
        return 0.0
    return sum(
        float(row["cost_usd"])
        for row in rows
        if isinstance(row, dict)
        and row.get("run") in runs
        and isinstance(row.get("cost_usd"), int | float)
    )


def writer_alive(lock: Path) -> bool:
    """Whether a live process holds `lock` (a WriterLock). Reads only: nothing is created."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False  # never taken, or its writer cleaned up
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the shared lock, if it was taken
    return False


class WriterLock:
    """The lock a process holds while its rows may say "running" (`RunDir.writer(run)`).

    Taken once, kept until `release()` or the process's death (the kernel drops a flock with
    its holder). Locks of dead writers are swept when a new one is taken.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def hold(self) -> None:
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for stale in self.path.parent.glob("*.lock"):
            if stale != self.path and not writer_alive(stale):
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                break
            except FileNotFoundError:  # another writer's release removed the empty folder
                self.path.parent.mkdir(parents=True, exist_ok=True)
        fcntl.flock(fd, fcntl.LOCK_EX)  # a reader's probe holds it for microseconds at most
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None
        with contextlib.suppress(OSError):  # the last writer out leaves no empty folder
            self.path.parent.rmdir()


class ManifestWriter:
    """Writes one run's rows: `offer()` in the background (newest wins), `write()` now.

    A failed background write is kept in `error` and not raised (a running row is a best
    effort; the step's final row is written with `write()`, which raises as record_rows does).
    """

    def __init__(self, path: Path, *, run: str) -> None:
        self.path = path
        self.run = run
        self.error: Exception | None = None
        self.writes = 0
        self._cond = threading.Condition()
        self._pending: Sequence[Mapping[str, Any]] | None = None
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def offer(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Have `rows` written soon, unless newer rows come first. Never blocks on the disk."""
        with self._cond:
            self._pending = rows
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._drain, name=f"manifest-{self.run}", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Write `rows` now, after any background write under way; drop older offers."""
        with self._cond:
            self._pending = None
            while self._busy:
                self._cond.wait()
            self._busy = True
        try:
            record_rows(self.path, rows, run=self.run)
            self.writes += 1
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def close(self) -> None:
        """Stop the background thread once its current write is done; offers are dropped."""
        with self._cond:
            self._closed = True
            self._pending = None
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _drain(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (self._pending is None or self._busy):
                    self._cond.wait()
                rows, self._pending = self._pending, None
                if self._closed or rows is None:
                    return
                self._busy = True
            try:
                record_rows(self.path, rows, run=self.run)
                self.writes += 1
            except Exception as exc:  # noqa: BLE001 - kept for the caller, see the class doc
                self.error = exc
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
