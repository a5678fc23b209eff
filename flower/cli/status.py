"""`flower status [RUN_DIR]`: what a run did and what it waits for, safe while it runs.

Everything is read, nothing written: manifest.json, lineage.json and asks.json through
statefile.read_json (atomic replaces, so never a torn file), sessions.db through a read-only
SQLite connection (WAL: a reader never waits for the run's writer). A file that cannot be read
becomes a line under "problems" instead of an error, so `--follow` survives anything a live
run does. `snapshot()` is the data; the tables and `--json` are two views of it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from shlex import quote
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table

from flower.cli.exits import Exit, exit_codes
from flower.core.inbox import pending_asks
from flower.core.manifest import row_state
from flower.core.rundir import RunDir
from flower.core.statefile import StateFileError, read_json
from flower.core.workbench import Workbench
from flower.core.workspace import workbench_location
from flower.errors import RunDirError

# Files whose changes say nothing new: locks, writers' temps, SQLite's shared memory (which a
# reader touches too: watching it would make --follow redraw itself forever).
_QUIET_SUFFIXES = (".lock", ".tmp", "-shm", "-journal")


def status(
    run_dir: Annotated[
        Path, typer.Argument(help="The run directory (sessions.db, manifest.json...).")
    ] = Path("runs"),
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Redraw whenever the run writes; Ctrl+C ends.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the data as JSON (one line per redraw).")
    ] = False,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            "-w",
            help="The run's workspace: also show (and follow) its workbench.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show a run's steps, sessions, cost, errors and pending questions."""
    with exit_codes():
        if not run_dir.is_dir():
            raise RunDirError(
                run_dir,
                f"no run directory at {run_dir}: pass the run_dir of a flower run "
                "(default ./runs, or the --run-dir you gave it)",
            )
        workbench = find_workbench(run_dir, workspace)
    console = Console(highlight=False, soft_wrap=True)
    if not follow:
        show(console, snapshot(run_dir, workbench), as_json=as_json)
        return
    try:
        _follow(console, run_dir, workbench, as_json=as_json)
    except KeyboardInterrupt:
        raise typer.Exit(Exit.OK) from None


def _follow(console: Console, run_dir: Path, workbench: Path | None, *, as_json: bool) -> None:
    """Redraw on every change worth it. The watcher also wakes each second, and a redraw
    happens only when the data differ: a change made while the watcher was starting, or on a
    filesystem without inotify events (some bind mounts), still shows within a second."""
    # lazy: only --follow watches and redraws
    from rich.live import Live
    from watchfiles import watch

    paths = [run_dir] if workbench is None else [run_dir, workbench]
    ticks = watch(*paths, watch_filter=_worth_a_redraw, rust_timeout=1000, yield_on_timeout=True)
    shown = snapshot(run_dir, workbench)
    if as_json or not console.is_terminal:
        show(console, shown, as_json=as_json)
        for _ in ticks:
            data = snapshot(run_dir, workbench)
            if data != shown:
                if not as_json:
                    console.rule(datetime.datetime.now().strftime("%H:%M:%S"))
                show(console, data, as_json=as_json)
                shown = data
        return
    with Live(render(shown), console=console, auto_refresh=False) as live:
        for _ in ticks:
            data = snapshot(run_dir, workbench)
            if data != shown:
                live.update(render(data), refresh=True)
                shown = data


def _worth_a_redraw(change: object, path: str) -> bool:
    return not path.endswith(_QUIET_SUFFIXES)


def show(console: Console, data: dict[str, Any], *, as_json: bool) -> None:
    """Print `data` as tables, or as one line of JSON (flushed: a pipe reader sees it now)."""
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    else:
        console.print(render(data))
        console.file.flush()


# -- the data ----------------------------------------------------------------------------


def find_workbench(run_dir: Path, workspace: Path | None) -> Path | None:
    """The workbench of the run, if it can be found: `<run_dir>/workbench` (-W), else with a
    workspace `<workspace>/.flower`, else `<parent>/.flower-<name>` (isolated runs)."""
    candidates = [RunDir(run_dir).workbench]
    if workspace is not None:
        workspace = workspace.resolve()
        candidates += [workbench_location(workspace, isolate=i) for i in (False, True)]
    return next((c for c in candidates if c.is_dir()), None)


def snapshot(run_dir: Path, workbench: Path | None = None) -> dict[str, Any]:
    """Everything `flower status` shows, as JSON-ready data. Never raises for a bad file.

    Keys: run_dir, steps (manifest rows with duration_s, and state: ended, running, or
    interrupted when the process that wrote a running row is gone), sessions (session_id,
    project_key, steps, entries, subagents, last_write), total_cost_usd, aside_cost_usd, errors
    ({step, error} per failed attempt), pending_asks (asks.json as written), workbench
    (path and file counts, or None), problems (what could not be read, and why).
    """
    problems: list[str] = []
    layout = RunDir(run_dir)
    steps = [_step(row, run_dir) for row in read_rows(layout.manifest, problems)]
    try:
        asks = pending_asks(run_dir)
    except StateFileError as exc:
        problems.append(str(exc))
        asks = []
    named = lineage_steps(layout.lineage, problems)
    for row in steps:
        if row["session_id"]:
            named.setdefault(row["session_id"], [])
            if row["step"] not in named[row["session_id"]]:
                named[row["session_id"]].append(row["step"])
    sessions = [
        {**record, "steps": named.get(record["session_id"], [])}
        for record in read_sessions(layout.sessions, problems)
    ]
    aside = read_rows(layout.aside.manifest, problems)
    return {
        "run_dir": str(run_dir.resolve()),
        "steps": steps,
        "sessions": sessions,
        "total_cost_usd": round(sum(row["cost_usd"] for row in steps), 6),
        "aside_cost_usd": round(sum((_number(row.get("cost_usd")) for row in aside), 0.0), 6),
        "errors": [
            {"step": row["step"], "error": error} for row in steps for error in row["errors"]
        ],
        "pending_asks": asks,
        "workbench": None if workbench is None else _workbench(workbench),
        "problems": problems,
    }


def read_rows(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    """The rows of a manifest ([] if it does not exist); a bad file is noted in `problems`."""
    try:
        rows = read_json(path, [])
    except StateFileError as exc:
        problems.append(str(exc))
        return []
    if not isinstance(rows, list):
        problems.append(f"{path} is not a list of rows; it was ignored")
        return []
    return [row for row in rows if isinstance(row, dict)]


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _step(row: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    started, ended = _number(row.get("started_at")), _number(row.get("ended_at"))
    errors = row.get("errors") if isinstance(row.get("errors"), list) else []
    usage = row.get("usage")
    return {
        "step": str(row.get("step", "?")),
        "run": row.get("run"),
        "state": row_state(row, run_dir),
        "session_id": row.get("session_id"),
        "ok": bool(row.get("ok")),
        "usage": usage if isinstance(usage, dict) else {},
        "attempts": row.get("attempts", 1),
        "cost_usd": _number(row.get("cost_usd")),
        "num_turns": row.get("num_turns", 0),
        "error": row.get("error"),
        "errors": [str(e) for e in errors or []],
        "resumed": bool(row.get("resumed")),
        "retired": row.get("retired") or [],
        "started_at": started or None,
        "ended_at": ended or None,
        "duration_s": round(ended - started, 3) if started and ended >= started else None,
    }


def lineage_steps(path: Path, problems: list[str]) -> dict[str, list[str]]:
    """{session id: [step names]} over every workspace of lineage.json."""
    try:
        data = read_json(path, {})
    except StateFileError as exc:
        problems.append(str(exc))
        return {}
    named: dict[str, list[str]] = {}
    workspaces = data.get("workspaces") if isinstance(data, dict) else None
    for entry in (workspaces or {}).values():
        steps = entry.get("steps") if isinstance(entry, dict) else None
        for step, session_id in (steps or {}).items():
            named.setdefault(str(session_id), []).append(str(step))
    return named


@contextlib.contextmanager
def read_only(db: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to `db` inside one read transaction (one consistent snapshot).

    Nothing is created, migrated or checkpointed. A database at rest (no `-wal` beside it:
    its last writer closed it) is opened `immutable`, which creates no `-shm`/`-wal` either
    and works on a read-only folder; a live one (`-wal` present) plainly read-only, through
    the WAL, so the latest appends are seen and the writer is never waited for.
    """
    live = db.with_name(db.name + "-wal").exists()
    uri = db.resolve().as_uri() + ("?mode=ro" if live else "?mode=ro&immutable=1")
    conn = sqlite3.connect(uri, uri=True, timeout=2.0, isolation_level=None)
    try:
        conn.execute("BEGIN")
        yield conn
        conn.execute("COMMIT")
    finally:
        conn.close()


def unreadable(db: Path, exc: sqlite3.Error) -> str:
    """What a failed read of `db` means, and what to do: wait for a busy one; move aside one
    that is corrupt or is not a sessions database (waiting would not help)."""
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return f"{db} is busy ({exc}): a run is writing it; retry in a moment"
    return (
        f"{db} cannot be read as a sessions database ({exc}): it is corrupt or not flower's; "
        "move it aside (the next run starts a new one)"
    )


def read_sessions(db: Path, problems: list[str]) -> list[dict[str, Any]]:
    """The main transcripts of `db`, most recently written first ([] without a db)."""
    if not db.is_file():
        return []
    try:
        with read_only(db) as conn:
            rows = conn.execute(
                "SELECT m.store_key, m.mtime, "
                "(SELECT count(*) FROM entries e WHERE e.store_key = m.store_key) FROM meta m"
            ).fetchall()
    except sqlite3.Error as exc:
        problems.append(unreadable(db, exc))
        return []
    sessions: dict[str, dict[str, Any]] = {}
    for store_key, mtime, count in rows:
        project, session_id, *sub = str(store_key).split("/", 2)
        record = sessions.setdefault(
            session_id,
            {"session_id": session_id, "project_key": project, "entries": 0, "subagents": 0},
        )
        record["mtime"] = max(record.get("mtime", 0), int(mtime))
        if sub:
            record["subagents"] += 1
        else:
            record["entries"] = int(count)
    found = sorted(sessions.values(), key=lambda r: r["mtime"], reverse=True)
    for record in found:
        record["last_write"] = _iso(record.pop("mtime") / 1000)
    return found


def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")


def _workbench(root: Path) -> dict[str, Any]:
    counts = {
        name: sum(1 for p in (root / name).rglob("*") if p.is_file())
        if (root / name).is_dir()
        else 0
        for name in Workbench.FOLDERS
    }
    return {"path": str(root), **counts}


# -- the view ----------------------------------------------------------------------------


def render(data: dict[str, Any]) -> RenderableType:
    """The tables of `flower status`."""
    parts: list[RenderableType] = [f"[bold]{escape(data['run_dir'])}[/]"]
    steps = Table(
        "step",
        "ok",
        "attempts",
        "cost",
        "turns",
        "time",
        "error",
        title="steps",
        box=box.SIMPLE_HEAD,
    )
    for row in data["steps"]:
        flags = ["resumed"] if row["resumed"] else []
        if row["retired"]:
            flags.append(f"{len(row['retired'])} sessions retired")
        steps.add_row(
            escape(row["step"]) + (f" [dim]({', '.join(flags)})[/]" if flags else ""),
            outcome_cell(row),
            str(row["attempts"]),
            f"${row['cost_usd']:.4f}",
            str(row["num_turns"]),
            _when(row),
            escape(str(row["error"] or "")),
        )
    parts.append(steps if data["steps"] else "[dim]no step has finished yet[/]")
    if data["sessions"]:
        sessions = Table(
            "session", "steps", "entries", "subagents", title="sessions", box=box.SIMPLE_HEAD
        )
        sessions.add_column("last write", no_wrap=True)
        for s in data["sessions"]:
            sessions.add_row(
                s["session_id"][:8],
                escape(", ".join(s["steps"])),
                str(s["entries"]),
                str(s["subagents"]),
                s["last_write"][5:19].replace("T", " "),
            )
        parts.append(sessions)
    total = f"total cost: ${data['total_cost_usd']:.4f}"
    if data["aside_cost_usd"]:
        total += f" (+ ${data['aside_cost_usd']:.4f} of oracle asides)"
    parts.append(total)
    parts += [f"[red]error[/] {escape(e['step'])}: {escape(e['error'])}" for e in data["errors"]]
    if data["pending_asks"]:
        asks = Table(
            "id",
            "question",
            "options",
            title="waiting for you",
            box=box.SIMPLE_HEAD,
            title_style="bold",
        )
        for ask in data["pending_asks"]:
            options = ask.get("options") or []
            asks.add_row(
                escape(str(ask.get("id"))),
                escape(str(ask.get("question"))),
                escape(" / ".join(map(str, options))),
            )
        parts += [
            asks,
            "[dim]to answer: flower answer <id> "
            f'"..." --run-dir {escape(quote(data["run_dir"]))}[/]',
        ]
    if data["workbench"]:
        bench = data["workbench"]
        counts = ", ".join(f"{bench[name]} {name}" for name in Workbench.FOLDERS)
        parts.append(f"workbench {escape(bench['path'])}: {counts}")
    parts += [f"[yellow]problem[/] {escape(p)}" for p in data["problems"]]
    return Group(*parts)


def outcome_cell(row: dict[str, Any]) -> str:
    """The "ok" cell of a step row: yes, no, running, or interrupted (its process is gone)."""
    if row["state"] == "running":
        return "[yellow]running[/]"
    if row["state"] == "interrupted":
        return "[red]interrupted[/]"
    return "[green]yes[/]" if row["ok"] else "[red]no[/]"


def _when(row: dict[str, Any]) -> str:
    if row["started_at"] is None:
        return ""
    start = datetime.datetime.fromtimestamp(row["started_at"]).strftime("%m-%d %H:%M:%S")
    return start if row["duration_s"] is None else f"{start} ({row['duration_s']:.0f} s)"
