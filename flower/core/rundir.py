"""RunDir: the layout of a run directory (`--run-dir`, `./runs` by default), written down once.

    <run_dir>/
      sessions.db              every session's transcript (flower.stores)
      run.lock                 held (flock) by the one flower run using this directory
      manifest.json            one row per step, opened when it starts, kept across processes
      writers/<run id>.lock    held (flock) by each live writer of manifest rows
      lineage.json             step name -> session id, per workspace (flower.core.lineage)
      ask-history.json         the asks this run was started or amended with (the starter):
                               the same ask again continues the run instead of amending it
      last-ask.json            the ask `flower go` was last given, written first: a run
                               killed before the starter recorded it still has its ask
      wake.json                a wake's words until the goal was set again from them and the
                               coordinator has worked a round with them (the starter)
      progress.json            per workspace: the processes of the run, each step's round
      asks.json                the questions waiting for a human (flower.core.inbox)
      inbox/<drop>.json        answers and messages dropped by other processes
      inbox/rejected/          dropped files that could not be used, kept with a log line
      aside/                   the side session of `?` questions: a run directory of its own
      workbench/               the workbench of `flower run -W`
      events/<run id>.jsonl    a run's Events (`--events`; flowerbox passes this path)
      worktrees/<agent>/       the git worktrees of isolated workers, while the run lasts
                               (flower.core.worktrees)
      patches/<run id>.patch   the run's work as a patch (`--finish patch`)
      home/                    flowerbox: the CLI's HOME inside the box

Runtime, status, analyze, answer, the inbox and flowerbox (on the host) all find these files
through a RunDir, so a name is spelled in this module only. A state file's lock
(`<name>.lock`) and its writers' temps belong to flower.core.statefile.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from flower.errors import RunDirError

__all__ = ["RUN_ID_ENV", "RunDir", "new_run_id", "this_run_id"]

# flowerbox names the run it starts here, so one id works with both CLIs (`flowerbox logs ID`
# takes the id `flower "ask" --json` reports).
RUN_ID_ENV = "FLOWER_RUN_ID"
_RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")


def new_run_id() -> str:
    """A new run id: when it started (sortable, local time) and six random hex digits."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def this_run_id() -> str:
    """The id this process runs under: the one flowerbox gave it (RUN_ID_ENV, used once: a
    second Runtime in the same process gets a new id), else a new one."""
    given = os.environ.pop(RUN_ID_ENV, "")
    return given if _RUN_ID.fullmatch(given) else new_run_id()


@dataclass(frozen=True)
class RunDir:
    """The run directory at `path` (used as given: nothing is resolved or created)."""

    path: Path

    SESSIONS: ClassVar[str] = "sessions.db"
    MANIFEST: ClassVar[str] = "manifest.json"
    WRITERS: ClassVar[str] = "writers"
    RUN_LOCK: ClassVar[str] = "run.lock"
    PROGRESS: ClassVar[str] = "progress.json"
    LINEAGE: ClassVar[str] = "lineage.json"
    ASKS: ClassVar[str] = "asks.json"
    INBOX: ClassVar[str] = "inbox"
    REJECTED: ClassVar[str] = "rejected"
    ASK_HISTORY: ClassVar[str] = "ask-history.json"
    LAST_ASK: ClassVar[str] = "last-ask.json"
    WAKE: ClassVar[str] = "wake.json"
    ASIDE: ClassVar[str] = "aside"
    WORKBENCH: ClassVar[str] = "workbench"
    EVENTS: ClassVar[str] = "events"
    HOME: ClassVar[str] = "home"
    WORKTREES: ClassVar[str] = "worktrees"
    PATCHES: ClassVar[str] = "patches"

    def __init__(self, path: str | Path) -> None:
        object.__setattr__(self, "path", Path(path))

    def create(self) -> None:
        """Make the folder (and its parents), or say what to do when that cannot be."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self.unwritable(exc) from exc

    def unwritable(self, exc: OSError) -> RunDirError:
        """The error for a run directory that cannot be made or written to: permissions, a
        read-only disk, a file in the way. Never worth a retry: the user must act."""
        return RunDirError(
            self.path,
            f"cannot write the run directory {self.path} ({exc.strerror or exc}): make it (or "
            "the folder it is in) writable, or pass another one (--run-dir)",
        )

    @property
    def sessions(self) -> Path:
        return self.path / self.SESSIONS

    @property
    def manifest(self) -> Path:
        return self.path / self.MANIFEST

    @property
    def run_lock(self) -> Path:
        """Held for a run's life: one flower run per run directory (flower.core.runlock)."""
        return self.path / self.RUN_LOCK

    def writer(self, run_id: str) -> Path:
        """The lock a live Runtime of run `run_id` holds while it may write running rows."""
        return self.path / self.WRITERS / f"{run_id}.lock"

    @property
    def progress(self) -> Path:
        return self.path / self.PROGRESS

    @property
    def lineage(self) -> Path:
        return self.path / self.LINEAGE

    @property
    def asks(self) -> Path:
        return self.path / self.ASKS

    @property
    def ask_history(self) -> Path:
        return self.path / self.ASK_HISTORY

    @property
    def last_ask(self) -> Path:
        """The ask `flower go` was last given, written before anything else runs."""
        return self.path / self.LAST_ASK

    @property
    def wake(self) -> Path:
        """A wake's words not yet delivered everywhere (flower.workflow.wake)."""
        return self.path / self.WAKE

    @property
    def inbox(self) -> Path:
        return self.path / self.INBOX

    @property
    def rejected(self) -> Path:
        return self.inbox / self.REJECTED

    @property
    def aside(self) -> RunDir:
        """The side session's own run directory."""
        return RunDir(self.path / self.ASIDE)

    @property
    def workbench(self) -> Path:
        return self.path / self.WORKBENCH

    @property
    def home(self) -> Path:
        return self.path / self.HOME

    def events(self, run_id: str) -> Path:
        """The Events file of run `run_id` (JSON lines, flower.cli.eventlog)."""
        return self.path / self.EVENTS / f"{run_id}.jsonl"

    @property
    def worktrees(self) -> Path:
        """Where isolated workers' git worktrees are made (one folder per worker)."""
        return self.path / self.WORKTREES

    def patch(self, run_id: str) -> Path:
        """The patch `--finish patch` writes for the run whose first process was `run_id`."""
        return self.path / self.PATCHES / f"{run_id}.patch"

    def new_drop(self) -> Path:
        """A fresh path in the inbox for one answer or message. Names sort in drop order
        (nanoseconds first); the pid and a random tail keep two droppers apart. Write it
        under a dot-named temp and rename: the watcher skips dot names."""
        name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
        return self.inbox / name

    def holds_a_run(self) -> bool:
        """Something ran here: it has a manifest, a sessions database or pending asks."""
        return any(p.is_file() for p in (self.manifest, self.sessions, self.asks))
