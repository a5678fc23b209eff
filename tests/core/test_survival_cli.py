"""Long-horizon survival on the real CLI: faults at every point, interrupts, full contexts.

The CLI's own retries are 0 here unless a case says otherwise, so flower's layer is what
each case exercises; delays are shrunk through Resilience so the suite stays fast. After
every case sessions.db passes integrity_check and manifest.json parses.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flower.core import lang
from flower.core.agent import AgentSpec, HandoffPolicy
from flower.core.events import Event
from flower.core.resilience import Resilience, classify
from flower.core.runtime import Runtime
from flower.core.workbench import Workbench
from flower.testing import (
    Always,
    FakeAPI,
    Reply,
    Request,
    Sequence,
    Text,
    ToolUse,
    Usage,
    When,
    drop,
    http_error,
    prompt_too_long,
    reset,
    rules,
    sequence,
    text,
    tool,
)
from tests.processes import wait_running_below

pytestmark = pytest.mark.anyio

FAST = Resilience(cli_retries=0, base_delay=0.01, max_delay=0.02, probe_interval=0.05)
BASH = AgentSpec("worker", "", allowed_tools=["Bash"])


@pytest.fixture
def make_runtime(flower_env: FakeAPI, workspace: Path) -> Iterator[Any]:
    made: list[Runtime] = []

    def make(**kwargs: Any) -> Runtime:
        kwargs.setdefault("resilience", FAST)
        made.append(Runtime(workspace=workspace, run_dir=workspace.parent / "runs", **kwargs))
        return made[-1]

    yield make
    for runtime in made:
        runtime.close()
        db = sqlite3.connect(runtime.run_dir / "sessions.db")
        try:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        finally:
            db.close()
        json.loads(runtime.manifest_path.read_text())  # never torn


def ten_requests(*, fault_at: int, fault: Any) -> Sequence:
    """A 10-request step: 9 Bash calls then an answer; two blocks each, so a cut after the
    first block never looks like a whole reply."""
    replies = [
        Reply(blocks=(Text(f"step {i}"), ToolUse("Bash", {"command": f"echo {i}"})))
        for i in range(9)
    ]
    replies.append(Reply(blocks=(Text("all"), Text("done"))))
    replies[fault_at] = Reply(blocks=replies[fault_at].blocks, fault=fault)
    return Sequence(replies, then=text("next step answered"))


@pytest.mark.parametrize("index", range(10))
async def test_a_drop_at_any_request_is_resumed_not_restarted(
    flower_env: FakeAPI, make_runtime: Any, index: int
) -> None:
    # Cut after the first block, 4 times: the first try and the CLI's 3 re-requests. Then
    # the CLI gives up, and flower's layer resumes the session.
    flower_env.script = ten_requests(fault_at=index, fault=drop(1, times=4))
    runtime = make_runtime()
    result = await runtime.run(BASH, "do the ten things")
    assert result.ok and result.text == "done"
    assert (result.attempts, result.resumed) == (2, True)
    assert len(result.errors) == 1 and "Connection lost mid-response" in result.errors[0]
    assert "API Error" not in result.text
    # Resumed, not restarted: each scripted call was answered exactly once (a restart would
    # start the script over in a new session and serve them again).
    served = [r.answered for r in flower_env.requests]
    assert served.count("text+tool_use:Bash") == 9 and served.count("text") == 1
    # The next step, resuming the same session, is not shown the synthetic error either.
    follow = await runtime.run(BASH, "and now?", resume=result.session_id)
    assert follow.ok
    assert "API Error" not in flower_env.main_requests()[-1].conversation_text


async def test_a_single_blip_is_absorbed_by_the_cli_when_its_retries_are_1(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = Always(text("fine", fault=reset(times=1)))
    runtime = make_runtime(resilience=Resilience(cli_retries=1, base_delay=0.01))
    result = await runtime.run(BASH, "go")
    assert result.ok and (result.attempts, result.resumed, result.errors) == (1, False, [])
    assert [r.answered for r in flower_env.requests] == ["reset", "text"]


async def test_a_bad_key_stops_at_once_without_waiting_or_retrying(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = Always(text("never", fault=http_error(401)))
    slow = Resilience(cli_retries=0, base_delay=30, probe_interval=30)  # would show as a hang
    seen: list[Event] = []
    started = time.monotonic()
    result = await make_runtime(resilience=slow).run(BASH, "go", on_event=seen.append)
    assert time.monotonic() - started < 20
    assert not result.ok and result.attempts == 1 and len(flower_env.requests) == 1
    assert result.error is not None and "Invalid API key" in result.error
    assert not [e for e in seen if e.kind == "retry"]


async def test_the_status_decides_not_a_misleading_text(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    """A 503 whose message reads like a bad key: the text alone would stop at once, the
    status the SDK reports says "retry", and the step gets through."""
    fault = http_error(503, "upstream said: invalid api key", times=1)
    flower_env.script = Always(text("through", fault=fault))
    result = await make_runtime().run(BASH, "go")
    assert result.ok and result.text == "through"
    assert (result.attempts, len(result.errors)) == (2, 1)
    assert classify(result.errors[0]) == "fatal"  # what the text alone would have said


async def test_overloaded_twice_then_success_is_two_flower_retries_with_backoff(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = Always(text("through", fault=http_error(529, times=2)))
    seen: list[Event] = []
    runtime = make_runtime()
    result = await runtime.run(BASH, "go", on_event=seen.append)
    assert result.ok and result.text == "through"
    assert (result.attempts, result.resumed, len(result.errors)) == (3, False, 2)
    # Nothing was answered: the same request again each time, not a resume that puts a
    # synthetic reply and a "you were cut off" note behind it (issue 30)
    sent = [r.messages for r in flower_env.requests]
    assert sent[1] == sent[0] and sent[2] == sent[0]
    retries = [e for e in seen if e.kind == "retry" and e.payload.get("source") == "flower"]
    assert [e.payload["attempt"] for e in retries] == [1, 2]
    assert all(e.payload["kind"] == "retry" and e.payload["delay_s"] > 0 for e in retries)
    manifest = json.loads(runtime.manifest_path.read_text())
    assert manifest[-1]["errors"] == result.errors and manifest[-1]["attempts"] == 3


async def test_an_outage_is_waited_out_and_the_step_resumes(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = sequence(
        tool("Bash", {"command": "python3 -c 'import time; time.sleep(1)'"}),
        text("made it"),
    )

    def outage() -> None:
        flower_env.wait_for(lambda requests: len(requests) >= 1, timeout=30)
        flower_env.stop()  # the API goes away while the tool runs
        time.sleep(2.5)
        flower_env.start()  # and comes back on the same port

    thread = threading.Thread(target=outage)
    thread.start()
    seen: list[Event] = []
    try:
        result = await make_runtime().run(BASH, "go", on_event=seen.append)
    finally:
        thread.join()
    assert result.ok and result.text == "made it" and result.resumed
    probe_lines = [e.text for e in seen if e.kind == "retry" and e.payload.get("source") == "probe"]
    assert len(probe_lines) == 2 and "不可达" in probe_lines[0] and "恢复" in probe_lines[1]


def handoff_reply() -> Reply:
    sections = {
        "正在做": "把十个文件逐个改完,已改到第 7 个",
        "已定结论": "统一用 UTF-8",
        "死路": "无",
        "下一步": "改第 8、9、10 个文件,然后跑测试",
        "现场": "工作区根目录",
    }
    return text("\n\n".join(f"## {title}\n{body}" for title, body in sections.items()))


async def test_a_filling_context_hands_off_to_a_new_session(
    flower_env: FakeAPI, make_runtime: Any, workspace: Path
) -> None:
    from flower.core.handoff import HANDOFF_PROMPT

    marker = HANDOFF_PROMPT.split("{", 1)[0][:30]
    climbing = [
        tool("Bash", {"command": f"echo {i}"}, usage=Usage(input_tokens=tokens))
        for i, tokens in enumerate((100_000, 140_000, 160_000, 170_000))
    ]
    flower_env.script = rules(
        (When(kind="main", last_user_contains=marker), Always(handoff_reply())),
        (When(kind="main", contains="改第 8、9、10 个文件"), sequence(text("continued"))),
        (When(kind="main"), Sequence(climbing)),
    )
    workbench = Workbench(workspace)
    runtime = make_runtime(workbench=workbench, handoff=HandoffPolicy(window=200_000))
    seen: list[Event] = []
    result = await runtime.run(BASH, "改十个文件", step_name="改文件", on_event=seen.append)
    phases = [e.payload["phase"] for e in seen if e.kind == "handoff"]
    assert phases == ["near", "writing", "done"]
    assert result.ok and result.text == "continued"
    assert len(result.retired) == 1 and result.session_id not in result.retired
    document = workbench.notes / "交接-改文件.md"
    assert "改第 8、9、10 个文件" in document.read_text()
    first_of_new = [r for r in flower_env.main_requests() if r.contains("改第 8、9、10 个文件")][0]
    assert first_of_new.last_user_text.count("改第 8、9、10 个文件") >= 1
    # a new session: the old one's first exchange, not the rest of its history
    assert len(first_of_new.messages) <= 4 and "echo 1" not in json.dumps(first_of_new.messages)
    # The handoff turn itself was not shown to the UI.
    assert not [e for e in seen if e.kind == "text" and "已定结论" in e.text]


async def test_a_new_generation_keeps_the_old_ones_tools_and_system_prompt(
    flower_env: FakeAPI, make_runtime: Any, workspace: Path
) -> None:
    """Issue 30, item 4: a prompt cache serves the new generation's tools + system prompt
    only if they are the old one's byte for byte (the CLI's per-session billing line
    aside), so what the workbench gained (the handoff note) goes into its first prompt."""
    from flower.core.handoff import HANDOFF_PROMPT

    marker = HANDOFF_PROMPT.split("{", 1)[0][:30]
    flower_env.script = rules(
        (When(kind="main", last_user_contains=marker), Always(handoff_reply())),
        (When(kind="main", contains="改第 8、9、10 个文件"), sequence(text("continued"))),
        (
            When(kind="main"),
            Always(tool("Bash", {"command": "echo 1"}, usage=Usage(input_tokens=190_000))),
        ),
    )
    workbench = Workbench(workspace)
    (workbench.notes / "早先的决定.md").write_text("用 UTF-8\n")
    runtime = make_runtime(workbench=workbench, handoff=HandoffPolicy(window=200_000))
    result = await runtime.run(BASH, "改十个文件", step_name="改文件")
    assert result.ok and len(result.retired) == 1
    old = flower_env.main_requests()[0]
    new = next(r for r in flower_env.main_requests() if r.contains("改第 8、9、10 个文件"))
    assert new.body["tools"] == old.body["tools"]
    assert new.system_blocks[1:] == old.system_blocks[1:]  # [0]: the CLI's billing line
    assert "交接-改文件.md" not in "".join(new.system_blocks)
    # the handoff let the first response's call finish, so the new generation starts with
    # that exchange and its real result (an interrupt would have refused the call)
    results = [
        block
        for message in new.messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert [(r["content"], r["is_error"]) for r in results] == [("1", False)]
    said = new.prompt
    assert "交接-改文件.md" in said and "早先的决定.md" not in said  # only what is new


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_a_new_generation_forks_after_the_old_ones_first_exchange(
    language: str,
    flower_env: FakeAPI,
    make_runtime: Any,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 30, item 4: the new generation starts with the old session's first prompt, its
    environment message and its first exchange, byte for byte what the old session's
    requests sent (a prompt cache holds it), and the handoff after them; the rest of the old
    conversation is not there. Later requests of the new session keep that prefix."""
    from flower.core.texts.en import EN
    from flower.core.texts.zh import ZH

    monkeypatch.setenv("FLOWER_LANG", language)
    table = {"en": EN, "zh": ZH}[language]
    marker = table["handoff.write"].split("{", 1)[0][:30]
    climbing = [
        tool("Bash", {"command": f"echo {i}"}, usage=Usage(input_tokens=tokens))
        for i, tokens in enumerate((100_000, 140_000, 160_000, 170_000))
    ]
    flower_env.script = rules(
        (When(kind="main", last_user_contains=marker), Always(handoff_reply())),
        (
            When(kind="main", contains="改第 8、9、10 个文件"),
            sequence(tool("Bash", {"command": "echo new"}), text("continued")),
        ),
        (When(kind="main"), Sequence(climbing)),
    )
    runtime = make_runtime(workbench=Workbench(workspace), handoff=HandoffPolicy(window=200_000))
    result = await runtime.run(BASH, "改十个文件", step_name="改文件")
    assert result.ok and result.text == "continued" and len(result.retired) == 1
    main = flower_env.main_requests()
    old, second = main[0], main[1]  # the old session's first request, and its next
    new = [r for r in main if r.contains("改第 8、9、10 个文件")]
    first = new[0].messages
    assert first[: len(old.messages) - 1] == old.messages[:-1]  # its first prompt
    assert first[1:3] == second.messages[1:3]  # the environment, the first response
    result_of = [
        {k: v for k, v in m["content"][0].items() if k != "cache_control"}
        for m in (first[3], second.messages[3])
    ]
    assert result_of[0] == result_of[1] and result_of[0]["content"] == "0"  # and its result
    assert "echo 0" in json.dumps(first[2]) and "echo 1" not in json.dumps(first)
    assert first[-1]["content"][-1]["text"].startswith(table["handoff.forked"])
    assert new[1].messages[: len(first) - 1] == first[:-1]  # the next request keeps it
    assert result.session_id not in result.retired


async def test_a_due_handoff_whose_call_a_guard_refuses_stops_at_the_next_response(
    flower_env: FakeAPI, make_runtime: Any, workspace: Path
) -> None:
    """A refused call fires no PostToolUse hook, so nothing ends the turn after it: the
    next response of the main thread is interrupted (flower.core.handoffstop), and the
    handoff goes on; the refused exchange is not carried (a brand-new session). (A next
    response that only answers ends its turn before the interrupt lands: the step is done.)"""
    from flower.core.handoff import HANDOFF_PROMPT

    marker = HANDOFF_PROMPT.split("{", 1)[0][:30]
    flower_env.script = rules(
        (When(kind="main", last_user_contains=marker), Always(handoff_reply())),
        (When(kind="main", contains="改第 8、9、10 个文件"), Always(text("continued"))),
        (
            When(kind="main"),
            sequence(
                tool("Bash", {"command": "echo 1"}, usage=Usage(input_tokens=190_000)),
                tool("Bash", {"command": "echo 2"}),
            ),
        ),
    )
    runtime = make_runtime(handoff=HandoffPolicy(window=200_000))
    spec = AgentSpec("lead", "", allowed_tools=["Bash"], delegate_only=True)
    result = await runtime.run(spec, "改十个文件", step_name="改文件")
    assert result.ok and result.text == "continued" and len(result.retired) == 1
    main = flower_env.main_requests()
    writer = next(i for i, r in enumerate(main) if r.prompt.startswith(marker))
    assert writer == 2  # the first request, the one after the refusal (interrupted), then it
    new = next(r for r in main if r.contains("改第 8、9、10 个文件"))
    assert "echo 1" not in json.dumps(new.messages)


async def test_prompt_too_long_on_the_first_turn_is_an_immediate_degraded_handoff(
    flower_env: FakeAPI, make_runtime: Any, workspace: Path
) -> None:
    def script(request: Request) -> Reply:
        if request.index == 0:
            return text("never", fault=prompt_too_long())
        return text("started over from the handoff")

    flower_env.script = script
    workbench = Workbench(workspace)
    seen: list[Event] = []
    result = await make_runtime(workbench=workbench).run(
        BASH, "a huge task", step_name="big", on_event=seen.append
    )
    assert result.ok and result.text == "started over from the handoff"
    done = [e for e in seen if e.kind == "handoff" and e.payload["phase"] == "done"]
    assert done and done[0].payload["degraded"] is True
    assert len(result.retired) == 1
    assert "a huge task" in flower_env.requests[-1].conversation_text  # the scene
    assert (workbench.notes / "交接-big.md").is_file()


async def test_prompt_too_long_on_a_later_turn_is_compacted_by_the_cli_and_reported(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = rules(
        (When(kind="compaction"), Always(text("<summary>earlier work</summary>"))),
        (
            When(kind="main"),
            sequence(
                tool("Bash", {"command": "echo one"}),
                tool("Bash", {"command": "echo two"}, fault=prompt_too_long(times=1)),
                text("carried on"),
            ),
        ),
    )
    seen: list[Event] = []
    result = await make_runtime().run(BASH, "go", on_event=seen.append)
    assert result.ok and result.text == "carried on"
    assert [e for e in seen if e.kind == "reset"]
    assert result.retired == []


@pytest.mark.parametrize("said", ["use the other file", ""])
async def test_an_interrupt_from_another_thread_resumes_the_same_session(
    flower_env: FakeAPI, make_runtime: Any, said: str
) -> None:
    """004:273: rt.interrupt(text) from another thread; "" interrupts without a word (the
    session is resumed with flower's carry-on note, nothing of the human's)."""
    carry_on = lang.text("runtime.carry_on_note")
    flower_env.script = rules(
        (When(kind="main", contains=said or carry_on), sequence(text("switched files"))),
        (
            When(kind="main"),
            sequence(
                tool("Bash", {"command": "python3 -c 'import time; time.sleep(20)'"}),
                text("resumed without the words it needed"),
            ),
        ),
    )
    runtime = make_runtime()

    def human() -> None:
        flower_env.wait_for(lambda requests: len(requests) >= 1, timeout=30)
        wait_running_below(os.getpid(), "python3", "time.sleep(20)")  # the tool runs now
        runtime.interrupt(said)

    thread = threading.Thread(target=human)
    thread.start()
    started = time.monotonic()
    try:
        result = await runtime.run(BASH, "go")
    finally:
        thread.join()
    assert time.monotonic() - started < 15  # the 20 s tool was cut short
    assert result.ok and result.text == "switched files"
    assert result.attempts == 1 and not result.resumed and result.errors == []
    sessions = {r.headers.get("x-claude-code-session-id") for r in flower_env.main_requests()}
    assert len(sessions) == 1  # the same session, resumed
    last = flower_env.main_requests()[-1]
    if said:
        assert said in last.last_user_text
        assert lang.text("runtime.interrupt_note") in last.last_user_text
    else:
        assert last.last_user_text.strip() == carry_on
