"""HumanChannel on the real CLI: both tools offered, a blocking ask answered from outside."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flower.core import lang
from flower.core.agent import AgentSpec
from flower.core.human import OVER_BUDGET, TIMEOUT, Ask, HumanChannel
from flower.core.roles import coordinator
from flower.core.runtime import Runtime, StepResult
from flower.testing import FakeAPI, sequence, text, tool

pytestmark = pytest.mark.anyio

SOON = 10.0


@pytest.fixture
def runtime(flower_env: FakeAPI, workspace: Path) -> Iterator[Runtime]:
    rt = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        yield rt
    finally:
        rt.close()


def spec(ch: HumanChannel) -> AgentSpec:
    return AgentSpec(
        "asker",
        "Ask the human when unsure.",
        mcp_servers=ch.mcp_servers(),
        allowed_tools=[ch.tool_name, ch.inbox_tool_name],
        env=ch.env(),
    )


def on_ask(ch: HumanChannel, act: Callable[[Ask], object]) -> threading.Thread:
    """A thread (the human) that acts on the first pending ask."""

    def run() -> None:
        deadline = time.monotonic() + SOON
        while not ch.pending() and time.monotonic() < deadline:
            time.sleep(0.01)
        if pending := ch.pending():
            act(pending[0])

    thread = threading.Thread(target=run)
    thread.start()
    return thread


async def ask_once(
    api: FakeAPI, rt: Runtime, ch: HumanChannel, question: str = "CSV or JSON?"
) -> tuple[StepResult, str]:
    """One step in which the model asks once; the tool result it was shown."""
    api.script = sequence(
        tool(ch.tool_name, {"question": question, "options": ["CSV", "JSON"]}), text("decided")
    )
    result = await rt.run(spec(ch), "write the report")
    shown = api.main_requests()[-1].last_tool_results()
    assert len(shown) == 1 and not shown[0].is_error
    return result, shown[0].text


async def test_both_tools_are_offered_and_an_answer_from_a_thread_comes_back(
    flower_env: FakeAPI, runtime: Runtime
) -> None:
    ch = HumanChannel(timeout_s=SOON)
    thread = on_ask(ch, lambda a: ch.answer(a.id, "JSON please"))
    result, shown = await ask_once(flower_env, runtime, ch)
    thread.join()
    first = flower_env.main_requests()[0]
    assert {ch.tool_name, ch.inbox_tool_name} <= set(first.tool_names)
    assert shown == "JSON please" and result.ok and result.text == "decided"
    assert [(a.question, a.state, a.options) for a in ch.asks] == [
        ("CSV or JSON?", "answered", ["CSV", "JSON"])
    ]
    # 000:374: coordinator(channel=ch) brings both, and both are callable in a run nobody
    # approves anything in (the CLI refuses an MCP tool its session did not allow)
    ch.send("also count bytes")
    flower_env.script = sequence(tool(ch.inbox_tool_name, {}), text("read it"))
    await runtime.run(coordinator("c", "", {}, channel=ch), "go on")
    [mail] = flower_env.main_requests()[-1].last_tool_results()
    assert not mail.is_error and "also count bytes" in mail.text


async def test_unattended_returns_the_timeout_text_at_once(
    flower_env: FakeAPI, runtime: Runtime
) -> None:
    ch = HumanChannel(timeout_s=0)
    result, shown = await ask_once(flower_env, runtime, ch)
    assert shown == TIMEOUT and result.ok and ch.asks[0].state == "timeout"


async def test_max_asks_zero_returns_the_over_budget_text(
    flower_env: FakeAPI, runtime: Runtime
) -> None:
    ch = HumanChannel(max_asks=0, timeout_s=None)
    result, shown = await ask_once(flower_env, runtime, ch)
    assert shown == OVER_BUDGET and result.ok and ch.asks[0].state == "over_budget"


async def test_the_inbox_tool_returns_what_the_human_sent(
    flower_env: FakeAPI, runtime: Runtime
) -> None:
    """004:245: the inbox hands over what the human sent, and read again (nothing new) it
    does not block but says it is empty, in the run's language."""
    ch = HumanChannel()
    ch.send("also count bytes")
    flower_env.script = sequence(
        tool(ch.inbox_tool_name, {}), tool(ch.inbox_tool_name, {}), text("read it")
    )
    result = await runtime.run(spec(ch), "count lines")
    first, second = (r.last_tool_results() for r in flower_env.main_requests()[-2:])
    assert result.ok and len(first) == 1 and "also count bytes" in first[0].text
    empty = {"en": "The inbox is empty", "zh": "收件箱是空的"}[lang.current()]
    assert len(second) == 1 and second[0].text.startswith(empty)


async def test_an_answer_dropped_into_the_run_dir_by_another_process(
    flower_env: FakeAPI, runtime: Runtime
) -> None:
    ch = HumanChannel(timeout_s=SOON)
    ch.attach(runtime.run_dir)
    code = "import sys; from flower.core.inbox import drop_answer; drop_answer(*sys.argv[1:])"

    def other_process(ask: Ask) -> None:
        argv = [sys.executable, "-c", code, str(runtime.run_dir), ask.id, "CSV from the host"]
        subprocess.run(argv, check=True)

    thread = on_ask(ch, other_process)
    try:
        _, shown = await ask_once(flower_env, runtime, ch)
    finally:
        thread.join()
        await ch.aclose()
    assert shown == "CSV from the host" and ch.asks[0].state == "answered"
