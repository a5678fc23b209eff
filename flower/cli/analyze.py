"""`flower analyze RUN_DIR`: the offline report a user reads after a long run.

Per step (manifest.json) and per session (sessions.db, the raw entries as appended, one
transcript decoded at a time): API calls, tokens, cost, tool calls by tool, denied calls,
synthetic API errors, compactions, each subagent on its own line, and the biggest tool
results. Nothing is written: the database is opened read-only (no trim, no spill, no
migration), so a run may be going on at the same time.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table

from flower.cli import contract
from flower.cli.exits import exit_codes
from flower.cli.status import lineage_steps, outcome_cell, read_only, read_rows, unreadable
from flower.cli.tables import table_console
from flower.core import lang
from flower.core.labels import display_name
from flower.core.rundir import RunDir
from flower.core.statefile import STATE_LIMIT
from flower.core.untrusted import parse_json, printable_data
from flower.errors import RunDirError

LARGEST = 5
TARGET_CHARS = 60
TARGET_FIELDS = (
    "command",
    "file_path",
    "notebook_path",
    "path",
    "pattern",
    "url",
    "query",
    "description",
)
"""The input field that says what a tool call was about, first present wins."""

Stats = dict[str, Any]


def analyze(
    run_dir: Annotated[Path, typer.Argument(help="The run directory to report on.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Report tokens, cost, tool calls, denials, errors and compactions of a finished run."""
    with exit_codes("flower analyze" if as_json else None):
        if not run_dir.is_dir():
            raise RunDirError(run_dir, lang.text("cli.analyze_no_run_dir", path=run_dir))
        layout = RunDir(run_dir)
        if not layout.sessions.is_file() and not layout.manifest.is_file():
            raise RunDirError(
                run_dir,
                lang.text(
                    "cli.analyze_nothing_ran",
                    path=run_dir,
                    sessions=layout.SESSIONS,
                    manifest=layout.MANIFEST,
                ),
            )
        data = report(run_dir)
    if as_json:
        contract.emit(data)
    else:
        table_console().print(render(data))


# -- the data ----------------------------------------------------------------------------


def report(run_dir: Path) -> dict[str, Any]:
    """The whole report as JSON-ready data (see docs/cli-notes.md for its keys).

    Raises:
        RunDirError: a manifest or lineage file does not parse, or sessions.db cannot be
            read (busy past the timeout, or not a sessions database).
    """
    problems: list[str] = []
    layout = RunDir(run_dir)
    steps = read_rows(layout.manifest, problems)
    named = lineage_steps(layout.lineage, problems)
    step_cost: dict[str, float] = {}
    for row in steps:
        if isinstance(row.get("session_id"), str):
            named.setdefault(row["session_id"], [])
            if row.get("step") not in named[row["session_id"]]:
                named[row["session_id"]].append(str(row.get("step")))
            cost = row.get("cost_usd")
            if isinstance(cost, int | float):
                step_cost[row["session_id"]] = step_cost.get(row["session_id"], 0.0) + cost
    if problems:
        raise RunDirError(run_dir, "; ".join(problems))
    sessions: list[Stats] = []
    largest: list[Stats] = []
    db = layout.sessions
    if db.is_file():
        try:
            found = read_transcripts(db)
        except sqlite3.Error as exc:
            raise RunDirError(run_dir, unreadable(db, exc)) from exc
        for session in found:
            sid = session["session_id"]
            # The CLI's own cumulative cost when the transcript has it, else the manifest's.
            if session["cost_usd"] is None and sid in step_cost:
                session["cost_usd"] = round(step_cost[sid], 6)
                session["cost_source"] = "manifest"
            session["steps"] = named.get(sid, [])
            largest += session.pop("results")
            sessions.append(session)
    largest.sort(key=lambda r: r["chars"], reverse=True)
    document = contract.document(
        "flower analyze",
        run_dir=str(run_dir.resolve()),
        steps=[contract.attempt(row, run_dir) for row in steps],
        sessions=sessions,
        totals=_totals(steps, sessions),
        largest_results=largest[:LARGEST],
    )
    # In a flowerbox workspace the box wrote the run dir: no string reaches a terminal raw.
    shown: dict[str, Any] = printable_data(document)
    return shown


def read_transcripts(db: Path) -> list[Stats]:
    """The statistics of every session in `db`, oldest first; one transcript in memory at a
    time (a 10-hour run's database can be far larger than what one report needs)."""
    from flower.stores.recent import decode  # lazy: flower.stores loads the SDK (--help)

    sessions: list[Stats] = []
    with read_only(db) as conn:
        keys = [k for (k,) in conn.execute("SELECT store_key FROM meta ORDER BY mtime")]
        mains = [k for k in keys if k.count("/") == 1]
        for main in mains:
            session: Stats | None = None
            for key in [main, *sorted(k for k in keys if k.startswith(main + "/"))]:
                rows = conn.execute(
                    "SELECT payload FROM entries WHERE store_key = ? ORDER BY seq", (key,)
                ).fetchall()
                entries = _entries([payload for (payload,) in rows], decode)
                project, sid, *sub = key.split("/", 2)
                stats = transcript_stats(entries, session_id=sid)
                if session is None:
                    session = {"session_id": sid, "project_key": project, **stats}
                    session["subagents"] = []
                    continue
                session["results"] += [r | {"subagent": sub[0]} for r in stats.pop("results")]
                session["subagents"].append({"subkey": sub[0], **_agent_of(entries), **stats})
            if session is not None:
                _add_subagents(session)
                sessions.append(session)
    return sessions


def _entries(payloads: list[str], decode: Callable[[list[str]], list[Any]]) -> list[Any]:
    """The payloads decoded by the store's own fast decoder; when one nests too deep for it
    (a RecursionError: in a flowerbox workspace the box writes sessions.db too), each through
    the bounded parser instead, the ones it refuses left out."""
    try:
        return decode(payloads)
    except RecursionError:
        kept = []
        for payload in payloads:
            with contextlib.suppress(ValueError):
                kept.append(parse_json(payload, limit=STATE_LIMIT))
        return kept


def transcript_stats(entries: list[dict[str, Any]], *, session_id: str) -> Stats:
    """Counts for one transcript (main or subagent), `results` holding every tool result's
    size so the caller can pick the largest across the run."""
    # lazy: flower.stores loads the SDK, which `flower --help` must not pay for
    from flower.stores.records import SessionTranscript, usage_of
    from flower.stores.transcript import blocks, is_api_error, is_denial, result_text

    usage = usage_of(SessionTranscript("", session_id, main=entries))
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    tools: Counter[str] = Counter()
    denied: Counter[str] = Counter()
    results: list[Stats] = []
    api_errors = compactions = 0
    for entry in entries:
        kind = entry.get("type")
        if kind == "system" and entry.get("subtype") == "compact_boundary":
            compactions += 1
        if kind == "assistant" and is_api_error(entry):
            api_errors += 1
            continue
        for block in blocks(entry):
            if kind == "assistant" and block.get("type") == "tool_use":
                name = str(block.get("name"))
                tools[name] += 1
                given = block.get("input")
                calls[str(block.get("id"))] = (name, given if isinstance(given, dict) else {})
            elif kind == "user" and block.get("type") == "tool_result":
                name, given = calls.get(str(block.get("tool_use_id")), ("?", {}))
                if is_denial(entry, block, name):
                    denied[name] += 1
                text = result_text(block)
                size = len(text) if text is not None else len(json.dumps(block.get("content")))
                results.append(
                    {
                        "session_id": session_id,
                        "subagent": None,
                        "tool": name,
                        "chars": size,
                        "target": _target(given),
                    }
                )
    return {
        "api_calls": usage.api_calls,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "context_tokens": usage.context_tokens,
        "model": usage.model,
        "cost_usd": usage.cost_usd,
        "cost_source": None if usage.cost_usd is None else "transcript",
        "entries": len(entries),
        "tools": dict(tools.most_common()),
        "denied": dict(denied.most_common()),
        "api_errors": api_errors,
        "compactions": compactions,
        "results": results,
    }


def _target(given: dict[str, Any]) -> str:
    value = next((given[f] for f in TARGET_FIELDS if isinstance(given.get(f), str)), "")
    line = " ".join(str(value).split())
    return line if len(line) <= TARGET_CHARS else line[: TARGET_CHARS - 1] + "…"


def _agent_of(entries: list[dict[str, Any]]) -> Stats:
    """The subagent's type and task, from its agent_metadata entry if the CLI wrote one."""
    meta = next((e for e in entries if e.get("type") == "agent_metadata"), {})
    return {"agent_type": meta.get("agentType"), "description": meta.get("description")}


_SUMMED = (
    "api_calls",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "api_errors",
    "compactions",
)


def _add_subagents(session: Stats) -> None:
    """Fold the subagents' counts into the session's `all` (the session alone stays as is)."""
    everything: Stats = {k: session[k] for k in _SUMMED}
    tools: Counter[str] = Counter(session["tools"])
    denied: Counter[str] = Counter(session["denied"])
    for sub in session["subagents"]:
        for k in _SUMMED:
            everything[k] += sub[k]
        tools.update(sub["tools"])
        denied.update(sub["denied"])
    session["all"] = everything | {
        "tools": dict(tools.most_common()),
        "denied": dict(denied.most_common()),
    }


def _totals(steps: list[dict[str, Any]], sessions: list[Stats]) -> Stats:
    totals: Stats = {k: sum(s["all"][k] for s in sessions) for k in _SUMMED}
    tools: Counter[str] = Counter()
    denied: Counter[str] = Counter()
    for s in sessions:
        tools.update(s["all"]["tools"])
        denied.update(s["all"]["denied"])
    cost = sum(r["cost_usd"] for r in steps if isinstance(r.get("cost_usd"), int | float))
    return totals | {
        "cost_usd": round(cost, 6),
        "tools": dict(tools.most_common()),
        "denied": dict(denied.most_common()),
    }


# -- the view ----------------------------------------------------------------------------


def render(data: dict[str, Any]) -> RenderableType:
    """The tables of `flower analyze`, in the language of the command line (--lang)."""
    t = lang.text
    parts: list[RenderableType] = [f"[bold]{escape(data['run_dir'])}[/]"]
    if data["steps"]:
        columns = ("step", "ok", "attempts", "turns", "cost")
        steps = Table(
            *(t(f"status.{c}") for c in columns),
            t("analyze.session"),
            t("status.error"),
            title=t("analyze.steps"),
            box=box.SIMPLE_HEAD,
        )
        for row in data["steps"]:
            steps.add_row(
                escape(display_name(str(row["name"]), beside=True)),
                outcome_cell(row),
                str(row["attempts"]),
                str(row["num_turns"]),
                _usd(row["cost_usd"]),
                str(row["session_id"] or "")[:8],
                escape(str(row["error"] or "")),
            )
        parts.append(steps)
    counted = ("calls", "in", "out", "cache", "tools", "deny", "err", "cmpct")
    sessions = Table(
        t("analyze.session"),
        *(t(f"analyze.{c}") for c in counted),
        t("status.cost"),
        title=t("analyze.sessions"),
        box=box.SIMPLE_HEAD,
    )
    for s in data["sessions"]:
        named = ", ".join(display_name(step, beside=True) for step in s["steps"])
        label = f"{s['session_id'][:8]} {escape(named)}"
        sessions.add_row(label, *_cells(s), _usd(s["cost_usd"]))
        for sub in s["subagents"]:
            name = sub["agent_type"] or sub["subkey"].rsplit("/", 1)[-1]
            sessions.add_row(f"  └ {escape(str(name))}", *_cells(sub), "")
    none = f"[dim]{escape(t('analyze.no_sessions'))}[/]"
    parts.append(sessions if data["sessions"] else none)
    totals = data["totals"]
    total = t(
        "analyze.total",
        calls=totals["api_calls"],
        tokens_in=f"{totals['input_tokens']:,}",
        tokens_out=f"{totals['output_tokens']:,}",
        cached=f"{totals['cache_read_input_tokens']:,}",
        cost=_usd(totals["cost_usd"]),
        errors=totals["api_errors"],
        compactions=totals["compactions"],
    )
    parts.append(escape(total))
    if totals["tools"]:
        tools = Table(
            t("analyze.tool"),
            t("analyze.calls"),
            t("analyze.denied"),
            title=t("analyze.tool_calls"),
            box=box.SIMPLE_HEAD,
        )
        for name, count in totals["tools"].items():
            tools.add_row(escape(name), str(count), str(totals["denied"].get(name, "")))
        parts.append(tools)
    if data["largest_results"]:
        largest = Table(
            t("analyze.chars"),
            t("analyze.tool"),
            t("analyze.call"),
            t("analyze.session"),
            title=t("analyze.largest"),
            box=box.SIMPLE_HEAD,
        )
        for r in data["largest_results"]:
            largest.add_row(
                f"{r['chars']:,}", escape(r["tool"]), escape(r["target"]), r["session_id"][:8]
            )
        parts.append(largest)
    return Group(*parts)


def _cells(stats: Stats) -> list[str]:
    return [
        str(stats["api_calls"]),
        _k(stats["input_tokens"]),
        _k(stats["output_tokens"]),
        _k(stats["cache_read_input_tokens"]),
        str(sum(stats["tools"].values())),
        str(sum(stats["denied"].values()) or ""),
        str(stats["api_errors"] or ""),
        str(stats["compactions"] or ""),
    ]


def _k(tokens: int) -> str:
    """Tokens as a table shows them: 812, 45.6k, 1.2M."""
    if tokens < 1000:
        return str(tokens)
    if tokens < 1_000_000:
        return f"{tokens / 1000:.1f}k"
    return f"{tokens / 1_000_000:.1f}M"


def _usd(value: float | None) -> str:
    return "" if value is None else f"${value:.4f}"
