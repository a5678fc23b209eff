"""Tool calls paired from the events (flower.core.toolcalls): by id, into the step that was
running, bounded and typed however the (box-writable) events file is made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flower.core.toolcalls import MAX_CALLS, tool_calls


@dataclass(frozen=True)
class Row:
    lane: str
    start: float
    end: float


def call(t: float, ident: Any, tool: Any = "Bash", **payload: Any) -> tuple[float, dict[str, Any]]:
    return t, {
        "kind": "tool_call",
        "tool": tool,
        "text": "ls\n-la",
        "payload": {"id": ident, **payload},
    }


def result(
    t: float, ident: Any, kind: str = "tool_result", **payload: Any
) -> tuple[float, dict[str, Any]]:
    return t, {"kind": kind, "payload": {"tool_use_id": ident, **payload}}


BARS = [Row("干活", 10.0, 20.0), Row("干活·判定", 20.5, 30.0)]


def test_each_call_is_paired_by_id_and_placed_in_the_step_running_then() -> None:
    lines = [
        call(11.0, "a", subagent="toolu_agent"),
        call(12.0, "b", tool="Write"),
        result(12.5, "a"),
        call(13.0, "c"),
        result(13.2, "b", is_error=True),
        result(14.0, "c", kind="denied"),
        call(15.0, "d"),  # never answered: the process was killed
        call(21.0, "e", tool="Read"),
        result(22.0, "e"),
        call(40.0, "f"),  # after every attempt: no step's
        result(16.0, "nobody"),  # a result of no call
    ]
    lines.sort(key=lambda line: line[0])
    calls = tool_calls(lines, BARS)
    got = [(c.lane, c.name, c.outcome, round(c.seconds, 1), c.worker) for c in calls]
    assert got == [
        ("干活", "Bash", "ok", 1.5, True),
        ("干活", "Write", "error", 1.2, False),
        ("干活", "Bash", "denied", 1.0, False),
        ("干活", "Bash", "open", 0.0, False),
        ("干活·判定", "Read", "ok", 1.0, False),
    ]
    assert calls[0].summary == "ls -la"  # one line
    assert calls[3].end is None


def test_hostile_events_are_bounded_and_typed() -> None:
    many = [call(10.0 + i / 10**5, f"id{i}") for i in range(MAX_CALLS + 500)]
    odd = [
        call(19.0, None, tool=["not", "a", "name"]),  # no id: stays open, its name "?"
        call(19.1, {"x": 1}, tool="x" * 10_000),
        result(19.2, {"x": 1}),  # an id that is no string pairs nothing
    ]
    calls = tool_calls([*many, *odd], BARS)
    assert len(calls) == MAX_CALLS  # the latest kept
    assert calls[-2].name == "?" and calls[-2].outcome == "open"
    assert len(calls[-1].name) == 60 and calls[-1].outcome == "open"
