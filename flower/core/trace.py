"""A run as a trace: spans for the run, each step, each attempt, each model call and each tool
call, with events for retries, handoffs, human waits and verdicts, built from what the run
wrote (its events file and its manifest rows) and from a meter's calls. No OpenTelemetry
here: these are plain spans, which flower.core.otlp exports.

    spans = build_trace(run_id, read_event_lines(read, [events]), read_run_rows(read, run_id))

    flower run                      invoke_workflow   run id, cost and tokens of the run
    └─ step 干活                     invoke_agent      a manifest row: ok, attempts, cost, tokens
       └─ attempt 1                                    a CLI session; faults, retries
          ├─ chat claude-…           chat              one API call: model, tokens, exact cost
          ├─ execute_tool Write      execute_tool      name, duration, outcome
          └─ execute_tool Agent                        a subagent: its calls and tools inside

Who metered the calls is said on every figure (`flower.cost.source`): flower's own "call"
events and manifest on the host, the gateway's ledger for a flowerbox run, where nothing the
box wrote is a figure (the box's rows and events only place the calls in time).

The events and rows may be box-written (flowerbox reads them from the workspace): every field
is checked for its type, every text cut short, at most MAX_SPANS spans made. Texts of the
conversation (the model's words, tool arguments and results, questions) are carried only with
`content=True` (the convention's opt-in, flower.core.otlp), and always through `redact`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flower.core.goal import Verdict
from flower.core.rundir import RunDir
from flower.core.timeline import EVENTS_LIMIT, MANIFEST_LIMIT, MiB, Reader
from flower.core.untrusted import parse_json

__all__ = [
    "MeteredCall",
    "Span",
    "SpanEvent",
    "build_trace",
    "gen_ai_usage",
    "read_event_lines",
    "read_run_rows",
]

Attr = str | int | float | bool
MAX_SPANS = 5000
SLACK = 0.5  # seconds: how far from a step's times an event may be and still be the step's
MAX_EVENTS = 200  # per span
TEXT_LIMIT = 300
CONTENT_LIMIT = 4096
PROVIDER = "anthropic"
TOKENS = {  # the manifest's and the API's names -> the convention's
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_input_tokens": "cache_read.input_tokens",
    "cache_creation_input_tokens": "cache_creation.input_tokens",
}


@dataclass(frozen=True)
class SpanEvent:
    name: str
    t: float
    attributes: dict[str, Attr] = field(default_factory=dict)


@dataclass
class Span:
    """One span as it will be exported; `parent` is another span's `key` (None: the root)."""

    key: str
    parent: str | None
    name: str
    start: float
    end: float
    attributes: dict[str, Attr] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None  # the span's status: None is ok
    client: bool = False  # a call to a server (the model): span kind CLIENT, else INTERNAL

    def add(self, name: str, t: float, **attributes: Attr | None) -> None:
        if len(self.events) < MAX_EVENTS:
            kept = {k: v for k, v in attributes.items() if v is not None and v != ""}
            self.events.append(SpanEvent(name, t, kept))


@dataclass(frozen=True)
class MeteredCall:
    """One metered API call: when it ran, the model, its tokens (the API's names) and cost."""

    start: float
    end: float
    model: str
    usage: Mapping[str, int]
    cost_usd: float
    message_id: str = ""
    status: int | None = None


def gen_ai_usage(usage: Mapping[str, Any]) -> dict[str, Attr]:
    """The API's token counts as the convention's attributes: `input_tokens` counts the
    whole prompt (the convention's meaning; Anthropic's own figure leaves out the cache)."""
    counts = {name: _count(usage.get(name)) for name in TOKENS}
    attrs: dict[str, Attr] = {f"gen_ai.usage.{TOKENS[name]}": n for name, n in counts.items()}
    attrs["flower.usage.input_tokens"] = counts["input_tokens"]  # the API's: without the cache
    attrs["gen_ai.usage.input_tokens"] = (
        counts["input_tokens"]
        + counts["cache_read_input_tokens"]
        + counts["cache_creation_input_tokens"]
    )
    return attrs


def build_trace(
    run_id: str,
    lines: list[tuple[float, dict[str, Any]]],
    rows: list[dict[str, Any]],
    *,
    metered: list[MeteredCall] | None = None,
    content: bool = False,
    redact: Callable[[str], str] | None = None,
) -> list[Span]:
    """The spans of run `run_id` (root first). `lines` are (time, event object) of its events
    file, `rows` its manifest rows; `metered` the gateway's calls (None: the "call" events
    are the calls and the rows' figures are the steps')."""
    unchanged = redact or (lambda text: text)
    return _Builder(run_id, content=content, redact=unchanged).build(lines, rows, metered)


class _Builder:
    def __init__(self, run_id: str, *, content: bool, redact: Callable[[str], str]) -> None:
        self.run_id = run_id
        self.content = content
        self.redact = redact
        self.spans: dict[str, Span] = {}
        self.rows: dict[str, dict[str, Any]] = {}  # a step's key -> its manifest row
        self.steps: list[Span] = []
        self.attempts: dict[str, list[Span]] = {}  # a step's key -> its attempts
        self.dropped = 0

    # --- the skeleton: run, steps, attempts ---------------------------------------------

    def build(
        self,
        lines: list[tuple[float, dict[str, Any]]],
        rows: list[dict[str, Any]],
        metered: list[MeteredCall] | None,
    ) -> list[Span]:
        lines = sorted(lines, key=lambda line: line[0])
        rows = sorted((r for r in rows if _num(r.get("started_at"))), key=_row_start)
        times = [t for t, _ in lines] + [_row_start(r) for r in rows]
        times += [_num(r.get("ended_at")) or 0.0 for r in rows]
        times += [c.end for c in metered or []]
        start, end = min(times, default=0.0), max(times, default=0.0)
        root = self._span("run", None, "invoke_workflow flower", start, end)
        assert root is not None  # the first span is never dropped
        root.attributes.update(
            {
                "gen_ai.operation.name": "invoke_workflow",
                "gen_ai.workflow.name": "flower",
                "gen_ai.provider.name": PROVIDER,
                "flower.run.id": self.run_id,
            }
        )
        steps = [self._step(i, row, end) for i, row in enumerate(rows)]
        self.steps = [s for s in steps if s is not None]
        self.attempts = {s.key: [] for s in self.steps}
        self._events(lines, metered is None)
        for call in metered or []:
            self._call(call, self._container(call.start, None), source="gateway")
        self._figures(root, gateway=metered is not None)
        if self.dropped:
            root.attributes["flower.trace.dropped_spans"] = self.dropped
        return list(self.spans.values())

    def _span(
        self, key: str, parent: str | None, name: str, start: float, end: float
    ) -> Span | None:
        if len(self.spans) >= MAX_SPANS:
            self.dropped += 1
            return None
        span = Span(key, parent, name[:TEXT_LIMIT], start, max(start, end))
        self.spans[key] = span
        return span

    def _step(self, index: int, row: dict[str, Any], last: float) -> Span | None:
        label = _text(row.get("step")) or f"step {index + 1}"
        start = _row_start(row)
        end = _num(row.get("ended_at")) or last
        span = self._span(f"step{index}", "run", f"invoke_agent {label}", start, end)
        if span is None:
            return None
        running = row.get("state") == "running"
        span.attributes.update(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": label,
                "gen_ai.provider.name": PROVIDER,
                "flower.step.attempts": int(_num(row.get("attempts")) or 1),
                "flower.step.state": "unfinished" if running else "ended",
                "flower.run.id": _text(row.get("run")),
            }
        )
        if isinstance(row.get("session_id"), str):
            span.attributes["gen_ai.conversation.id"] = _text(row["session_id"])
        if row.get("ok") is not True and not running:
            span.error = _text(row.get("error")) or "failed"
            span.attributes["error.type"] = "step_failed"
        verdict = Verdict.parse(str(row.get("text") or "")[:4000])
        if verdict.complete() and verdict.state:
            span.attributes["flower.verdict"] = verdict.state
            reason = self._said(verdict.reason) if self.content else None
            span.add("flower.verdict", span.end, **{"flower.verdict": verdict.state}, reason=reason)
        self.rows[span.key] = row
        return span

    def _attempt(self, step: Span, start: float, kind: str) -> Span | None:
        attempts = self.attempts[step.key]
        number = len(attempts) + 1
        if attempts:
            attempts[-1].end = max(attempts[-1].start, min(attempts[-1].end, start))
        span = self._span(f"{step.key}.a{number}", step.key, f"attempt {number}", start, step.end)
        if span is not None:
            span.attributes.update({"flower.attempt.number": number, "flower.attempt.kind": kind})
            attempts.append(span)
        return span

    def _step_at(self, t: float) -> Span | None:
        """The step under way at `t`: the one whose times hold it, else the nearest within
        SLACK (a step's event is written just before its row opens, times are in ms)."""
        inside = [step for step in self.steps if step.start <= t <= step.end]
        if inside:
            return inside[-1]
        near = [(min(abs(t - s.start), abs(t - s.end)), i) for i, s in enumerate(self.steps)]
        gap, index = min(near, default=(SLACK, -1))
        return self.steps[index] if gap < SLACK else None

    def _attempt_at(self, t: float) -> Span | None:
        step = self._step_at(t)
        if step is None:
            return None
        if not self.attempts[step.key]:
            self._attempt(step, step.start, "first")
        attempts = self.attempts[step.key]  # empty only when MAX_SPANS is reached
        inside = [a for a in attempts if a.start - SLACK <= t]
        return inside[-1] if inside else attempts[0] if attempts else None

    def _container(self, t: float, thread: str | None) -> str:
        """The span a call or tool call at `t` belongs under: the subagent's Agent call for
        its thread, else the attempt (or step, or run) under way."""
        if thread and f"tool:{thread}" in self.spans:
            return f"tool:{thread}"
        attempt = self._attempt_at(t)
        if attempt is not None:
            return attempt.key
        step = self._step_at(t)
        return step.key if step is not None else "run"

    # --- what happened: the events -------------------------------------------------------

    def _events(self, lines: list[tuple[float, dict[str, Any]]], calls: bool) -> None:
        last: dict[str | None, float] = {}  # per thread: when it was last heard of
        opened: dict[str, tuple[float, str | None]] = {}  # message id -> (start, thread)
        closed: dict[str, float] = {}  # message id -> its last block
        said: dict[str, list[str]] = {}  # message id -> the model's words
        for t, event in lines:
            kind, payload = event.get("kind"), event["payload"]
            thread = payload.get("subagent") if isinstance(payload.get("subagent"), str) else None
            message = payload.get("message_id")
            if kind in ("text", "thinking", "tool_call") and isinstance(message, str):
                opened.setdefault(message, (last.get(thread, t), thread))
                closed[message] = t
                if kind == "text":
                    said.setdefault(message, []).append(_text(event.get("text"), CONTENT_LIMIT))
            match kind:
                case "step":
                    step = self._step_at(t)
                    if step is not None and not self.attempts[step.key]:
                        self._attempt(step, step.start, "first")
                case "session":
                    attempt = self._attempt_at(t)
                    if attempt is not None and isinstance(payload.get("session_id"), str):
                        attempt.attributes["gen_ai.conversation.id"] = _text(payload["session_id"])
                case "tool_call":
                    self._tool_call(t, event, payload, thread)
                case "tool_result" | "denied":
                    self._tool_end(t, event, payload, denied=kind == "denied")
                case "call" if calls:
                    self._flower_call(t, payload, opened, closed, said)
                case "retry" | "handoff" | "error" | "reset" | "ask":
                    self._mark(t, kind, event, payload, thread)
            last[thread] = t

    def _tool_call(
        self, t: float, event: dict[str, Any], payload: dict[str, Any], thread: str | None
    ) -> None:
        ident, tool = payload.get("id"), _text(event.get("tool")) or "tool"
        if not isinstance(ident, str) or f"tool:{ident}" in self.spans:
            return
        span = self._span(f"tool:{ident}", self._container(t, thread), f"execute_tool {tool}", t, t)
        if span is None:
            return
        span.attributes.update(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": _text(ident),
                "flower.tool.outcome": "unfinished",
            }
        )
        if self.content and isinstance(payload.get("input"), dict):
            arguments = json.dumps(payload["input"], ensure_ascii=False, default=str)
            span.attributes["gen_ai.tool.call.arguments"] = self._said(arguments)
        step = self._step_at(t)
        span.end = step.end if step is not None else t

    def _tool_end(
        self, t: float, event: dict[str, Any], payload: dict[str, Any], *, denied: bool
    ) -> None:
        span = self.spans.get(f"tool:{payload.get('tool_use_id')}")
        if span is None or span.attributes.get("flower.tool.outcome") != "unfinished":
            return
        span.end = max(span.start, t)
        outcome = "denied" if denied else "error" if payload.get("is_error") is True else "ok"
        span.attributes["flower.tool.outcome"] = outcome
        span.attributes["flower.tool.duration_s"] = round(span.end - span.start, 3)
        if outcome != "ok":
            span.error = outcome
            span.attributes["error.type"] = f"tool_{outcome}"
        if self.content:
            span.attributes["gen_ai.tool.call.result"] = self._said(str(event.get("text", "")))

    def _flower_call(
        self,
        t: float,
        payload: dict[str, Any],
        opened: dict[str, tuple[float, str | None]],
        closed: dict[str, float],
        said: dict[str, list[str]],
    ) -> None:
        message = payload.get("message_id")
        if not isinstance(message, str):
            return
        start, thread = opened.get(message, (t, None))
        usage = payload.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        call = MeteredCall(
            start=start,
            end=closed.get(message, t),
            model=_text(payload.get("model")),
            usage={name: _count(usage.get(name)) for name in TOKENS},
            cost_usd=max(0.0, _num(payload.get("cost_usd")) or 0.0),
            message_id=message,
        )
        span = self._call(call, self._container(start, thread), source="flower")
        if span is not None and self.content and said.get(message):
            parts = [{"type": "text", "content": text} for text in said[message]]
            output = [{"role": "assistant", "parts": parts}]
            span.attributes["gen_ai.output.messages"] = self._said(json.dumps(output))

    def _call(self, call: MeteredCall, parent: str, *, source: str) -> Span | None:
        key = f"call:{call.message_id}" if call.message_id else f"call#{len(self.spans)}"
        if key in self.spans:  # the same response again (its usage changed): the newest wins
            self.spans.pop(key)
        span = self._span(key, parent, f"chat {call.model}", call.start, call.end)
        if span is None:
            return None
        span.client = True
        span.attributes.update(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": PROVIDER,
                "gen_ai.system": PROVIDER,
                "gen_ai.request.model": call.model,
                "gen_ai.response.model": call.model,
                **gen_ai_usage(call.usage),
                "flower.cost.usd": round(call.cost_usd, 9),
                "flower.cost.source": source,
            }
        )
        if call.message_id:
            span.attributes["gen_ai.response.id"] = call.message_id
        if call.status is not None:
            span.attributes["http.response.status_code"] = call.status
            if call.status >= 400:
                span.error = f"HTTP {call.status}"
                span.attributes["error.type"] = str(call.status)
        return span

    def _mark(
        self,
        t: float,
        kind: str,
        event: dict[str, Any],
        payload: dict[str, Any],
        thread: str | None,
    ) -> None:
        step = self._step_at(t)
        attempt = self._attempt_at(t)
        holder = self.spans.get(self._container(t, thread)) or self.spans["run"]
        text = _text(event.get("text"))
        match kind:
            case "retry":
                holder.add(
                    "flower.retry",
                    t,
                    source=_text(payload.get("source")),
                    attempt=_int(payload.get("attempt")),
                    status=_int(payload.get("status")),
                    kind=_text(payload.get("kind")),
                    delay_s=_num(payload.get("delay_s")),
                    message=text,
                )
                if payload.get("source") == "flower" and step is not None:
                    if attempt is not None:  # it failed here; the next starts after the wait
                        attempt.error = _text(payload.get("kind")) or "failed"
                        attempt.attributes["error.type"] = attempt.error
                        attempt.end = max(attempt.start, t)
                    self._attempt(step, t + max(0.0, _num(payload.get("delay_s")) or 0.0), "retry")
            case "handoff":
                phase = _text(payload.get("phase"))
                (step or holder).add(
                    "flower.handoff",
                    t,
                    phase=phase,
                    context=_int(payload.get("context")),
                    window=_int(payload.get("window")),
                )
                if step is not None and phase in ("writing", "done"):
                    self._attempt(step, t, "handoff" if phase == "writing" else "generation")
            case "error" if not thread:
                holder.add("flower.fault", t, message=text)
            case "reset":
                holder.add("flower.compaction", t, trigger=_text(payload.get("trigger")))
            case "ask":
                words = self._said(text) if self.content else None
                (step or self.spans["run"]).add(
                    "flower.human.message" if payload.get("kind") == "mail" else "flower.human",
                    t,
                    id=_text(payload.get("id")),
                    state=_text(payload.get("state")),
                    waited_s=_num(payload.get("waited_s")),
                    text=words,
                )

    # --- the figures ----------------------------------------------------------------------

    def _figures(self, root: Span, *, gateway: bool) -> None:
        """Cost and tokens of the steps and the run: the manifest's rows on the host; the sums
        of the gateway's calls under each for a flowerbox run (the rows are the box's)."""
        source = "gateway" if gateway else "manifest"
        calls = [
            s for s in self.spans.values() if s.attributes.get("gen_ai.operation.name") == "chat"
        ]
        for step in self.steps:
            row = self.rows[step.key]
            got = row.get("usage")
            if gateway:
                mine = [c for c in calls if self._under(c, step.key)]
                usage = {n: sum(_count(c.attributes.get(_raw(n))) for c in mine) for n in TOKENS}
                cost = sum(_num(c.attributes.get("flower.cost.usd")) or 0.0 for c in mine)
            else:
                got = got if isinstance(got, dict) else {}
                usage = {name: _count(got.get(name)) for name in TOKENS}
                cost = max(0.0, _num(row.get("cost_usd")) or 0.0)
            step.attributes.update(gen_ai_usage(usage))
            step.attributes.update(
                {"flower.cost.usd": round(cost, 9), "flower.cost.source": source}
            )
        holders = calls if gateway else self.steps
        total = {n: sum(_count(h.attributes.get(_raw(n))) for h in holders) for n in TOKENS}
        root.attributes.update(gen_ai_usage(total))
        cost = sum(_num(h.attributes.get("flower.cost.usd")) or 0.0 for h in holders)
        root.attributes.update({"flower.cost.usd": round(cost, 9), "flower.cost.source": source})
        root.attributes["flower.api_calls"] = len(calls)

    def _under(self, span: Span, key: str) -> bool:
        parent = span.parent
        while parent is not None:
            if parent == key:
                return True
            parent = self.spans[parent].parent if parent in self.spans else None
        return False

    def _said(self, text: str) -> str:
        return self.redact(text)[:CONTENT_LIMIT]


# --- reading a run's files ---------------------------------------------------------------


def read_run_rows(read: Reader, run_id: str) -> list[dict[str, Any]]:
    """Run `run_id`'s rows of the manifest below `read` (flower.core.timeline's Reader: no
    link followed, regular files only), bounded; none when it cannot be read."""
    data = _bounded(read, RunDir.MANIFEST, MANIFEST_LIMIT)
    try:
        rows = parse_json(data, limit=MANIFEST_LIMIT) if data else []
    except ValueError:
        return []
    if not isinstance(rows, list):
        return []
    return [row for row in rows if isinstance(row, dict) and row.get("run") == run_id]


def read_event_lines(read: Reader, names: Iterable[str]) -> list[tuple[float, dict[str, Any]]]:
    """(time, event object) of every line of the events files `names` below `read` that is
    an object with a time, each file read up to EVENTS_LIMIT."""
    lines: list[tuple[float, dict[str, Any]]] = []
    for name in dict.fromkeys(names):
        for line in (_bounded(read, name, EVENTS_LIMIT) or b"").splitlines():
            try:
                event = parse_json(line, limit=MiB)
            except ValueError:
                continue
            t = _num(event.get("t")) if isinstance(event, dict) else None
            if t is None or not isinstance(event, dict):
                continue
            payload = event.get("payload")
            event["payload"] = payload if isinstance(payload, dict) else {}
            lines.append((t, event))
    return lines


def _bounded(read: Reader, name: str, limit: int) -> bytes | None:
    try:
        data = read(name, limit + 1)
    except OSError:
        return None
    if data is not None and len(data) > limit:  # cut at its last whole line
        data = data[: data.rfind(b"\n", 0, limit) + 1]
    return data


def _is_call(span: Span) -> bool:
    return span.attributes.get("gen_ai.operation.name") == "chat"


def _raw(name: str) -> str:
    return f"gen_ai.usage.{TOKENS[name]}" if name != "input_tokens" else "flower.usage.input_tokens"


def _row_start(row: dict[str, Any]) -> float:
    return _num(row.get("started_at")) or 0.0


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if number == number and abs(number) < 1e15 else None


def _int(value: Any) -> int | None:
    number = _num(value)
    return int(number) if number is not None else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _text(value: Any, limit: int = TEXT_LIMIT) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
