"""Render's status line: what a user reads at a glance, live on a terminal and as plain
lines elsewhere (Render is a pure consumer of Events; the real run is tests/cli/test_cost.py)."""

from __future__ import annotations

import asyncio
import io
import time

import pytest
from rich.console import Console

from flower.cli.render import Render
from flower.core.events import Event

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def english(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read the English line (the suite's default is zh); the zh one has its own."""
    monkeypatch.setenv("FLOWER_LANG", "en")


def console(*, terminal: bool) -> Console:
    return Console(file=io.StringIO(), force_terminal=terminal, width=200, highlight=False)


def a_round_two(render: Render) -> None:
    """The events of a judged step's second round, a question waiting."""
    render(Event("step", "干活", payload={"index": 2, "total": 3, "round": 2, "rounds": 3}))
    render(Event("session", "session s", payload={"session_id": "s", "window": 200_000}))
    render(Event("text", "working", payload={"context": 50_000}))
    render(Event("text", "a worker", payload={"context": 190_000, "subagent": "toolu_1"}))
    render(Event("result", "done", payload={"run_cost_usd": 1.9362, "cost_usd": 0.41}))
    render(Event("ask", "which?", payload={"id": "q1", "state": "asked", "options": ["a"]}))


def test_the_status_line_has_step_round_time_cost_context_and_who_waits() -> None:
    render = Render(console(terminal=False))
    render.started = time.monotonic() - 65
    a_round_two(render)
    assert render.status_line() == (
        "· work 3/3 · round 2/3 · 00:01:05 · $1.9362 · context 25% · waiting for you: q1"
    )  # the run's cost (not the session's cost_usd), the main thread's context
    render(Event("ask", "which?", payload={"id": "q1", "state": "answered", "answer": "a"}))
    render(Event("text", "little", payload={"context": 4_000}))
    assert render.status_line().endswith("· context 2.0%")  # no question waits; a tenth shown


def test_a_step_of_one_attempt_has_no_round_and_an_unknown_window_shows_tokens() -> None:
    render = Render(console(terminal=False))
    render(Event("step", "确认需求", payload={"index": 0, "total": 3}))
    render(Event("text", "asking", payload={"context": 52_000}))
    line = render.status_line()
    assert line.startswith("· clarify 1/3 · ") and "round" not in line
    assert line.endswith("· $0.0000 · context 52k")


def test_off_a_terminal_each_turn_ends_with_the_status_as_a_plain_line() -> None:
    render = Render(console(terminal=False), spent=lambda: 2.5)
    a_round_two(render)
    out = render.console.file.getvalue()  # type: ignore[attr-defined]
    assert "work (3/3) · round 2/3" in out  # the round's header
    assert "· $2.5000 · context 25%\n" in out  # Runtime's own figure when it is at hand
    assert "\x1b" not in out


async def test_on_a_terminal_the_status_is_one_live_line_that_keeps_its_last_state() -> None:
    spent = [1.0]
    render = Render(console(terminal=True), spent=lambda: spent[0])
    live = asyncio.ensure_future(render.heartbeat())
    await asyncio.sleep(0.1)
    a_round_two(render)
    spent[0] = 2.25  # spent after the last event: the last frame still says it
    live.cancel()
    with pytest.raises(asyncio.CancelledError):
        await live
    out = render.console.file.getvalue()  # type: ignore[attr-defined]
    *frames, last = out.split("\x1b[2K")  # each frame erases the one before: a live line
    assert frames and "$2.2500 · context 25% · waiting for you: q1" in last  # the end state
    assert "?? q1: which?" in out  # the output goes above it
    assert "$1.0000 · context 25% · waiting for you: q1" in out  # it followed the events


def test_an_event_log_a_box_wrote_can_neither_crash_nor_style_the_line() -> None:
    """`flowerbox attach` renders the box's event log: data, never trusted to be well formed."""
    render = Render(console(terminal=False))
    planted = [
        {"kind": "step", "text": "[bold red]x[/]", "payload": {"index": "9", "round": [1]}},
        {"kind": "session", "payload": {"window": "all", "session_id": 7}},
        {"kind": "text", "text": "t", "payload": {"context": "52k"}},
        {"kind": "result", "payload": {"run_cost_usd": "9.99"}},
        {"kind": "ask", "text": "q", "payload": {"id": ["q"], "state": "asked", "options": 5}},
        {"kind": "task", "text": "t", "payload": {"unverifiable": 3}},
        {"kind": "text", "text": "said [/] and [red]this[/red]"},  # rich would raise on [/]
        {"kind": "tool_call", "text": "[blink]ls[/blink]", "tool": "[b]Bash[/b]"},
    ]
    for line in planted:
        render(Event.from_json(line))
    out = render.console.file.getvalue()  # type: ignore[attr-defined]
    assert "[bold red]x[/] (1/0)" in out  # shown as it is, not as markup
    assert "said [/] and [red]this[/red]" in out and "[[b]Bash[/b]] [blink]ls[/blink]" in out
    assert render.status_line().endswith("· $0.0000 · context 0k · waiting for you: ['q']")


def test_in_chinese_the_status_line_and_the_headers_are_chinese(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 36: `--lang zh` governs the live line too (the seed's step names, zh words)."""
    monkeypatch.setenv("FLOWER_LANG", "zh")
    render = Render(console(terminal=False))
    render.started = time.monotonic() - 65
    a_round_two(render)
    render(Event("ask", "x", payload={"kind": "mail", "state": "sent"}))
    render(Event("denied", "no Bash here"))
    assert render.status_line() == (
        "· 干活 3/3 · 第 2/3 轮 · 00:01:05 · $1.9362 · 上下文 25% · 等你回答:q1"
    )
    out = render.console.file.getvalue()  # type: ignore[attr-defined]
    assert "干活 (3/3) · 第 2/3 轮" in out and "✉ 你说:x" in out and "被拒绝:no Bash here" in out
