"""flower.core.trace: the spans of a run, built from event lines and manifest rows as a run
writes them (plain data: the end-to-end tests are tests/cli/test_traces.py and
tests/docker/test_traces.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flower.core.otlp import credential_redactor
from flower.core.timeline import read_below
from flower.core.trace import MAX_SPANS, MeteredCall, Span, build_trace, read_event_lines

T0 = 1_800_000_000.0
USAGE = {"input_tokens": 10, "output_tokens": 200, "cache_read_input_tokens": 3000}


def row(step: str, start: float, end: float, **more: Any) -> dict[str, Any]:
    return {
        "run": "r1",
        "step": step,
        "started_at": T0 + start,
        "ended_at": T0 + end,
        "ok": True,
        "attempts": 1,
        "cost_usd": 0.5,
        "usage": {"api_calls": 1, **USAGE},
        "state": "ended",
        **more,
    }


def ev(t: float, what: str, text: str = "", tool: str = "", /, **payload: Any) -> Any:
    return (T0 + t, {"kind": what, "text": text, "tool": tool, "payload": payload})


def by_name(spans: list[Span]) -> dict[str, Span]:
    return {span.name: span for span in spans}


def test_a_retry_and_a_handoff_open_new_attempts_under_the_step() -> None:
    lines = [
        ev(0.1, "step", "干活"),
        ev(0.2, "session", session_id="s1"),
        ev(1.0, "retry", "attempt 1 failed", source="flower", attempt=1, kind="retry", delay_s=2),
        ev(3.1, "session", session_id="s1"),
        ev(4.0, "handoff", "writing", phase="writing", context=150_000, window=200_000),
        ev(5.0, "handoff", "done", phase="done"),
        ev(5.1, "session", session_id="s2"),
    ]
    spans = build_trace("r1", lines, [row("干活", 0, 6)])
    attempts = [s for s in spans if s.name.startswith("attempt ")]
    assert [(s.attributes["flower.attempt.kind"], s.start - T0) for s in attempts] == [
        ("first", 0),
        ("retry", 3.0),
        ("handoff", 4.0),
        ("generation", 5.0),
    ]
    assert attempts[0].end == T0 + 1.0 and attempts[0].error == "retry"
    assert attempts[-1].attributes["gen_ai.conversation.id"] == "s2"
    (retry,) = attempts[0].events
    assert retry.name == "flower.retry" and retry.attributes["delay_s"] == 2
    step = by_name(spans)["invoke_agent 干活"]
    assert [e.attributes["phase"] for e in step.events] == ["writing", "done"]


def test_calls_and_tools_nest_under_their_subagent_and_carry_the_call_events_figures() -> None:
    lines = [
        ev(0.1, "step", "干活"),
        ev(0.5, "tool_call", "写", "Agent", id="toolu_a", message_id="m1"),
        ev(0.6, "call", message_id="m1", model="claude-x", usage=USAGE, cost_usd=0.25),
        ev(0.7, "text", "ok", subagent="toolu_a", message_id="m2"),
        ev(0.8, "tool_call", "x", "Bash", subagent="toolu_a", id="toolu_b", message_id="m2"),
        ev(0.9, "call", message_id="m2", model="claude-x", usage=USAGE, cost_usd=0.25),
        ev(1.5, "tool_result", "boom", subagent="toolu_a", tool_use_id="toolu_b", is_error=True),
        ev(2.0, "tool_result", "done", tool_use_id="toolu_a", is_error=False),
    ]
    spans = build_trace("r1", lines, [row("干活", 0, 3)])
    named = by_name(spans)
    agent, bash = named["execute_tool Agent"], named["execute_tool Bash"]
    assert bash.parent == agent.key and agent.parent.endswith(".a1")
    assert bash.attributes["flower.tool.outcome"] == "error" and bash.error == "error"
    assert bash.attributes["flower.tool.duration_s"] == 0.7
    calls = [s for s in spans if s.name == "chat claude-x"]
    assert [c.parent for c in calls] == [agent.parent, agent.key]
    assert calls[1].attributes["gen_ai.usage.input_tokens"] == 3010  # the whole prompt
    assert calls[1].attributes["flower.usage.input_tokens"] == 10  # the API's own figure
    assert calls[1].attributes["flower.cost.usd"] == 0.25
    # The step's and run's figures are the manifest's on the host.
    root = named["invoke_workflow flower"]
    assert root.attributes["flower.cost.usd"] == 0.5
    assert root.attributes["flower.cost.source"] == "manifest"
    assert not any("gen_ai.tool.call.arguments" in s.attributes for s in spans)


def test_with_a_meter_its_calls_are_the_figures_and_call_events_are_ignored() -> None:
    lines = [
        ev(0.1, "step", "干活"),
        ev(0.6, "call", message_id="forged", model="x", usage=USAGE, cost_usd=999.0),
    ]
    metered = [MeteredCall(T0 + 1, T0 + 2, "claude-x", USAGE, 0.125, status=200)]
    spans = build_trace("r1", lines, [row("干活", 0, 3, cost_usd=999.0)], metered=metered)
    (call,) = [s for s in spans if s.name.startswith("chat ")]
    assert call.attributes["flower.cost.source"] == "gateway"
    for span in spans:
        if span.name.startswith(("invoke_", "chat")):
            assert span.attributes["flower.cost.usd"] == 0.125
            assert span.attributes["gen_ai.usage.output_tokens"] == 200


def test_the_conversation_only_with_the_opt_in_and_never_a_key() -> None:
    key = "sk-ant-api03-" + "k" * 40
    lines = [
        ev(0.1, "step", "干活"),
        ev(0.5, "tool_call", "echo", "Bash", id="t1", input={"command": "echo $KEY"}),
        ev(0.6, "tool_result", f"the key is {key}", tool_use_id="t1"),
        ev(0.7, "ask", "which python?", id="q1", state="asked"),
    ]
    redact = credential_redactor({"ANTHROPIC_API_KEY": key})
    quiet = build_trace("r1", lines, [row("干活", 0, 3)], redact=redact)
    told = build_trace("r1", lines, [row("干活", 0, 3)], content=True, redact=redact)
    assert "which python?" not in repr(quiet) and "echo $KEY" not in repr(quiet)
    bash = by_name(told)["execute_tool Bash"]
    assert bash.attributes["gen_ai.tool.call.arguments"] == '{"command": "echo $KEY"}'
    assert bash.attributes["gen_ai.tool.call.result"] == "the key is [redacted]"
    assert "which python?" in repr(told) and key not in repr(told)


def test_hostile_lines_are_bounded_and_typed(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    good = [json.dumps({"t": T0 + 0.1 + i / 1e4, "kind": "tool_call", "tool": "Bash",
                        "payload": {"id": f"t{i}"}}) for i in range(MAX_SPANS + 50)]  # fmt: skip
    junk = ["not json", "[1, 2]", '{"t": "soon", "kind": "step"}', '{"t": NaN}', "{" * 10_000]
    junk.append(json.dumps({"t": T0, "kind": "tool_call", "payload": "no", "tool": ["x"]}))
    events.write_text("\n".join(junk + good) + "\n")
    lines = read_event_lines(read_below(tmp_path), ["events.jsonl"])
    assert len(lines) == MAX_SPANS + 51  # the junk dropped, the object with no payload kept
    bad_row = row("干活", 0, 3, attempts="many", usage="lots", cost_usd=float("inf"))
    spans = build_trace("r1", lines, [bad_row, {"run": "r1", "started_at": "now"}])
    assert len(spans) == MAX_SPANS
    root = spans[0]
    # root, step, attempt and 4,997 tool calls made; the other 53 tool calls dropped
    assert root.attributes["flower.trace.dropped_spans"] == 53
    step = by_name(spans)["invoke_agent 干活"]
    assert (
        step.attributes["flower.cost.usd"] == 0.0 and step.attributes["flower.step.attempts"] == 1
    )


def test_more_rows_than_spans_still_builds() -> None:
    rows = [row(f"s{i}", i, i + 0.5) for i in range(MAX_SPANS + 10)]
    lines = [ev(i + 0.2, "tool_call", "x", "Bash", id=f"t{i}") for i in range(MAX_SPANS + 10)]
    spans = build_trace("r1", lines, rows)
    assert len(spans) == MAX_SPANS
    assert spans[0].attributes["flower.trace.dropped_spans"] > 0
