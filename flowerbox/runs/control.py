"""The library half of the commands around a run that is already going: find a run, list
it, follow its events, stop it, reap a run whose keeper died, and drop an answer or a message
into its inbox. The typer half is flowerbox.cli.runs.

RUN is a run id or a unique start of one; without it, the workspace's newest run. Answers and
messages are files dropped into the run dir's inbox/, which the flower process inside the box
watches.

What a run is (its spec, status, cost) comes from flowerbox's host-only records; what the box
wrote (events, questions, output) is read through flowerbox.box.untrusted and cleaned of
terminal control sequences, and answers are dropped without following any link the box
planted (DESIGN.md, "The trust boundary").
"""

from __future__ import annotations

import json
import select
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.markup import escape

from flower import Event, RunDir, iso_utc, parse_json, printable_data, text, word
from flowerbox.box.untrusted import drop as drop_file
from flowerbox.box.untrusted import exists, read_from, real_folder
from flowerbox.errors import RunError, UntrustedFileError
from flowerbox.runs import records
from flowerbox.runs.records import Run

if TYPE_CHECKING:
    from flower import Timeline

STDERR = Console(stderr=True, highlight=False, soft_wrap=True)
DELIVERY_WAIT_S = 10.0  # how long answer/send wait to see the run take the file
EVENTS_CHUNK = 1024 * 1024  # read at a time from a run's events file
END_WAIT_S = 60.0  # how long stop waits for the run's keeper to record the end


def find(workspace: Path | None, run: str | None) -> Run:
    return records.find((workspace or Path.cwd()).expanduser().resolve(), run)


def ended_error(run: Run, doing: str) -> RunError:
    said = word("doing", doing)
    return RunError(text("run.ended", run=run.run_id, status=status_text(run), doing=said))


def status_text(run: Run) -> str:
    code = run.exit_code
    said = word("outcome", run.status)
    return said if code is None else text("end.run_status", status=said, code=code)


def summary(run: Run) -> dict[str, Any]:
    """One run as ps shows it (and prints with --json)."""
    return {
        "run_id": run.run_id,
        "status": run.status,
        "exit_code": run.exit_code,
        "age_s": records.age(run),
        "started_at": iso_utc(records.moment(run, "started")),
        "ended_at": iso_utc(records.moment(run, "ended")),
        "cost_usd": run.cost_usd(),
        "workspace": run.meta.get("workspace"),
        "command": run.meta.get("command", []),
        "detached": run.meta.get("detached"),
        "resumed_from": run.meta.get("resumed_from"),
        "box": run.meta.get("box"),  # the isolation it had, as the engine recorded it
        "pending_asks": [
            {"id": a.get("id"), "question": a.get("question", ""), "options": a.get("options", [])}
            for a in run.pending_asks()
        ],
    }


def follow_events(run: Run, sink: Callable[[Any], Any], *, follow: bool) -> Run:
    """Hand every event of the run to `sink`; with `follow`, keep going until the run has
    ended (its meta says so) and every line is read. Returns the run as last recorded."""
    from watchfiles import watch  # lazy: only `logs -f`/`attach` need its native module

    workspace = run.workspace
    relative = run.spec().events_file.relative_to(workspace)
    offset = 0

    def drain() -> None:
        nonlocal offset
        while True:
            try:
                data = read_from(workspace, relative, offset=offset, limit=EVENTS_CHUNK)
            except (UntrustedFileError, OSError, ValueError) as exc:
                STDERR.print(f"[yellow]not following the events: {escape(str(exc))}[/]")
                return
            complete = (data or b"").rfind(b"\n") + 1  # an unfinished last line waits
            if data and not complete and len(data) == EVENTS_CHUNK:
                complete = len(data)  # a line longer than a chunk: skipped, not waited on
            offset += complete
            for line in (data or b"")[:complete].splitlines():
                try:
                    row = parse_json(line, limit=EVENTS_CHUNK)
                except ValueError:
                    continue  # not a line flower wrote: skip it, never stop following
                if isinstance(row, dict):
                    sink(Event.from_json(printable_data(row)))
            if not data or len(data) < EVENTS_CHUNK:
                return

    drain()
    latest = records.load(run.state_dir) or run
    if not follow or not latest.running:
        return latest
    # Wakes on each write (to the meta, or to the events folder when it is a real one), and
    # each half second anyway: a keeper that died writes nothing.
    folder = relative.parent
    watched = [run.state_dir, *([workspace / folder] if real_folder(workspace, folder) else [])]
    for _ in watch(*watched, rust_timeout=500, yield_on_timeout=True, recursive=False):
        drain()
        latest = records.load(run.state_dir) or latest
        if not latest.running:
            drain()
            return latest
    return latest


def timeline(run: Run) -> Timeline:
    """The run drawn as flower's report draws it, read from the box-written run dir through
    flowerbox.box.untrusted (no link followed, regular files only, bounded). Its events are
    those of this box run and of the runs it resumed (host-only records name them)."""
    # lazy: the model's default window comes from flower.core.agent, which loads the SDK;
    # the timeline's reading is the report's alone (`flowerbox ps` reads no timeline)
    from flower import default_window, read_timeline

    spec = run.spec()
    try:
        below = spec.run_dir.relative_to(spec.workspace)
    except ValueError as exc:
        raise RunError(text("runs.run_dir_outside", run=run.run_id)) from exc

    def read(relative: str, limit: int) -> bytes | None:
        return read_from(spec.workspace, below / relative, offset=0, limit=limit)

    chain = records.chain(run.run_id)
    events = [RunDir(".").events(run_id).as_posix() for run_id in reversed(chain)]
    return read_timeline(
        spec.run_dir, workspace=spec.workspace, events=events, read=read, window=default_window()
    )


def stop_run(run: Run) -> Run:
    """SIGTERM the agent (docker stop, killed after the grace period) and wait for the run's
    keeper to record the end; the run as last recorded."""
    _stop_agent(run)
    return guarded_end(run)


def guarded_end(run: Run) -> Run:
    """The run as last recorded once its keeper recorded the end (END_WAIT_S at most): after
    a stop, or while a guard finishes the work of a keeper that died (flowerbox.runs.guard)."""
    deadline = time.monotonic() + END_WAIT_S
    latest = run
    while time.monotonic() < deadline:
        latest = records.load(run.state_dir) or latest
        if not latest.running:
            break
        time.sleep(0.2)
    return latest


def reap(run: Run) -> Run:
    """Do what a run's lost keeper would have: stop the agent if it still runs, then wait,
    remove both containers and the private folders, and record the end (after_run). Under
    the reaping lock: a guard (or another reap) that got there first has done it already."""
    with records.reaping(run.state_dir):
        latest = records.load(run.state_dir) or run
        if not latest.unkept:
            return latest
        _stop_agent(latest)
        # lazy: as _stop_agent's engine; only a run whose keeper is lost needs its work done
        from flowerbox.runs.supervise import supervise

        supervise(latest.state_dir)
    return records.load(run.state_dir) or run


def _stop_agent(run: Run) -> None:
    """docker stop of the run's agent (a no-op when it is gone)."""
    # lazy: the engine's API, which reading runs (ps, logs, answer) never needs
    from flowerbox.box.running import Running

    Running.existing(run.spec()).stop()


def drop(run: Run, data: dict[str, str]) -> PurePosixPath:
    """Drop an answer or a message into the run's inbox (box-writable: no link followed on
    the way or at the name); the file's path relative to the workspace.

    Raises:
        RunError: the inbox is a link or not a folder (planted by the box).
    """
    fresh = RunDir(run.run_dir).new_drop()
    folder, name = PurePosixPath(fresh.parent.relative_to(run.workspace)), fresh.name
    payload = json.dumps(data, ensure_ascii=False).encode()
    try:
        drop_file(run.workspace, folder, name, payload)
    except (UntrustedFileError, OSError) as exc:
        raise RunError(text("runs.undeliverable", run=run.run_id, problem=exc)) from exc
    return folder / name


def read_answers(run: Run, done: threading.Event, stream: TextIO | None = None) -> None:
    """Until `done` (or the end of `stream`, default stdin): a typed line answers the run's
    oldest pending question, or goes to its inbox when none is pending (`flowerbox attach`,
    and an attached run on a terminal). Polls, so `done` is seen; blank lines are skipped."""
    stream = stream or sys.stdin
    while not done.is_set():
        if not select.select([stream], [], [], 0.2)[0]:
            continue
        line = stream.readline()
        if not line:
            return
        text = line.strip()
        if not text:
            continue
        pending = run.pending_asks()
        if pending:
            drop(run, {"answer": str(pending[0]["id"]), "text": text})
        else:
            drop(run, {"send": text})


def deliver(run: Run, path: PurePosixPath) -> str:
    """Wait for the run to take a dropped file: taken, rejected (moved aside), or waiting."""
    deadline = time.monotonic() + DELIVERY_WAIT_S
    while time.monotonic() < deadline:
        if not exists(run.workspace, path):  # taken, or moved aside: the rejected copy says
            rejected = path.parent / RunDir.REJECTED / path.name
            return "rejected" if exists(run.workspace, rejected) else "taken"
        time.sleep(0.05)
    return "waiting"
