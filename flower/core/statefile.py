"""JSON state files that survive crashes and concurrent writers (manifest, lineage, asks).

Every write is an atomic replace: a temp file in the same directory, fsync, `os.replace`,
fsync of the directory. A reader therefore sees the old file or the new one, never a torn
one, and needs no lock. Writers that read-modify-write take an exclusive `flock` on a sidecar
`<name>.lock` that is never replaced (locking the JSON file itself would lock an inode that
`os.replace` retires). The kernel drops a flock when its holder dies, so a killed process
leaves no stale lock; a temp file it leaves behind is swept by the next locked write.

Every writer of one file goes through `update_json` (or holds `locked`): the sweep runs under
the lock, where no live writer can own a temp.

Errors (flower.errors draws the whole tree)::

    StateFileError          a FlowerError, and a ValueError as it always was
    ├── CorruptStateError   the file exists but is not valid JSON (it is never overwritten)
    └── LockTimeoutError    the lock stayed held longer than the timeout
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from flower.core.lang import text
from flower.core.untrusted import MiB, parse_json
from flower.errors import FlowerError

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "CorruptStateError",
    "LockTimeoutError",
    "StateFileError",
    "atomic_write_json",
    "locked",
    "read_json",
    "sweep_temps",
    "update_json",
]

T = TypeVar("T")

STATE_LIMIT = 64 * MiB
"""The largest state file read: in a flowerbox workspace the box writes these files too."""
DEFAULT_LOCK_TIMEOUT = 10.0
"""Seconds to wait for a lock. It is held only around one small read-modify-write."""

_FIRST_BACKOFF = 0.001
_MAX_BACKOFF = 0.05
_held = threading.local()


class StateFileError(FlowerError, ValueError):
    """Base of this module's errors; `path` names the file concerned."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path


class CorruptStateError(StateFileError):
    """The state file exists but does not parse; it is left exactly as it is."""


class LockTimeoutError(StateFileError):
    """The lock file stayed locked for `timeout` seconds; `holder` is its pid if known."""

    def __init__(self, path: Path, *, timeout: float, holder: int | None) -> None:
        who = (
            text("lock.who_process", pid=holder) if holder is not None else text("lock.who_another")
        )
        super().__init__(path, text("lock.timeout", path=path, who=who, timeout=f"{timeout:g}"))
        self.timeout = timeout
        self.holder = holder


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def _fsync(fd: int) -> None:
    # macOS's fsync does not flush the drive's cache; F_FULLFSYNC does (atomicwrites).
    if sys.platform == "darwin":
        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
    else:
        os.fsync(fd)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def atomic_write_json(path: Path, data: Any) -> None:
    """Replace `path` with `data` as JSON, atomically and durably (mode 0600, owner only).

    Any failure up to the rename, an fsync one included, raises and leaves the previous file
    intact; a failed fsync of the directory raises with the new file in place but its
    durability unknown. Either way the caller still holds `data` and may write it again.
    fsync errors are never retried here: on Linux a second fsync can report success after
    the data was dropped.
    """
    text = json.dumps(data, ensure_ascii=False, indent=2) + "\n"  # before any file exists
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            _fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_directory(path.parent)


def sweep_temps(directory: Path, name: str) -> list[Path]:
    """Remove the temp files a killed writer of `directory/name` left; return them.

    Only safe while holding `locked(directory / name)`, where no writer is mid-write.
    """
    stale = sorted(directory.glob(f"{_temp_prefix(Path(name))}*.tmp"))
    for tmp in stale:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return stale


def read_json(path: Path, default: Any) -> Any:
    """The parsed file, or a copy of `default` when it does not exist. Needs no lock. Read
    as box-written data (flower.core.untrusted.parse_json): at most STATE_LIMIT bytes, nested
    at most MAX_JSON_DEPTH deep.

    Raises:
        CorruptStateError: the file exists but is not valid UTF-8 JSON, or is too large or
            too deep.
    """
    try:
        with path.open("rb") as handle:
            raw = handle.read(STATE_LIMIT + 1)
    except FileNotFoundError:
        return copy.deepcopy(default)
    try:
        return parse_json(raw, limit=STATE_LIMIT)
    except ValueError as exc:
        raise CorruptStateError(path, text("state.not_json", path=path, problem=exc)) from exc


def _holder(lock_path: Path) -> int | None:
    try:
        return int(lock_path.read_text().strip())
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def locked(path: Path, *, timeout: float = DEFAULT_LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the exclusive lock of `path` (on `<path>.lock`, created with its directory).

    Not reentrant: taking a lock this thread already holds raises at once instead of waiting
    for itself. Threads and processes exclude each other alike.

    Raises:
        LockTimeoutError: the lock was not free within `timeout` seconds.
    """
    lock_path = path.with_name(path.name + ".lock")
    if not hasattr(_held, "paths"):
        _held.paths = set()
    held: set[Path] = _held.paths
    if lock_path in held:
        raise StateFileError(path, text("state.lock_reentrant", lock=lock_path))
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, lock_path, timeout)
        held.add(lock_path)
        try:
            # The holder's pid, so a contender that times out can say who holds the lock.
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            held.discard(lock_path)
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, lock_path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    delay = _FIRST_BACKOFF
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LockTimeoutError(
                    lock_path, timeout=timeout, holder=_holder(lock_path)
                ) from None
            # Jitter keeps contenders that woke together from retrying in lockstep.
            time.sleep(min(delay * random.uniform(0.5, 1.5), remaining))
            delay = min(delay * 2, _MAX_BACKOFF)


def update_json(
    path: Path,
    fn: Callable[[Any], T],
    *,
    default: Any,
    timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> T:
    """Read-modify-write `path` under its lock: `fn(current)` becomes the new content.

    The file is re-read inside the lock (missing means a copy of `default`), so concurrent
    updates are never lost; the result is written atomically and returned. Stale temps of
    killed writers are swept first. `fn` runs while the lock is held: it must be quick and
    must not wait on the network or an agent.

    Raises:
        CorruptStateError: the current file does not parse; nothing is written.
        LockTimeoutError: see `locked`.
    """
    with locked(path, timeout=timeout):
        sweep_temps(path.parent, path.name)
        new = fn(read_json(path, default))
        atomic_write_json(path, new)
        return new
