"""One flower run per run directory: a lock held for the run's whole life (issue 20).

Two runs in one run directory resume each other's sessions, rewrite each other's asks.json
and redo each other's work. So `flower "ask"`, `resume`, `once` and `run` hold an exclusive
flock on `<run_dir>/run.lock` until they exit (the kernel drops it when the process dies, so
a killed run never leaves it held); a second one is refused at once with what to do
instead. The lock file says who holds it. In flowerbox the workspace's runs/ is the box's
run directory too, so a flower on the host and the flower in a box see the same lock.
`status`, `answer` and `send` talk to a running run and take no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flower.core.lang import text
from flower.core.rundir import RunDir
from flower.errors import UsageError

__all__ = ["RunBusyError", "holding_the_run"]


class RunBusyError(UsageError):
    """Another flower run holds this run directory; `holder` is what its lock file says."""

    def __init__(self, run_dir: Path, holder: dict[str, Any]) -> None:
        who = text("runbusy.who", pid=holder.get("pid", "?"), host=holder.get("host", "?"))
        since = holder.get("started", "?")
        doing = " ".join(str(part) for part in holder.get("command", [])) or "flower"
        self.fix = text("runbusy.fix")
        super().__init__(
            text(
                "runbusy.message",
                run_dir=run_dir,
                who=who,
                since=since,
                doing=doing,
                fix=self.fix,
            )
        )
        self.run_dir = run_dir
        self.holder = holder


@contextlib.contextmanager
def holding_the_run(run_dir: Path, command: list[str]) -> Iterator[None]:
    """Hold `run_dir`'s run lock for the block (and no longer than this process lives).

    Raises:
        RunBusyError: another live process holds it.
        RunDirError: the run directory cannot be made or written to.
    """
    layout = RunDir(run_dir)
    layout.create()
    try:
        fd = os.open(layout.run_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except PermissionError as exc:
        raise layout.unwritable(exc) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunBusyError(run_dir, _holder(fd)) from None
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": command,
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me, ensure_ascii=False).encode(), 0)
        yield
    finally:
        os.close(fd)  # the flock goes with the last descriptor


def _holder(fd: int) -> dict[str, Any]:
    """What the lock's holder wrote about itself (empty if it has not yet, or wrote junk).
    In a flowerbox workspace the box can write this file: every string is cut short and
    loses control characters before it reaches a terminal in an error message."""
    try:
        data = json.loads(os.pread(fd, 16 * 1024, 0) or b"{}")
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    command = data.get("command")
    return {
        "pid": _printable(data.get("pid")),
        "host": _printable(data.get("host")),
        "started": _printable(data.get("started")),
        "command": [_printable(part) for part in command[:20]] if isinstance(command, list) else [],
    }


def _printable(value: object) -> str:
    return "".join(ch for ch in str(value)[:200] if ch.isprintable())
