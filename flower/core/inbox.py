"""The run directory's file mailbox: how another process answers a HumanChannel.

A run that is attached to a run directory (`HumanChannel.attach(run_dir)`) keeps two things
there (DESIGN.md, "Pending questions across processes"):

    <run_dir>/asks.json          the asks waiting for a human: [{id, question, options,
                                 asked_at}], rewritten atomically on every change, [] if none
    <run_dir>/inbox/<name>.json  one answer or message per file, dropped by anyone:
                                 {"answer": "q1", "text": "..."} or {"send": "..."}
    <run_dir>/inbox/rejected/    files that could not be used (junk, an ask nobody waits
                                 for), moved aside with a log line, never deleted

(flower.core.rundir.RunDir owns these names.)

`drop_answer`, `drop_message` and `pending_asks` are for the other side (the CLI, flowerbox on
the host); they need nothing but the path. `answer_command` is how a person answers from
elsewhere: `flower answer ...`, or what $FLOWER_ANSWER_COMMAND says (flowerbox sets it in a
box, where the answer comes through `flowerbox answer` on the host). A dropped file is
written to a dot-named temp and renamed into place (RunDir.new_drop), so the watcher never
reads half a file. Names sort in drop order.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flower.core.rundir import RunDir
from flower.core.statefile import atomic_write_json, read_json

if TYPE_CHECKING:
    import asyncio

    from watchfiles import Change

__all__ = [
    "ANSWER_COMMAND_ENV",
    "Mailbox",
    "answer_command",
    "drop_answer",
    "drop_message",
    "pending_asks",
    "write_asks",
]

ANSWER_COMMAND_ENV = "FLOWER_ANSWER_COMMAND"
"""A command line that answers this run's questions from elsewhere, `{id}` standing for the
question's id. Set, it also means someone can answer: a run without a terminal waits."""

POLL_S = 0.5
"""How often the inbox is read when it cannot be watched (the watch's own timeout drains it
as often)."""

logger = logging.getLogger(__name__)


def pending_asks(run_dir: str | Path) -> list[dict[str, Any]]:
    """The asks of the run in `run_dir` still waiting for a human; [] if none or no file."""
    asks: list[dict[str, Any]] = read_json(RunDir(Path(run_dir)).asks, [])
    return asks


def answer_command(run_dir: Path) -> str:
    """The command that answers question `{id}` of the run in `run_dir` from another
    terminal: $FLOWER_ANSWER_COMMAND, else `flower answer {id} "..." --run-dir <run_dir>`."""
    return os.environ.get(ANSWER_COMMAND_ENV) or f'flower answer {{id}} "..." --run-dir {run_dir}'


def write_asks(run_dir: Path, asks: list[dict[str, Any]]) -> None:
    """Replace asks.json with `asks` (atomically: readers never see a torn file)."""
    atomic_write_json(RunDir(run_dir).asks, asks)


def drop_answer(run_dir: str | Path, ask_id: str, text: str) -> Path:
    """Answer ask `ask_id` of the run in `run_dir` from any process; returns the file dropped."""
    return _drop(Path(run_dir), {"answer": ask_id, "text": text})


def drop_message(run_dir: str | Path, text: str) -> Path:
    """Tell the run in `run_dir` something unprompted (its HumanChannel.send); returns the file."""
    return _drop(Path(run_dir), {"send": text})


def _drop(run_dir: Path, data: dict[str, str]) -> Path:
    target = RunDir(run_dir).new_drop()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target


class Mailbox:
    """Watches `<run_dir>/inbox/` and hands each dropped file to the callbacks, then deletes it.

    `on_answer(ask_id, text)` returns False when nobody waits for that ask: the file is then
    rejected like junk. Callbacks run on the event loop that called `start()`. Files already
    there at start are read first.
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        on_answer: Callable[[str, str], bool],
        on_message: Callable[[str], None],
    ) -> None:
        self.run_dir = run_dir
        self.inbox = RunDir(run_dir).inbox
        self.rejected = RunDir(run_dir).rejected
        self._on_answer = on_answer
        self._on_message = on_message
        # A threading.Event: watchfiles polls is_set() from its worker thread, and stop() may
        # be called from any thread.
        self._stop = threading.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start watching in a background task of the running loop."""
        # lazy: asyncio and watchfiles load with the watcher, not with the names of this module
        # (flowerbox's host reads ANSWER_COMMAND_ENV and runs no watcher, issue 31)
        import asyncio

        self.inbox.mkdir(parents=True, exist_ok=True)
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="flower-inbox")

    def stop(self) -> None:
        """Ask the watcher to stop; it ends within watchfiles' step (about 50 ms)."""
        self._stop.set()

    async def aclose(self) -> None:
        """Stop the watcher and wait until it has ended."""
        self.stop()
        if self._task is not None:
            await self._task

    async def _watch(self) -> None:
        from watchfiles import awatch  # lazy: as in start()

        self.drain()
        try:
            # stop() ends the watch within a step (50 ms). A cancelled task (a loop shutting
            # down with the watcher still on) waits for the watch thread to time out: 0.5 s
            # here instead of watchfiles' 5 s. Each timeout drains too: where the kernel tells
            # no one of a file another machine's kernel wrote (gVisor's bind mounts: a file
            # dropped from the host raises no inotify event in the box; NFS), the answer is
            # still taken within half a second.
            async for _ in awatch(
                self.inbox,
                stop_event=self._stop,
                recursive=False,
                watch_filter=_dropped,
                rust_timeout=500,
                yield_on_timeout=True,
            ):
                self.drain()
        except Exception as exc:
            # No watch to be had (most often: every inotify instance of this user is taken,
            # fs.inotify.max_user_instances, 128 by default, one or two a box: 60 to 120
            # boxes of one user): the inbox is read on a clock instead, never given up on,
            # since a box's questions have no terminal to be answered in.
            logger.warning(
                "the inbox watcher of %s failed (%s); reading the inbox every %.1f s instead",
                self.inbox,
                exc,
                POLL_S,
            )
            await self._poll()

    async def _poll(self) -> None:
        import asyncio  # lazy: as in start()

        while not self._stop.is_set():
            self.drain()
            await asyncio.sleep(POLL_S)

    def drain(self) -> None:
        """Process every file now in the inbox, oldest first."""
        for path in sorted(self.inbox.glob("*.json")):
            if not path.name.startswith("."):
                self._take(path)

    def _take(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return  # another drain already took it
        except (OSError, ValueError) as exc:
            self._reject(path, f"unreadable ({exc})")
            return
        match data:
            case {"answer": str(ask_id), "text": str(text)}:
                if not self._on_answer(ask_id, text):
                    self._reject(path, f"nobody waits for an answer to {ask_id!r}")
                    return
            case {"send": str(text)}:
                self._on_message(text)
            case _:
                self._reject(path, 'expected {"answer": id, "text": ...} or {"send": ...}')
                return
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def _reject(self, path: Path, why: str) -> None:
        self.rejected.mkdir(exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.replace(self.rejected / path.name)
        logger.warning("inbox file %s moved to %s/: %s", path.name, self.rejected, why)


def _dropped(change: Change, path: str) -> bool:
    """Only a file arriving under its final name matters (temps start with a dot)."""
    from watchfiles import Change  # lazy: as in Inbox.start()

    name = os.path.basename(path)
    return change != Change.deleted and name.endswith(".json") and not name.startswith(".")
