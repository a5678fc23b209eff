"""A run's tool calls, each with its step, duration and outcome, for the report's tick lanes.

    calls = tool_calls(lines, bars)     # lines: (time, event) of the events files, in order

A `tool_call` event opens a call (its payload's `id`); the `tool_result` or `denied` event
whose `tool_use_id` names it closes it: `ok`, `error` (the result's is_error) or `denied`
(a guard or the CLI refused it). A call never closed is `open` (still running, or its process
was killed). A call belongs to the step whose attempt was running when it began (the
manifest's rows, `bars`); one outside every attempt is left out. Subagents' calls count too
(`worker`): the coordinator's own are few, its workers do the work.

The events are box-writable input: read by flower.core.timeline (bounded, typed), here each
text cut short again and at most MAX_CALLS calls kept, the latest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["MAX_CALLS", "OUTCOMES", "ToolCall", "tool_calls"]

MAX_CALLS = 3000
NAME_LIMIT = 60
SUMMARY_LIMIT = 120
OUTCOMES = ("ok", "error", "denied", "open")


class Attempt(Protocol):
    """What a call is placed by: a manifest row's lane and times (timeline.Bar)."""

    @property
    def lane(self) -> str: ...
    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...


@dataclass(frozen=True)
class ToolCall:
    """One tool call: `end` None while it is `open`."""

    lane: str
    name: str
    summary: str  # the one-line summary of its input (the event's text)
    start: float
    end: float | None
    outcome: str  # one of OUTCOMES
    worker: bool  # made by a subagent

    @property
    def seconds(self) -> float:
        return 0.0 if self.end is None else max(0.0, self.end - self.start)


def tool_calls(
    lines: Sequence[tuple[float, dict[str, Any]]], bars: Sequence[Attempt]
) -> list[ToolCall]:
    """The last MAX_CALLS calls in `lines` (sorted by time) that began during an attempt."""
    opened = [i for i, (_, event) in enumerate(lines) if event.get("kind") == "tool_call"]
    kept = opened[-MAX_CALLS:]
    calls: dict[int, ToolCall] = {}
    by_id: dict[str, int] = {}
    for index in kept:
        t, event = lines[index]
        lane = _lane(bars, t)
        if lane is None:
            continue
        payload = event["payload"]
        calls[index] = ToolCall(
            lane=lane,
            name=_cut(event.get("tool"), NAME_LIMIT) or "?",
            summary=_cut(event.get("text"), SUMMARY_LIMIT),
            start=t,
            end=None,
            outcome="open",
            worker=bool(payload.get("subagent")),
        )
        ident = payload.get("id")
        if isinstance(ident, str) and ident:
            by_id[ident] = index
    for t, event in lines[kept[0] :] if kept else ():
        kind = event.get("kind")
        if kind not in ("tool_result", "denied"):
            continue
        index = by_id.pop(str(event["payload"].get("tool_use_id")), -1)
        call = calls.get(index)
        if call is None:
            continue
        outcome = "denied" if kind == "denied" else "ok"
        if outcome == "ok" and event["payload"].get("is_error") is True:
            outcome = "error"
        calls[index] = ToolCall(
            call.lane, call.name, call.summary, call.start, max(t, call.start), outcome, call.worker
        )
    return [calls[index] for index in sorted(calls)]


def _lane(bars: Sequence[Attempt], t: float) -> str | None:
    """The lane of the latest attempt that began by `t` and had not ended before it."""
    running = [bar for bar in bars if bar.start <= t <= bar.end]
    return max(running, key=lambda bar: bar.start).lane if running else None


def _cut(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else ""
    text = " ".join(text.split())  # one line
    return text if len(text) <= limit else text[: limit - 1] + "…"
