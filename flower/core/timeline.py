"""A run as a timeline: steps, rounds and attempts, faults, handoffs, waits for a human, and
cost and context over time, read from what the run left in its run directory.

    timeline = read_timeline(Path("runs"), workspace=Path("."))

Sources (flower.core.rundir): manifest.json (one row per step or round: its times, attempts,
cost, context and the judge's text, from which the verdict is read), progress.json (which
processes made up the workspace's run), events/<run id>.jsonl (`--events`: faults, handoffs,
questions, the context level as it rose, the tool calls: flower.core.toolcalls) and
asks.json (questions still open).

Every one of them is box-writable when a flowerbox workspace is read on the host, so they are
read as hostile input: through `read`, which refuses links and anything but a regular file
(the default, `read_below`, walks from the run directory with O_NOFOLLOW; flowerbox passes its
own untrusted reader), in bounded amounts, each value checked for its type, every text cut
short, and at most MAX_BARS bars, MAX_MARKS marks and MAX_POINTS points kept. What could not
be read becomes a line of `problems`, never an exception. Escaping for the page is the
renderer's job (flower.cli.picture); this module only bounds and types.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from flower.core.goal import Verdict
from flower.core.manifest import ENDED, RUNNING
from flower.core.rundir import RunDir
from flower.core.toolcalls import ToolCall, tool_calls
from flower.core.untrusted import parse_json

__all__ = [
    "Bar",
    "Mark",
    "Reader",
    "Timeline",
    "Wait",
    "read_below",
    "read_timeline",
]

MiB = 1024 * 1024
MANIFEST_LIMIT = 16 * MiB
EVENTS_LIMIT = 32 * MiB  # per events file; a longer one is read up to here
SMALL_LIMIT = MiB  # progress.json, asks.json
MAX_BARS = 500  # the latest rows are kept
MAX_MARKS = 2000
MAX_WAITS = 200
MAX_POINTS = 2000
MAX_RUNS = 100
TEXT_LIMIT = 300
LABEL_LIMIT = 120
# A round or retry of a step sits on the step's lane: `干活#round2` is round 2 of `干活`, and
# `干活·判定#2` the judge's second ruling.
_ATTEMPT = re.compile(r"^(?P<step>.+?)#(?:round|retry)?\d+$")
UNFINISHED = "unfinished"
_RUN_ID = re.compile(r"[0-9A-Za-z._-]{1,64}")

Reader = Callable[[str, int], bytes | None]
"""read(relative path below the run directory, limit) -> at most `limit` bytes of the file's
start, or None when it does not exist; an OSError for one it refuses (a link, a FIFO)."""


@dataclass(frozen=True)
class Bar:
    """One manifest row: a step's first run, a round or a retry of it, or a judge's ruling."""

    label: str  # as recorded: 干活, 干活#round2, 干活·判定#1
    lane: str  # the step it belongs to: 干活
    run: str  # the flower process that ran it
    start: float
    end: float
    state: str  # ended, or unfinished (running now, or its process was killed)
    ok: bool
    attempts: int
    cost_usd: float
    context: int
    error: str
    verdict: str  # achieved, not_yet, unreachable, or "" for a row that is no ruling
    reason: str

    @property
    def outcome(self) -> str:
        """One word for the bar's colour and the table: a verdict, unfinished, ok or
        failed."""
        if self.verdict:
            return self.verdict
        if self.state != ENDED:
            return self.state
        return "ok" if self.ok else "failed"


@dataclass(frozen=True)
class Mark:
    """Something that happened at one moment: a fault, a retry, a handoff, a compaction, a
    message from the human."""

    t: float
    kind: str  # fault, retry, handoff, reset, message
    text: str


@dataclass(frozen=True)
class Wait:
    """A question put to the human, from asking to its outcome (`end` None: still open)."""

    id: str
    question: str
    start: float
    end: float | None
    outcome: str  # answered, timeout, declined, over_budget, asked...


@dataclass(frozen=True)
class Timeline:
    """What the report draws; every text bounded, every number a number."""

    workspace: str
    runs: tuple[str, ...]
    bars: tuple[Bar, ...]
    marks: tuple[Mark, ...]
    waits: tuple[Wait, ...]
    cost: tuple[tuple[float, float], ...]  # (time, USD spent so far)
    context: tuple[tuple[float, int], ...]  # (time, tokens in the main session's context)
    window: int  # tokens; 0 when unknown
    problems: tuple[str, ...]
    tools: tuple[ToolCall, ...] = ()  # each step's tool calls, in the order they began

    @property
    def start(self) -> float:
        times = [b.start for b in self.bars] + [w.start for w in self.waits]
        times += [m.t for m in self.marks] + [t for t, _ in self.context]
        return min(times, default=0.0)

    @property
    def end(self) -> float:
        times = [b.end for b in self.bars] + [w.end or w.start for w in self.waits]
        times += [m.t for m in self.marks] + [t for t, _ in self.context]
        return max(times, default=0.0)

    @property
    def total_cost(self) -> float:
        return sum(bar.cost_usd for bar in self.bars)

    @property
    def verdicts(self) -> tuple[Bar, ...]:
        return tuple(bar for bar in self.bars if bar.verdict)

    @property
    def status(self) -> str:
        """How the run stands by its last ruling (or its last row without one)."""
        if self.bars and self.bars[-1].state == UNFINISHED:
            return UNFINISHED
        last = self.verdicts[-1] if self.verdicts else (self.bars[-1] if self.bars else None)
        return "empty" if last is None else last.outcome


def read_below(root: Path) -> Reader:
    """A Reader of files below `root` (the run directory, as the user named it): each folder
    on the way and the file opened without following a link, the file only if regular (a
    FIFO is opened without blocking, then refused), at most `limit` bytes read."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC

    def read(relative: str, limit: int) -> bytes | None:
        *folders, name = PurePosixPath(relative).parts
        try:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            for folder in folders:
                inner = os.open(folder, flags | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = inner
            file = os.open(name, flags | os.O_NONBLOCK, dir_fd=fd)
        except FileNotFoundError:
            return None
        finally:
            os.close(fd)
        with os.fdopen(file, "rb") as handle:
            if not stat.S_ISREG(os.fstat(file).st_mode):
                raise OSError(f"{relative} is not a regular file")
            return handle.read(limit)

    return read


def read_timeline(
    run_dir: Path,
    *,
    workspace: Path | None = None,
    runs: Iterable[str] | None = None,
    events: Iterable[str] = (),
    read: Reader | None = None,
    window: int = 0,
) -> Timeline:
    """The timeline of the run in `run_dir`.

    Which processes make it up: `runs` when given, else those progress.json lists for
    `workspace` (a woken run spans several), else every run in the manifest. Their events
    files are read, plus `events` (paths below `run_dir`: flowerbox names its box runs' files).
    Context fill is measured against the window the handoff events name, else `window`.
    """
    read = read or read_below(run_dir)
    problems: list[str] = []
    rows = _rows(_json(read, RunDir.MANIFEST, MANIFEST_LIMIT, [], problems), problems)
    ws = unicodedata.normalize("NFC", os.path.realpath(workspace or Path.cwd()))
    chosen = list(runs) if runs is not None else _progress_runs(read, ws, problems)
    if not chosen:
        chosen = list(dict.fromkeys(str(row.get("run")) for row in rows))
    chosen = [run for run in chosen if _RUN_ID.fullmatch(run)][-MAX_RUNS:]
    mine = [row for row in rows if row.get("run") in chosen]
    folder = f"{RunDir.EVENTS}/"
    files = [f"{folder}{run}.jsonl" for run in chosen] + [str(path) for path in events]
    lines = [line for name in dict.fromkeys(files) for line in _events(read, name, problems)]
    lines.sort(key=lambda line: line[0])
    bars = _settled([_bar(row) for row in mine][-MAX_BARS:], lines[-1][0] if lines else 0.0)
    marks, waits, context, seen = _from_events(lines)
    waits = _open_asks(read, waits, problems)
    return Timeline(
        workspace=_text(ws, LABEL_LIMIT),
        runs=tuple(chosen),
        bars=tuple(bars),
        marks=tuple(marks[-MAX_MARKS:]),
        waits=tuple(waits[-MAX_WAITS:]),
        cost=tuple(_thin(_cost_over_time(bars))),
        context=tuple(_thin(context)),
        window=seen or window,
        problems=tuple(problems),
        tools=tuple(tool_calls(lines, bars)),
    )


# --- the sources ------------------------------------------------------------------------


def _json(read: Reader, name: str, limit: int, default: Any, problems: list[str]) -> Any:
    try:
        data = read(name, limit + 1)
    except OSError as exc:
        problems.append(f"{name}: not read ({_text(str(exc), TEXT_LIMIT)})")
        return default
    if data is None:
        return default
    if len(data) > limit:
        problems.append(f"{name}: larger than {limit // MiB} MiB, not read")
        return default
    try:
        return parse_json(data, limit=limit)
    except ValueError as exc:
        problems.append(f"{name}: {exc}")
        return default


def _rows(data: Any, problems: list[str]) -> list[dict[str, Any]]:
    if not isinstance(data, list):
        problems.append(f"{RunDir.MANIFEST}: not a list of rows")
        return []
    return [row for row in data if isinstance(row, dict) and isinstance(row.get("run"), str)]


def _progress_runs(read: Reader, workspace: str, problems: list[str]) -> list[str]:
    data = _json(read, RunDir.PROGRESS, SMALL_LIMIT, {}, problems)
    spaces = data.get("workspaces") if isinstance(data, dict) else None
    mine = spaces.get(workspace) if isinstance(spaces, dict) else None
    runs = mine.get("runs") if isinstance(mine, dict) else None
    return [run for run in runs if isinstance(run, str)] if isinstance(runs, list) else []


def _events(read: Reader, name: str, problems: list[str]) -> list[tuple[float, dict[str, Any]]]:
    """(time, event) of each line of an events file that is an object with a time."""
    try:
        data = read(name, EVENTS_LIMIT + 1)
    except OSError as exc:
        problems.append(f"{name}: not read ({_text(str(exc), TEXT_LIMIT)})")
        return []
    if data is None:
        return []
    if len(data) > EVENTS_LIMIT:
        problems.append(f"{name}: only its first {EVENTS_LIMIT // MiB} MiB read")
        data = data[: data.rfind(b"\n", 0, EVENTS_LIMIT) + 1]
    out = []
    for line in data.splitlines():
        try:
            event = parse_json(line, limit=EVENTS_LIMIT)
        except ValueError:
            continue
        if isinstance(event, dict) and _number(event.get("t")) is not None:
            payload = event.get("payload")
            event["payload"] = payload if isinstance(payload, dict) else {}
            out.append((float(event["t"]), event))
    return out


def _open_asks(read: Reader, waits: list[Wait], problems: list[str]) -> list[Wait]:
    """`waits` plus the questions asks.json still holds that no event opened."""
    data = _json(read, RunDir.ASKS, SMALL_LIMIT, [], problems)
    known = {wait.id for wait in waits}
    for ask in data if isinstance(data, list) else []:
        if not isinstance(ask, dict) or not isinstance(ask.get("id"), str):
            continue
        start = _number(ask.get("asked_at"))
        if start is None or ask["id"] in known:
            continue
        question = _text(ask.get("question"), TEXT_LIMIT)
        waits.append(Wait(_text(ask["id"], 40), question, start, None, "asked"))
    return waits


# --- turning them into the picture's parts ------------------------------------------------


def _bar(row: dict[str, Any]) -> Bar:
    label = _text(row.get("step"), LABEL_LIMIT)
    found = _ATTEMPT.match(label)
    start = _number(row.get("started_at")) or 0.0
    end = _number(row.get("ended_at")) or 0.0
    # A running row is not probed for its writer's lock (a planted FIFO there would hang
    # the reader): it is unfinished, running now or killed.
    state = UNFINISHED if row.get("state") == RUNNING else ENDED
    verdict = Verdict.parse(str(row.get("text") or "")[:4000])
    ruled = verdict.complete() and bool(verdict.state)
    return Bar(
        label=label,
        lane=found["step"] if found else label,
        run=_text(row.get("run"), 64),
        start=start,
        end=max(end, start),
        state=state,
        ok=row.get("ok") is True,
        attempts=int(_number(row.get("attempts")) or 1),
        cost_usd=max(0.0, _number(row.get("cost_usd")) or 0.0),
        context=max(0, int(_number(row.get("context")) or 0)),
        error=_text(row.get("error"), TEXT_LIMIT),
        verdict=verdict.state if ruled else "",
        reason=_text(verdict.reason, TEXT_LIMIT) if ruled else "",
    )


def _settled(bars: list[Bar], last_event: float) -> list[Bar]:
    """`bars` with each unfinished one ending where its process was last heard of: when a
    later process took the run over (a killed run, continued), else at the last event."""
    out = []
    for bar in bars:
        if bar.state == UNFINISHED:
            later = [b.start for b in bars if b.run != bar.run and b.start > bar.start]
            bar = replace(bar, end=max(bar.start, min(later) if later else last_event))
        out.append(bar)
    return out


def _from_events(
    lines: list[tuple[float, dict[str, Any]]],
) -> tuple[list[Mark], list[Wait], list[tuple[float, int]], int]:
    marks: list[Mark] = []
    opened: dict[str, Wait] = {}
    waits: list[Wait] = []
    context: list[tuple[float, int]] = []
    window = 0
    for t, event in lines:
        kind, payload = event.get("kind"), event["payload"]
        text = _text(event.get("text"), TEXT_LIMIT)
        sub = bool(payload.get("subagent"))
        level = _number(payload.get("context"))
        if kind in ("text", "thinking", "tool_call") and not sub and level:
            context.append((t, int(level)))
        match kind:
            case "retry":
                marks.append(Mark(t, "retry", text))
            case "error" if not sub:
                marks.append(Mark(t, "fault", text))
            case "handoff":
                window = int(_number(payload.get("window")) or window)
                marks.append(Mark(t, "handoff", text))
            case "reset":
                marks.append(Mark(t, "reset", text))
                context.append((t, int(_number(payload.get("post_tokens")) or 0)))
            case "ask" if payload.get("kind") == "mail":
                marks.append(Mark(t, "message", text))
            case "ask":
                _ask(t, text, payload, opened, waits)
    waits.extend(opened.values())
    waits.sort(key=lambda wait: wait.start)
    return marks, waits, context, max(0, window)


def _ask(
    t: float, text: str, payload: dict[str, Any], opened: dict[str, Wait], waits: list[Wait]
) -> None:
    ident, state = _text(payload.get("id"), 40), _text(payload.get("state"), 40)
    if state == "asked":
        opened[ident] = Wait(ident, text, t, None, "asked")
        return
    was = opened.pop(ident, None)
    waited = _number(payload.get("waited_s")) or 0.0
    start = was.start if was is not None else t - max(0.0, waited)
    waits.append(Wait(ident, was.question if was else text, start, t, state or "closed"))


def _cost_over_time(bars: list[Bar]) -> list[tuple[float, float]]:
    """USD spent so far, stepping up at the end of each bar (the manifest's figures)."""
    if not bars:
        return []
    points = [(min(bar.start for bar in bars), 0.0)]
    spent = 0.0
    for bar in sorted(bars, key=lambda b: b.end):
        spent += bar.cost_usd
        points.append((bar.end, spent))
    return points


def _thin(points: list[Any]) -> list[Any]:
    """At most MAX_POINTS of `points`, evenly taken, the last one always kept."""
    if len(points) <= MAX_POINTS:
        return points
    step = len(points) / MAX_POINTS
    return [points[int(i * step)] for i in range(MAX_POINTS - 1)] + [points[-1]]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if number == number and abs(number) < 1e15 else None  # no NaN, no inf


def _text(value: Any, limit: int) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
