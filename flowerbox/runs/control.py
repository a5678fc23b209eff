"""The commands around a run that is already going (registered in flowerbox.cli.app):

    flowerbox ps [--all] [--json]        runs of this workspace (or all): status, age, cost,
                                         and the questions they wait on, with their ids
    flowerbox logs [RUN] [-f]            the run's events; -f follows until the run ends
    flowerbox attach [RUN]               follow, answer questions, Ctrl+C stops the run
    flowerbox stop [RUN]                 SIGTERM: flower records its step, exit 130, resumable
    flowerbox resume [RUN]               a new box continuing the same flower run and sessions
    flowerbox answer QID "text"          answer a pending question (from the host)
    flowerbox send "text"                tell the run something unprompted

RUN is a run id or a unique start of one; without it, the workspace's newest run. Answers and
messages are files dropped into the run dir's inbox/ (flower.core.inbox), which the flower
process inside the box watches. Errors (no runs, an unknown id, a run already ended, an answer
nobody waits for) exit 2 with a message that says what to do.

What a run is (its spec, status, cost) comes from flowerbox's host-only records; what the box
wrote (events, questions, output) is read through flowerbox.box.untrusted and cleaned of terminal
control sequences before it reaches the screen, and answers are dropped without following any
link the box planted (DESIGN.md, "The trust boundary").
"""

from __future__ import annotations

import json
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flowerbox.box.untrusted import clean, clean_data, read_from, real_folder
from flowerbox.errors import BoxError, RunError, StateError, UntrustedFileError
from flowerbox.runs import records
from flowerbox.runs.records import Run

STDERR = Console(stderr=True, highlight=False, soft_wrap=True)
DELIVERY_WAIT_S = 10.0  # how long answer/send wait to see the run take the file
EVENTS_CHUNK = 1024 * 1024  # read at a time from a run's events file
END_WAIT_S = 60.0  # how long stop waits for the run's keeper to record the end

RunArg = Annotated[
    str | None, typer.Argument(help="A run id, or its unique start (default: the newest run here).")
]
RunOption = Annotated[
    str | None,
    typer.Option("--run", "-r", help="A run id, or its unique start (default: the newest here)."),
]
Workspace = Annotated[
    Path | None, typer.Option("--workspace", "-w", help="The project folder (default: here).")
]


@contextmanager
def _errors() -> Iterator[None]:
    """What the user can get wrong, as a message on stderr and exit 2."""

    try:
        yield
    except (RunError, BoxError, StateError) as exc:
        STDERR.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc


def _find(workspace: Path | None, run: str | None) -> Run:
    return records.find((workspace or Path.cwd()).expanduser().resolve(), run)


def _ended(run: Run, doing: str) -> RunError:
    return RunError(
        f"run {run.run_id} has already ended ({_status(run)}): there is nothing to {doing}; "
        f"`flowerbox logs {run.run_id}` shows what it did, `flowerbox resume {run.run_id}` "
        "continues it"
    )


def _status(run: Run) -> str:
    code = run.exit_code
    return run.status if code is None else f"{run.status}, exit {code}"


# --- ps -----------------------------------------------------------------------------------


def ps(
    all_runs: Annotated[bool, typer.Option("--all", "-a", help="Every workspace's runs.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the runs as JSON.")] = False,
    workspace: Workspace = None,
) -> None:
    """List the runs (newest last) and the questions they wait on."""
    where = (workspace or Path.cwd()).expanduser().resolve()
    with _errors():
        found = records.all_runs() if all_runs else records.runs_of(where)
        rows = [summary(run) for run in found]
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    if not rows:
        STDERR.print(f'no flowerbox runs in {where}: `flowerbox "ask" --detach` starts one')
        return
    console = Console(highlight=False, soft_wrap=True)
    table = Table(box=None, pad_edge=False)
    columns = ["RUN", "STATUS", "AGE", "COST", "QUESTIONS", "COMMAND"]
    for column in columns:  # never cut a run id: it is what the other commands take
        table.add_column(column, no_wrap=column != "COMMAND")
    if all_runs:
        table.add_column("WORKSPACE", overflow="fold")
    for row in rows:
        cost = "" if row["cost_usd"] is None else f"${row['cost_usd']:.4f}"
        asks = " ".join(ask["id"] for ask in row["pending_asks"])
        cells = [row["run_id"], row["status"], row["age"], cost, asks, _short(row["command"])]
        if all_runs:
            cells.append(str(row["workspace"]))
        table.add_row(*(escape(cell) for cell in cells))
    console.print(table)
    for row in rows:
        for ask in row["pending_asks"]:
            options = f"  [{' / '.join(ask['options'])}]" if ask.get("options") else ""
            console.print(f"{row['run_id']} {ask['id']}: {escape(ask['question'])}{options}")
            console.print(f'  answer: flowerbox answer {ask["id"]} "..." -r {row["run_id"]}')


def summary(run: Run) -> dict[str, Any]:
    """One run as ps shows it (and prints with --json)."""
    return {
        "run_id": run.run_id,
        "status": run.status,
        "exit_code": run.exit_code,
        "age": records.age(run),
        "started": run.meta.get("started"),
        "ended": run.meta.get("ended"),
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


def _short(command: list[str], width: int = 48) -> str:
    text = " ".join(part if part and " " not in part else repr(part) for part in command)
    return text if len(text) <= width else text[: width - 1] + "…"


# --- logs and attach ----------------------------------------------------------------------


def logs(
    run: RunArg = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep following until the run ends.")
    ] = False,
    workspace: Workspace = None,
) -> None:
    """Show a run's events (flower's own rendering); -f follows a live run to its end."""
    from flower.cli.render import Render

    with _errors():
        found = _find(workspace, run)
    render = Render(Console(highlight=False, soft_wrap=True))
    try:
        final = follow_events(found, render, follow=follow)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None  # only the following ends; the run goes on
    _report_end(final)


def attach(run: RunArg = None, workspace: Workspace = None) -> None:
    """Follow a live run; a typed line answers its question. Ctrl+C stops the run.

    On a terminal a typed line answers the oldest pending question, or is sent to the run
    when none is pending. Ctrl+C stops the run (resumable); a second one leaves it stopping.
    """
    from flower.cli.render import Render

    with _errors():
        found = _find(workspace, run)
        if not found.running:
            raise _ended(found, "attach to")
    stopping = threading.Event()

    def on_ctrl_c(signum: int, frame: FrameType | None) -> None:
        if stopping.is_set():
            raise KeyboardInterrupt
        stopping.set()
        STDERR.print(f"stopping {found.run_id}; Ctrl+C again to leave it stopping on its own")
        threading.Thread(target=_stop_quietly, args=(found,), daemon=True).start()

    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    done = threading.Event()
    if sys.stdin.isatty():
        threading.Thread(target=_read_answers, args=(found, done), daemon=True).start()
    try:
        final = follow_events(found, Render(Console(highlight=False, soft_wrap=True)), follow=True)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    finally:
        done.set()
        signal.signal(signal.SIGINT, previous)
    code = _report_end(final)
    raise typer.Exit(2 if code is None else code)


def follow_events(run: Run, sink: Callable[[Any], Any], *, follow: bool) -> Run:
    """Hand every event of the run to `sink`; with `follow`, keep going until the run has
    ended (its meta says so) and every line is read. Returns the run as last recorded."""
    from watchfiles import watch

    from flower.cli.eventlog import from_json

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
                    row = json.loads(line)
                except ValueError:
                    continue  # not a line flower wrote: skip it, never stop following
                if isinstance(row, dict):
                    sink(from_json(clean_data(row)))
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


def _report_end(run: Run) -> int | None:
    """A line on stderr for a run that has ended (and the tail of its output if it failed
    without events); its exit code."""
    if run.running:
        return None
    cost = run.cost_usd()
    spent = "" if cost is None else f" · ${cost:.4f}"
    for line in run.meta.get("notices") or []:
        STDERR.print(escape(clean(str(line))))
    STDERR.print(f"{run.run_id}: {_status(run)}{spent}", style="bold")
    output = run.state_dir / records.OUTPUT
    if run.exit_code not in (0, 1, 3, 130) and output.is_file():
        with output.open("rb") as handle:  # the agent's output: its tail, cleaned
            handle.seek(max(0, output.stat().st_size - 64 * 1024))
            tail = handle.read().decode("utf-8", errors="replace").splitlines()[-20:]
        STDERR.print(escape(clean("\n".join(tail))), style="dim")
    return run.exit_code


def _read_answers(run: Run, done: threading.Event) -> None:
    """A typed line answers the oldest pending question, or goes to the run's inbox."""
    while not done.is_set():
        if not select.select([sys.stdin], [], [], 0.2)[0]:
            continue
        line = sys.stdin.readline()
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


# --- stop and resume ----------------------------------------------------------------------


def stop(run: RunArg = None, workspace: Workspace = None) -> None:
    """Stop a run: SIGTERM to flower, which records its step and exits 130 (resumable)."""
    with _errors():
        found = _find(workspace, run)
        if found.unkept:
            STDERR.print(f"{found.run_id} lost its keeper: stopping it and cleaning up")
            final = reap(found)
        elif not found.running:
            raise _ended(found, "stop")
        else:
            STDERR.print(f"stopping {found.run_id} (flower records its step; up to 30 s)")
            final = stop_run(found)
    if final.running:
        STDERR.print(f"{found.run_id}: the agent stopped, its keeper has not recorded it yet")
        return
    STDERR.print(
        f"{found.run_id}: {_status(final)}; `flowerbox resume {found.run_id}` continues it"
    )


def stop_run(run: Run) -> Run:
    """SIGTERM the agent (docker stop, killed after the grace period) and wait for the run's
    keeper to record the end; the run as last recorded."""
    from flowerbox.box.engine import Box, connect

    Box.existing(run.spec(), client=connect()).stop()
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
    remove both containers and the private folders, and record the end (after_run)."""
    from flowerbox.box.engine import Box, connect
    from flowerbox.runs.supervise import supervise

    Box.existing(run.spec(), client=connect()).stop()
    supervise(run.state_dir)
    return records.load(run.state_dir) or run


def _stop_quietly(run: Run) -> None:

    try:
        stop_run(run)
    except BoxError as exc:
        STDERR.print(f"[bold red]error:[/] {escape(str(exc))}")


def resume(
    run: RunArg = None,
    workspace: Workspace = None,
    detach: Annotated[
        bool | None,
        typer.Option(
            "--detach/--attach",
            "-d/-a",
            help="In the background, or on this terminal (default: as the run was).",
            show_default=False,
        ),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(help="USD for the rest of the run (default: what is left of its budget)."),
    ] = None,
) -> None:
    """Continue a run that ended: a new box, the same settings, the same sessions.

    flower resumes each step's session from the workspace's runs/ (lineage.json); the new
    box gets a new run id, and its meta names the run it resumed.
    """
    from dataclasses import replace

    from flowerbox.cli.app import _in_box
    from flowerbox.runs.detach import remaining_budget, resume_command

    with _errors():
        found = _find(workspace, run)
        if found.running:
            raise RunError(
                f"run {found.run_id} is still running: `flowerbox attach {found.run_id}` "
                f"follows it, `flowerbox stop {found.run_id}` stops it"
            )
        if found.unkept:
            found = reap(found)
        spec = found.spec()
        spec = replace(spec, budget_usd=remaining_budget(found, budget))
    command = list(found.meta.get("command") or [])
    if command[:1] == ["shell"]:
        STDERR.print("[bold red]error:[/] a shell is not resumed: run `flowerbox shell` again")
        raise typer.Exit(2)
    code = _in_box(
        resume_command(command),
        workspace=spec.workspace,
        image=spec.image,
        base_image=None,
        isolate=spec.workbench is not None,
        budget=spec.budget_usd,
        detach=bool(found.meta.get("detached")) if detach is None else detach,
        resume_of=spec,
    )
    raise typer.Exit(code)


# --- answer and send ----------------------------------------------------------------------


def answer(
    question: Annotated[str, typer.Argument(help="The question's id (q1...), as ps shows.")],
    text: Annotated[str, typer.Argument(help="Your answer.")],
    run: RunOption = None,
    workspace: Workspace = None,
) -> None:
    """Answer a question a run waits on."""
    with _errors():
        found = _find(workspace, run)
        if not found.running:
            raise _ended(found, "answer")
        pending = [str(ask.get("id")) for ask in found.pending_asks()]
        if question not in pending:
            waiting = ", ".join(pending) or "none"
            raise RunError(
                f"run {found.run_id} waits for no answer to {question!r} (pending: {waiting}): "
                "`flowerbox ps` lists the questions and their ids"
            )
        delivered = _deliver(found, drop(found, {"answer": question, "text": text}))
        if delivered == "rejected":
            raise RunError(
                f"run {found.run_id} refused the answer: {question} was closed meanwhile "
                "(answered or timed out)"
            )
    STDERR.print(f"{found.run_id} {question}: {_DELIVERED[delivered]}")


def send(
    text: Annotated[str, typer.Argument(help="What to tell the run.")],
    run: RunOption = None,
    workspace: Workspace = None,
) -> None:
    """Tell a run something unprompted; a stopped run reads it when resumed."""
    with _errors():
        found = _find(workspace, run)
        if not found.running and found.status != "stopped":
            raise _ended(found, "send to")
        path = drop(found, {"send": text})
    if not found.running:
        STDERR.print(f"{found.run_id} is stopped: it reads this when you `flowerbox resume` it")
        return
    STDERR.print(f"{found.run_id}: {_DELIVERED[_deliver(found, path)]}")


_DELIVERED = {
    "taken": "delivered",
    "rejected": "refused by the run",
    "waiting": "in the run's inbox; it has not picked it up yet",
}


def drop(run: Run, data: dict[str, str]) -> PurePosixPath:
    """Drop an answer or a message into the run's inbox (box-writable: no link followed on
    the way or at the name); the file's path relative to the workspace.

    Raises:
        RunError: the inbox is a link or not a folder (planted by the box).
    """
    from flower.core.inbox import INBOX_DIR, drop_name
    from flowerbox.box.untrusted import drop as drop_file

    folder = PurePosixPath(run.run_dir.relative_to(run.workspace)) / INBOX_DIR
    name = drop_name()
    payload = json.dumps(data, ensure_ascii=False).encode()
    try:
        drop_file(run.workspace, folder, name, payload)
    except (UntrustedFileError, OSError) as exc:
        raise RunError(f"cannot deliver to run {run.run_id}: {exc}") from exc
    return folder / name


def _deliver(run: Run, path: PurePosixPath) -> str:
    """Wait for the run to take a dropped file: taken, rejected (moved aside), or waiting."""
    from flower.core.inbox import REJECTED_DIR
    from flowerbox.box.untrusted import exists

    deadline = time.monotonic() + DELIVERY_WAIT_S
    while time.monotonic() < deadline:
        if not exists(run.workspace, path):  # taken, or moved aside: the rejected copy says
            rejected = path.parent / REJECTED_DIR / path.name
            return "rejected" if exists(run.workspace, rejected) else "taken"
        time.sleep(0.05)
    return "waiting"
