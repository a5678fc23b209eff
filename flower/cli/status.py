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
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from shlex import quote
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table

from flower.cli import contract
from flower.cli.exits import Exit, exit_codes
from flower.cli.options import existing_run_dir
from flower.cli.tables import table_console
from flower.core import lang
from flower.core.ends import AttemptEnd
from flower.core.inbox import pending_asks
from flower.core.labels import display_name
from flower.core.manifest import INTERRUPTED, RUNNING, writer_alive
from flower.core.rundir import RunDir
from flower.core.statefile import StateFileError, read_json
from flower.core.times import iso_utc
from flower.core.untrusted import printable_data
from flower.core.workbench import Workbench
from flower.core.workspace import workbench_location
from flower.errors import RunDirError

# Files whose changes say nothing new: locks, writers' temps, SQLite's shared memory (which a
# reader touches too: watching it would make --follow redraw itself forever).
_QUIET_SUFFIXES = (".lock", ".tmp", "-shm", "-journal")

# How a run stands (`runs[].state`): RUNNING (its process works), and:
WAITING = "waiting"  # its process waits for a human's answer
DONE = "done"  # it ended on its own, whatever the verdict
STOPPED = "stopped"  # it was stopped from outside (SIGTERM, Ctrl+C): resumable
LOST = "lost"  # its process died mid-attempt (killed, crashed): resumable
RUN_STATES = (RUNNING, WAITING, DONE, STOPPED, LOST)


def status(
    run_dir: Annotated[
        Path, typer.Argument(help="The run directory (sessions.db, manifest.json...).")
    ] = Path("runs"),
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Redraw as the run writes, until it ends (or Ctrl+C)."),
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
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            "-r",
            help="Only this run (its id, or the id's unique start), as flower and flowerbox "
            "print it.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show a run's steps, sessions, cost, errors and pending questions."""
    with exit_codes(json_command="flower status" if as_json else None):
        workbench = find_workbench(existing_run_dir(run_dir), workspace)
        if run is not None:
            run = one_run(snapshot(run_dir), run)
    console = table_console()
    if not follow:
        show(console, snapshot(run_dir, workbench, run_id=run), as_json=as_json)
        return
    try:
        _follow(console, run_dir, workbench, as_json=as_json, run_id=run)
    except KeyboardInterrupt:
        raise typer.Exit(Exit.OK) from None


def _follow(
    console: Console, run_dir: Path, workbench: Path | None, *, as_json: bool, run_id: str | None
) -> None:
    """Redraw on every change worth it, until no run holds the run directory any more; the
    last redraw (the run's end) is marked `final`. The watcher also wakes each second, and a
    redraw happens only when the data differ: a change made while the watcher was starting,
    or on a filesystem without inotify events (some bind mounts), still shows within a
    second."""
    # lazy: only --follow watches and redraws
    from rich.live import Live
    from watchfiles import watch

    paths = [run_dir] if workbench is None else [run_dir, workbench]
    ticks = watch(*paths, watch_filter=_worth_a_redraw, rust_timeout=1000, yield_on_timeout=True)
    shown = snapshot(run_dir, workbench, run_id=run_id)
    if as_json or not console.is_terminal:
        show(console, shown, as_json=as_json)
        if shown["final"]:
            return
        for _ in ticks:
            data = snapshot(run_dir, workbench, run_id=run_id)
            if data != shown:
                if not as_json:
                    console.print(f"-- {datetime.datetime.now():%H:%M:%S} --", style="dim")
                show(console, data, as_json=as_json)
                shown = data
            if not data["live"]:
                return
        return
    with Live(render(shown), console=console, auto_refresh=False) as live:
        for _ in ticks:
            data = snapshot(run_dir, workbench, run_id=run_id)
            if data != shown:
                live.update(render(data), refresh=True)
                shown = data
            if not data["live"]:
                return


def _worth_a_redraw(change: object, path: str) -> bool:
    return not path.endswith(_QUIET_SUFFIXES)


def show(console: Console, data: dict[str, Any], *, as_json: bool) -> None:
    """Print `data` as tables, or as one line of JSON (flushed: a pipe reader sees it now)."""
    if as_json:
        contract.emit(data, indent=None)
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


def one_run(data: dict[str, Any], given: str) -> str:
    """The id of the one run of `data` that `given` names (its id or the id's unique start).

    Raises:
        RunDirError: none does, or several do.
    """
    found = [r["run_id"] for r in data["runs"] if r["run_id"] and r["run_id"].startswith(given)]
    if len(found) == 1:
        return str(found[0])
    listed = ", ".join(r["run_id"] or "?" for r in data["runs"]) or lang.text("cli.none")
    key = "cli.no_run_matches" if not found else "cli.several_runs_match"
    said = lang.text(key, run_dir=data["run_dir"], given=repr(given), listed=listed)
    raise RunDirError(Path(data["run_dir"]), said)


def snapshot(
    run_dir: Path, workbench: Path | None = None, *, run_id: str | None = None
) -> dict[str, Any]:
    """Everything `flower status` shows, as a `flower status` document (flower.cli.contract,
    docs/json.md). Never raises for a bad file: what could not be read is in `problems`.

    `runs` groups the attempts by the flower process that made them, oldest first, each with
    its state (RUN_STATES), pid, current attempt and the questions it waits on; `live` says
    whether a run holds the run directory now. `run_id` keeps that run's attempts only.
    """
    problems: list[str] = []
    layout = RunDir(run_dir)
    rows = [
        row
        for row in read_rows(layout.manifest, problems)
        if run_id is None or row.get("run") == run_id
    ]
    attempts = [contract.attempt(row, run_dir) for row in rows]
    try:
        asks = pending_asks(run_dir)
    except StateFileError as exc:
        problems.append(str(exc))
        asks = []
    named = lineage_steps(layout.lineage, problems)
    for row in attempts:
        if row["session_id"]:
            named.setdefault(row["session_id"], [])
            if row["name"] not in named[row["session_id"]]:
                named[row["session_id"]].append(row["name"])
    sessions = [
        {**record, "steps": named.get(record["session_id"], [])}
        for record in read_sessions(layout.sessions, problems)
    ]
    aside = read_rows(layout.aside.manifest, problems)
    live = writer_alive(layout.run_lock)
    document = contract.document(
        "flower status",
        run_dir=str(run_dir.resolve()),
        live=live,
        runs=group_runs(rows, attempts, asks),
        sessions=sessions,
        total_cost_usd=round(sum(row["cost_usd"] for row in attempts), 6),
        aside_cost_usd=round(sum((_number(row.get("cost_usd")) for row in aside), 0.0), 6),
        errors=[
            {"step": row["step"], "name": row["name"], "error": error}
            for row in attempts
            for error in row["errors"]
        ],
        pending_asks=[_ask(a) for a in asks if isinstance(a, dict)],
        workbench=None if workbench is None else _workbench(workbench),
        problems=problems,
        final=not live,
    )
    # In a flowerbox workspace the box wrote these files: no string reaches a terminal raw.
    shown: dict[str, Any] = printable_data(document)
    return shown


def group_runs(
    rows: list[dict[str, Any]], attempts: list[dict[str, Any]], asks: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The attempts grouped by run, each run with its state and what it is doing now."""
    runs: dict[str | None, dict[str, Any]] = {}
    for row, shaped in zip(rows, attempts, strict=True):
        run = runs.setdefault(shaped["run_id"], {"run_id": shaped["run_id"], "steps": []})
        run["steps"].append(shaped)
        pid = row.get("pid")
        run["pid"] = pid if isinstance(pid, int) and not isinstance(pid, bool) else None
        host = row.get("host")
        run["host"] = host if isinstance(host, str) else None
    for run in runs.values():
        steps = run["steps"]
        current = next((s for s in reversed(steps) if s["state"] == RUNNING), None)
        starts = [s["started_at"] for s in steps if s["started_at"]]
        ends = [s["ended_at"] for s in steps if s["ended_at"]]
        run["state"] = run_state(steps, waiting=bool(asks))
        run["waiting_for"] = [str(a.get("id")) for a in asks] if run["state"] == WAITING else []
        run["current"] = current
        run["started_at"] = min(starts) if starts else None
        run["ended_at"] = None if current is not None or not ends else max(ends)
        run["cost_usd"] = round(sum(s["cost_usd"] for s in steps), 6)
    return list(runs.values())  # the manifest's order: a run's rows sit where it first wrote


def _ask(ask: dict[str, Any]) -> dict[str, Any]:
    """A pending question as documents show it: its time in ISO-8601 UTC."""
    asked = ask.get("asked_at")
    return {**ask, "asked_at": iso_utc(asked) if isinstance(asked, int | float) else None}


def run_state(steps: list[dict[str, Any]], *, waiting: bool) -> str:
    """How a run stands, from its attempts: a live one is running (or waiting for a human
    when a question is pending); an ended one was lost (killed mid-attempt), stopped (from
    outside, resumable) or is done (whatever its verdict: `flower analyze` says more)."""
    states = {s["state"] for s in steps}
    if RUNNING in states:
        return WAITING if waiting else RUNNING
    if INTERRUPTED in states:
        return LOST
    if any(s["error"] == AttemptEnd.STOPPED.value for s in steps):
        return STOPPED
    return DONE


def read_rows(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    """The rows of a manifest ([] if it does not exist); a bad file is noted in `problems`."""
    try:
        rows = read_json(path, [])
    except StateFileError as exc:
        problems.append(str(exc))
        return []
    if not isinstance(rows, list):
        problems.append(lang.text("status.rows_ignored", path=path))
        return []
    return [row for row in rows if isinstance(row, dict)]


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


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
        return lang.text("status.db_busy", db=db, problem=exc)
    return lang.text("status.db_unreadable", db=db, problem=exc)


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
        record["last_write"] = iso_utc(record.pop("mtime") / 1000)
    return found


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
    """The tables of `flower status`: one per run, then sessions, cost, questions, in the
    language of the command line (--lang), the step names as display_name shows them."""
    t = lang.text
    parts: list[RenderableType] = [f"[bold]{escape(data['run_dir'])}[/]"]
    parts += [_run_table(run) for run in data["runs"]]
    if not data["runs"]:
        parts.append(f"[dim]{t('status.none_started')}[/]")
    if data["sessions"]:
        sessions = Table(
            t("status.session"),
            t("status.steps"),
            t("status.entries"),
            t("status.subagents"),
            title=t("status.sessions"),
            box=box.SIMPLE_HEAD,
        )
        sessions.add_column(t("status.last_write"), no_wrap=True)
        for s in data["sessions"]:
            sessions.add_row(
                s["session_id"][:8],
                escape(", ".join(display_name(step, beside=True) for step in s["steps"])),
                str(s["entries"]),
                str(s["subagents"]),
                _local(s["last_write"]),
            )
        parts.append(sessions)
    total = t("status.total", cost=f"{data['total_cost_usd']:.4f}")
    if data["aside_cost_usd"]:
        total += t("status.asides", cost=f"{data['aside_cost_usd']:.4f}")
    parts.append(escape(total))
    parts += [
        f"[red]{t('status.error')}[/] {escape(display_name(e['name'], beside=True))}: "
        f"{escape(e['error'])}"
        for e in data["errors"]
    ]
    if data["pending_asks"]:
        asks = Table(
            t("status.id"),
            t("status.question"),
            t("status.options"),
            title=t("status.waiting"),
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
        parts += [asks, f"[dim]{escape(t('status.to_answer', run_dir=quote(data['run_dir'])))}[/]"]
    if data["workbench"]:
        bench = data["workbench"]
        counts = ", ".join(f"{bench[name]} {name}" for name in Workbench.FOLDERS)
        parts.append(escape(t("status.workbench", path=bench["path"], counts=counts)))
    parts += [f"[yellow]{t('status.problem')}[/] {escape(p)}" for p in data["problems"]]
    return Group(*parts)


def _run_table(run: dict[str, Any]) -> Table:
    """One run's attempts, titled with its id, state, pid, cost and current step."""
    t = lang.text
    title = [t("status.run", run_id=run["run_id"] or "?"), t(_STATE_TEXT[run["state"]])]
    if run["state"] in (RUNNING, WAITING) and run["pid"] is not None:
        title.append(t("status.pid", pid=run["pid"]))
    title.append(f"${run['cost_usd']:.4f}")
    if run["current"] is not None:
        now = run["current"]
        name = display_name(now["name"], beside=True)
        title.append(t("status.now", name=name, cost=f"{now['cost_usd']:.4f}"))
    if run["waiting_for"]:
        title.append(t("status.waiting_for", ids=", ".join(run["waiting_for"])))
    table = Table(
        *(t(f"status.{column}") for column in STEP_COLUMNS),
        title=escape(" · ".join(title)),
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for row in run["steps"]:
        flags = [t("status.resumed")] if row["resumed"] else []
        if row["retired"]:
            flags.append(t("status.retired", count=len(row["retired"])))
        table.add_row(
            escape(display_name(row["name"], beside=True))
            + (f" [dim]({escape(', '.join(flags))})[/]" if flags else ""),
            outcome_cell(row),
            str(row["attempts"]),
            f"${row['cost_usd']:.4f}",
            str(row["num_turns"]),
            _when(row),
            escape(str(row["error"] or "")),
        )
    return table


STEP_COLUMNS = ("step", "ok", "attempts", "cost", "turns", "time", "error")
_STATE_TEXT = {
    RUNNING: "status.running",
    WAITING: "status.waiting_human",
    DONE: "status.done",
    STOPPED: "status.stopped",
    LOST: "status.lost",
}


def outcome_cell(row: dict[str, Any]) -> str:
    """The "ok" cell of a step row: yes, no, running, or interrupted (its process is gone)."""
    if row["state"] == "running":
        return f"[yellow]{lang.text('status.running')}[/]"
    if row["state"] == "interrupted":
        return f"[red]{lang.text('status.interrupted')}[/]"
    return (
        f"[green]{lang.text('status.yes')}[/]" if row["ok"] else f"[red]{lang.text('status.no')}[/]"
    )


def _when(row: dict[str, Any]) -> str:
    if row["started_at"] is None:
        return ""
    start = _local(row["started_at"])
    return start if row["duration_s"] is None else f"{start} ({row['duration_s']:.0f} s)"


def _local(moment: str) -> str:
    """An ISO-8601 UTC time as the terminal shows it: local, month to second."""
    parsed = datetime.datetime.fromisoformat(moment.replace("Z", "+00:00"))
    return parsed.astimezone().strftime("%m-%d %H:%M:%S")
