"""HumanChannel without the CLI: states, the 0/None settings, threads, files, other processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from flower.core.brief import Brief
from flower.core.events import Event
from flower.core.human import (
    DECLINED,
    INVALID,
    OVER_BUDGET,
    TIMEOUT,
    Ask,
    HumanChannel,
    drop_answer,
    drop_message,
    pending_asks,
)

pytestmark = pytest.mark.anyio

SEEDS_TIMEOUT = (
    "无人应答。按你自己的判断继续,并把这个问题和你采用的假设写进「未知与假设」那一段。"
    "不要重复提问,也不要停在这里。"
)
SOON = 5.0  # seconds a test waits for something that should take milliseconds


def on_ask(ch: HumanChannel, act: Callable[[Ask], object]) -> threading.Thread:
    """Start a thread (a TUI's input thread, a web handler) that acts on the first pending ask."""

    def run() -> None:
        deadline = time.monotonic() + SOON
        while not ch.pending() and time.monotonic() < deadline:
            time.sleep(0.005)
        if pending := ch.pending():
            act(pending[0])

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def states(events: list[Event]) -> list[tuple[str, str]]:
    return [(e.payload["id"], e.payload["state"]) for e in events]


async def within(seconds: float, coro: Any) -> Any:
    async with asyncio.timeout(seconds):
        return await coro


async def call(tool: Any, args: dict[str, Any]) -> str:
    """Call one of the channel's MCP tools as the CLI does; the text it returns."""
    result = await tool.handler(args)
    return str(result["content"][0]["text"])


@pytest.fixture
def events() -> list[Event]:
    return []


@pytest.fixture
def channel(events: list[Event]) -> HumanChannel:
    return HumanChannel(on_event=events.append, timeout_s=SOON)


@pytest.fixture
async def attached(channel: HumanChannel, tmp_path: Path) -> AsyncIterator[HumanChannel]:
    channel.attach(tmp_path / "run")
    try:
        yield channel
    finally:
        await channel.aclose()


# --- the surface a role needs -----------------------------------------------------------------


def test_tool_names_server_key_and_env() -> None:
    ch = HumanChannel()
    assert (ch.tool_name, ch.inbox_tool_name) == ("mcp__human__ask", "mcp__human__inbox")
    server = ch.mcp_servers()["human"]
    assert server["type"] == "sdk" and server["name"] == "human"
    assert [t.name for t in ch.tools] == ["ask", "inbox"]
    assert ch.env() == {"ENABLE_TOOL_SEARCH": "false"}
    assert ch.on_event is None and ch.remaining is None


def test_the_timeout_text_is_the_seeds_text() -> None:
    assert TIMEOUT == SEEDS_TIMEOUT
    assert "不要重复提问" in OVER_BUDGET and "未知与假设" in DECLINED
    assert len({TIMEOUT, OVER_BUDGET, DECLINED, INVALID}) == 4


# --- outcomes ---------------------------------------------------------------------------------


async def test_answered_from_another_thread(channel: HumanChannel, events: list[Event]) -> None:
    thread = on_ask(channel, lambda a: channel.answer(a.id, "blue"))
    ask = await within(SOON, channel.ask("which colour?", ["red", "blue"]))
    thread.join()
    assert (ask.id, ask.state, ask.answer, ask.options) == (
        "q1",
        "answered",
        "blue",
        ["red", "blue"],
    )
    assert channel.reply(ask) == "blue" and channel.pending() == []
    assert states(events) == [("q1", "asked"), ("q1", "answered")]
    asked, outcome = events
    assert asked.text == "which colour?" and asked.payload["kind"] == "question"
    assert outcome.payload["answer"] == "blue" and outcome.raw is ask


async def test_declined_with_a_reason(
    channel: HumanChannel, events: list[Event], tmp_path: Path
) -> None:
    channel.log_path = tmp_path / "log.md"
    thread = on_ask(channel, lambda a: channel.decline(a.id, "skip it"))
    ask = await within(SOON, channel.ask("may I?"))
    thread.join()
    assert ask.state == "declined" and ask.answer == "skip it"
    assert channel.reply(ask) == f"{DECLINED}\n对方说:skip it"
    assert states(events) == [("q1", "asked"), ("q1", "declined")]
    assert "- 结果:人拒绝回答:skip it" in channel.log_path.read_text(encoding="utf-8")


async def test_declined_without_a_reason_gives_the_fixed_text(channel: HumanChannel) -> None:
    thread = on_ask(channel, lambda a: channel.decline(a.id))
    ask = await within(SOON, channel.ask("may I?"))
    thread.join()
    assert channel.reply(ask) == DECLINED


async def test_nobody_answers_within_timeout_s(events: list[Event]) -> None:
    ch = HumanChannel(on_event=events.append, timeout_s=0.05)
    ask = await within(SOON, ch.ask("anyone?"))
    assert ask.state == "timeout" and ch.reply(ask) == TIMEOUT and ch.pending() == []
    assert states(events) == [("q1", "asked"), ("q1", "timeout")]
    assert ask.waited_s >= 0.0 and ask.closed_at is not None


@pytest.mark.parametrize("timeout_s", [0, 0.0, -1])
async def test_unattended_closes_at_once_without_an_asked_event(
    timeout_s: float, events: list[Event]
) -> None:
    ch = HumanChannel(on_event=events.append, timeout_s=timeout_s)
    ask = await within(0.5, ch.ask("anyone?"))
    assert ask.state == "timeout" and ch.reply(ask) == TIMEOUT
    assert states(events) == [("q1", "timeout")] and ch.pending() == []


async def test_timeout_none_waits_until_answered(events: list[Event]) -> None:
    ch = HumanChannel(on_event=events.append, timeout_s=None)

    def late(ask: Ask) -> None:
        time.sleep(1.0)  # longer than any short default a None could fall back to
        ch.answer(ask.id, "finally")

    thread = on_ask(ch, late)
    ask = await within(SOON, ch.ask("wait for me?"))
    thread.join()
    assert ask.state == "answered" and ask.waited_s >= 1.0


async def test_max_asks_zero_refuses_at_once(events: list[Event]) -> None:
    ch = HumanChannel(on_event=events.append, max_asks=0, timeout_s=None)
    ask = await within(0.5, ch.ask("may I ask?"))
    assert ask.state == "over_budget" and ch.reply(ask) == OVER_BUDGET
    assert states(events) == [("q1", "over_budget")] and events[0].payload["remaining"] == 0


async def test_asks_beyond_the_quota_are_refused(events: list[Event]) -> None:
    ch = HumanChannel(on_event=events.append, max_asks=1, timeout_s=0)
    assert ch.remaining == 1
    first = await ch.ask("one?")
    second = await within(0.5, ch.ask("two?"))
    assert (first.state, second.state) == ("timeout", "over_budget")
    assert [e.payload["remaining"] for e in events] == [0, 0] and ch.remaining == 0


async def test_max_asks_none_is_unlimited(events: list[Event]) -> None:
    ch = HumanChannel(on_event=events.append, timeout_s=0)
    asks = [await ch.ask(f"question {n}?") for n in range(5)]
    assert [a.state for a in asks] == ["timeout"] * 5 and ch.remaining is None
    assert [a.id for a in ch.asks] == ["q1", "q2", "q3", "q4", "q5"]
    assert all(e.payload["remaining"] is None for e in events)


@pytest.mark.parametrize("question", ["", "  \n "])
async def test_an_empty_question_is_invalid_and_costs_no_quota(
    question: str, events: list[Event]
) -> None:
    ch = HumanChannel(on_event=events.append, max_asks=1, timeout_s=None)
    ask = await within(0.5, ch.ask(question))
    assert ask.state == "invalid" and ch.reply(ask) == INVALID
    assert states(events) == [("q1", "invalid")] and ch.remaining == 1


async def test_custom_fixed_texts(events: list[Event]) -> None:
    ch = HumanChannel(timeout_s=0, max_asks=1, timeout_text="T", over_budget_text="B")
    assert ch.reply(await ch.ask("one?")) == "T"
    assert ch.reply(await ch.ask("two?")) == "B"


async def test_a_cancelled_ask_closes_as_timeout(
    channel: HumanChannel, events: list[Event]
) -> None:
    task = asyncio.create_task(channel.ask("still there?"))
    assert await channel.next_ask(timeout=SOON) is not None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert channel.pending() == [] and channel.asks[0].state == "timeout"
    assert states(events) == [("q1", "asked"), ("q1", "timeout")]
    assert channel.answer("q1", "too late") is False


async def test_waited_s_is_frozen_once_closed() -> None:
    ch = HumanChannel(timeout_s=0.05)
    ask = await ch.ask("anyone?")
    before = ask.waited_s
    await asyncio.sleep(0.15)
    assert ask.waited_s == before and round(before, 1) == before
    live = Ask("q9", "open", asked_at=time.time() - 2.04)
    assert live.waited_s == 2.0 and live.state == "asked"


def test_ask_event_shape() -> None:
    ask = Ask("q3", "why?", ["a"], asked_at=100.0, state="answered", answer="a", closed_at=101.26)
    event = ask.event(remaining=2)
    assert (event.kind, event.text, event.raw) == ("ask", "why?", ask)
    assert event.payload == {
        "kind": "question",
        "id": "q3",
        "state": "answered",
        "options": ["a"],
        "answer": "a",
        "waited_s": 1.3,
        "remaining": 2,
    }
    channel = HumanChannel(timeout_s=0)  # ids as a channel hands them out: q1, q2... (004:234)
    asked = [asyncio.run(channel.ask(question)) for question in ("one?", "two?")]
    assert [a.id for a in asked] == ["q1", "q2"]


# --- the human's side -------------------------------------------------------------------------


async def test_answer_returns_false_when_nobody_waits(channel: HumanChannel) -> None:
    assert channel.answer("q1", "x") is False and channel.decline("q7") is False
    thread = on_ask(channel, lambda a: (channel.answer(a.id, "first"), channel.answer(a.id, "2nd")))
    ask = await within(SOON, channel.ask("once?"))
    thread.join()
    assert ask.answer == "first" and channel.answer(ask.id, "again") is False


async def test_pull_model_next_ask(channel: HumanChannel) -> None:
    assert await channel.next_ask(timeout=0.01) is None

    async def answerer() -> None:
        ask = await channel.next_ask()
        assert ask is not None and ask in channel.pending()
        channel.answer(ask.id, "pulled")

    task = asyncio.create_task(answerer())
    ask = await within(SOON, channel.ask("pull me?"))
    await task
    assert ask.answer == "pulled"


async def test_next_ask_skips_asks_answered_before_they_were_pulled(
    channel: HumanChannel,
) -> None:
    thread = on_ask(channel, lambda a: channel.answer(a.id, "pushed"))
    await within(SOON, channel.ask("push?"))
    thread.join()
    assert await channel.next_ask(timeout=0.01) is None


async def test_send_reaches_the_inbox_tool_from_another_thread(
    channel: HumanChannel, events: list[Event], tmp_path: Path
) -> None:
    brief = tmp_path / "需求.md"
    brief.write_text("# 需求\n\n## 目标\n做一个 X\n", encoding="utf-8")
    channel.amend_path = brief
    ask_tool, inbox_tool = channel.tools
    assert "空" in await call(inbox_tool, {})

    def speak_then_answer(ask: Ask) -> None:
        channel.send("also count bytes")
        channel.answer(ask.id, "ok")

    thread = on_ask(channel, speak_then_answer)
    assert await within(SOON, call(ask_tool, {"question": "go on?"})) == "ok"
    thread.join()
    text = await call(inbox_tool, {})
    assert "also count bytes" in text and "1 条" in text
    assert "空" in await call(inbox_tool, {})
    mail = [(e.text, e.payload["state"]) for e in events if e.payload["kind"] == "mail"]
    assert mail == [("also count bytes", "sent"), ("also count bytes", "read")]
    written = brief.read_text(encoding="utf-8")
    assert written.startswith("# 需求\n\n## 目标\n做一个 X\n")
    assert "人补充（" in written and "> also count bytes" in written


async def test_an_event_sink_that_raises_does_not_break_the_ask() -> None:
    def broken(event: Event) -> None:
        raise RuntimeError("UI down")

    ch = HumanChannel(on_event=broken, timeout_s=0.01)
    assert (await ch.ask("still fine?")).state == "timeout"


# --- files ------------------------------------------------------------------------------------


async def test_log_path_appends_every_outcome(tmp_path: Path) -> None:
    log = tmp_path / "notes" / "问答记录.md"
    ch = HumanChannel(timeout_s=0, max_asks=1, log_path=log)
    await ch.ask("first?", ["a", "b"])
    await ch.ask("second?")
    first = log.read_text(encoding="utf-8")
    assert first.startswith("# 问答记录\n")
    assert "## q1 · " in first and "· timeout" in first and "- 选项:a / b" in first
    assert "- 问题:second?" in first and "over_budget" in first and "- 等待:0.0 s" in first
    again = HumanChannel(timeout_s=0, log_path=log)
    await again.ask("third?")
    assert log.read_text(encoding="utf-8").startswith(first) and "third?" in log.read_text()


async def test_log_records_the_answer(channel: HumanChannel, tmp_path: Path) -> None:
    channel.log_path = tmp_path / "log.md"
    thread = on_ask(channel, lambda a: channel.answer(a.id, "forty-two"))
    await within(SOON, channel.ask("answer?"))
    thread.join()
    assert "- 回答:forty-two" in channel.log_path.read_text(encoding="utf-8")


def test_amend_appends_under_a_label_and_skips_a_text_already_there(tmp_path: Path) -> None:
    brief = tmp_path / "需求.md"
    brief.write_text("# 需求\n", encoding="utf-8")
    ch = HumanChannel(amend_path=brief)
    assert ch.amend("改成 CSV 输出", label="唤醒时追加") is True
    assert ch.amend("改成 CSV 输出") is False  # a wake-up repeating the same words
    assert ch.amend("  ") is False
    assert ch.amend("第一行\n目标") is True
    text = brief.read_text(encoding="utf-8")
    assert text.startswith("# 需求\n") and text.count("改成 CSV 输出") == 1
    assert "唤醒时追加（" in text and "> 第一行\n> 目标\n" in text
    assert ch.amend("第一行\n目标") is False
    assert HumanChannel().amend("no path") is False


def test_send_always_appends_and_the_brief_still_parses(tmp_path: Path) -> None:
    path = Brief(goal="做一个 X", accept="能跑", bounds="不联网", unknowns="无").write(
        tmp_path / "需求.md"
    )
    ch = HumanChannel(amend_path=path)
    ch.send("目标\n改成 Y")
    ch.send("目标\n改成 Y")  # said twice, recorded twice (only amend() skips)
    assert path.read_text(encoding="utf-8").count("> 目标\n> 改成 Y") == 2
    brief = Brief.load(path)
    assert brief is not None and brief.complete() and brief.goal == "做一个 X"
    assert "改成 Y" in brief.unknowns


async def test_asks_json_mirrors_the_pending_asks(attached: HumanChannel, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert pending_asks(run) == [] and (run / "asks.json").exists()
    seen: list[list[dict[str, Any]]] = []

    def look_then_answer(ask: Ask) -> None:
        deadline = time.monotonic() + SOON  # another process sees the file a moment later
        while not pending_asks(run) and time.monotonic() < deadline:
            time.sleep(0.005)
        seen.append(pending_asks(run))
        attached.answer(ask.id, "done")

    thread = on_ask(attached, look_then_answer)
    ask = await within(SOON, attached.ask("mirrored?", ["y"]))
    thread.join()
    assert seen == [
        [{"id": "q1", "question": "mirrored?", "options": ["y"], "asked_at": ask.asked_at}]
    ]
    assert pending_asks(run) == []
    assert pending_asks(tmp_path / "nowhere") == []


async def test_an_answer_dropped_by_another_process_resolves_the_ask(
    attached: HumanChannel, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    code = "import sys; from flower.core.inbox import drop_answer; drop_answer(*sys.argv[1:])"

    def other_process(ask: Ask) -> None:
        subprocess.run([sys.executable, "-c", code, str(run), ask.id, "from afar"], check=True)

    thread = on_ask(attached, other_process)
    ask = await within(SOON, attached.ask("remote?"))
    thread.join()
    assert (ask.state, ask.answer) == ("answered", "from afar")
    assert list((run / "inbox").glob("*.json")) == []


async def test_dropped_messages_and_junk(
    attached: HumanChannel, events: list[Event], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    inbox = run / "inbox"
    (inbox / "junk.json").write_text("{not json", encoding="utf-8")
    (inbox / "odd.json").write_text('{"hello": 1}', encoding="utf-8")
    drop_answer(run, "q9", "nobody asked")
    drop_message(run, "from the host")
    await _until(lambda: sorted(p.name for p in inbox.glob("*.json")) == [])
    await _until(lambda: any(e.text == "from the host" for e in events))
    rejected = sorted(p.name for p in (inbox / "rejected").iterdir())
    assert "junk.json" in rejected and "odd.json" in rejected and len(rejected) == 3
    assert "from the host" in await call(attached.tools[1], {})


async def test_files_already_in_the_inbox_are_read_at_attach(
    channel: HumanChannel, tmp_path: Path
) -> None:
    path = drop_message(tmp_path / "run", "said while nobody listened")
    assert json.loads(path.read_text(encoding="utf-8")) == {"send": "said while nobody listened"}
    channel.attach(tmp_path / "run")
    try:
        await _until(lambda: not path.exists())
        assert "said while nobody listened" in await call(channel.tools[1], {})
    finally:
        await channel.aclose()


async def _until(condition: Callable[[], bool], step: float = 0.01) -> None:
    for _ in range(int(SOON / step)):
        if condition():
            return
        await asyncio.sleep(step)
    raise AssertionError(f"still false after {SOON} s")
