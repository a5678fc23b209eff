"""A flowerbox run's trace (issue 33, item 2), exported by the host once the run has ended.

The box has no network, so its spans leave from the host, which builds them from two sources
of unequal trust (docs/decisions.md, "Traces of a box"):

- the gateway's request log (host-only records, written by the gateway alone): one model-call
  span per API request it answered, with the tokens it metered and the cost it charged, marked
  `flower.cost.source = gateway`; the steps' and the run's figures are sums of these;
- the box's events file and manifest (box-written, read as hostile input through
  flowerbox.box.untrusted: no link followed, regular files only, bounded; flower.core.trace
  checks every field): they only give the trace its shape (steps, attempts, tool calls,
  retries, questions, verdicts), every time clamped to when the host saw the run going.
  Nothing in them is a figure of the trace.

Configured by the same OTEL_* variables as flower (flower.core.otlp); unset, nothing is read
or imported.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from flower import (
    MeteredCall,
    RunDir,
    build_trace,
    export_trace,
    read_event_lines,
    read_run_rows,
    trace_content_wanted,
    traces_wanted,
)
from flowerbox.box.spec import BoxSpec
from flowerbox.box.untrusted import read_from
from flowerbox.runs import records
from flowerbox.sidecar.redact import Redactor

__all__ = ["send_box_trace"]

TOKENS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def send_box_trace(spec: BoxSpec) -> list[str]:
    """Export the ended run's trace when the OTEL variables ask for one; the lines to tell
    the user (its trace id, or why the receiver did not take it)."""
    if not traces_wanted():
        return []
    run = records.load(spec.state_dir)
    if run is None:
        return []
    start = _epoch(run.meta.get("started")) or 0.0
    window = (start, time.time())
    calls = [call for row in records.requests(run) if (call := _call(row)) is not None]
    lines, rows = _box_files(spec, window)
    redact = Redactor().redact  # the box's texts, when asked for: no key shape leaves
    spans = build_trace(
        spec.run_id, lines, rows, metered=calls, content=trace_content_wanted(), redact=redact
    )
    sent, line = export_trace(spans)
    return [line if sent else f"flowerbox: {line}"]


def _box_files(
    spec: BoxSpec, window: tuple[float, float]
) -> tuple[list[tuple[float, dict[str, Any]]], list[dict[str, Any]]]:
    """The box's events and manifest rows of this run, untrusted: read through
    flowerbox.box.untrusted, every time kept inside `window` (when the host saw it run)."""
    below = spec.run_dir.relative_to(spec.workspace)

    def read(relative: str, limit: int) -> bytes | None:
        return read_from(spec.workspace, below / relative, offset=0, limit=limit)

    first, last = window
    events = RunDir(".").events(spec.run_id).as_posix()
    lines = [line for line in read_event_lines(read, [events]) if first <= line[0] <= last]
    rows = []
    for row in read_run_rows(read, spec.run_id):
        begun = _clamp(row.get("started_at"), first, last)
        ended = _clamp(row.get("ended_at"), begun, last)
        rows.append({**row, "started_at": begun, "ended_at": ended})
    return lines, rows


def _call(row: dict[str, Any]) -> MeteredCall | None:
    """One request the gateway logged, as a metered call (None: not a model call)."""
    end = _epoch(row.get("time"))
    tokens = row.get("tokens")
    if end is None or not isinstance(tokens, dict) or not tokens:
        return None
    ms = row.get("ms")
    took = ms / 1000 if isinstance(ms, int | float) and 0 <= ms < 86_400_000 else 0.0
    cost = row.get("cost_usd")
    status = row.get("status")
    return MeteredCall(
        start=end - took,
        end=end,
        model=str(row.get("model") or ""),
        usage={name: _count(tokens.get(name)) for name in TOKENS},
        cost_usd=float(cost) if isinstance(cost, int | float) and cost >= 0 else 0.0,
        status=status if isinstance(status, int) else None,
    )


def _epoch(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return None


def _clamp(value: Any, low: float, high: float) -> float:
    number = float(value) if isinstance(value, int | float) and value == value else low
    return min(max(number, low), high)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
