"""The terminal, driven through a pty: answer an ask, mail the inbox, ask the oracle,
interrupt with Ctrl+C (the SIGINT a terminal sends) and see the same session resume."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

from flower.core.runtime import Runtime
from flower.testing import FakeAPI, Reply, Request, When, rules, text, tool
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.cli.conftest import on_a_terminal


def slow_then_quick(workspace: Path, slept: list[str]) -> Callable[[Request], Reply]:
    """A worker whose first run is a long command (time to talk to the run, or to press
    Ctrl+C); later ones write hello.py at once. `slept` gets the first one's agent id."""

    def worker(request: Request) -> Reply:
        if not slept and not request.tool_results():
            slept.append(str(request.agent_id))
            return tool("Bash", {"command": "python3 -c 'import time; time.sleep(60)'"})
        if not request.tool_results():
            return tool(
                "Write", {"file_path": f"{workspace}/hello.py", "content": 'print("hello")\n'}
            )
        return text("hello.py 写好了")

    return worker


def test_answer_mail_oracle_and_interrupt_in_one_run(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    slept: list[str] = []
    fake_api.script = rules(
        (
            When(kind="main", system_contains="你是旁路问答"),
            lambda r: text("协调者在等 worker 跑完"),
        ),
        (When(kind="subagent"), slow_then_quick(workspace, slept)),
        (When(), starter_cast()),
    )
    args = (DEMO_ASK, "--timeout", "120", "-w", str(workspace))
    with on_a_terminal(*args, env=cli_env, cwd=workspace.parent) as (proc, screen):
        screen.expect("?? q1: 用哪个 Python 解释器?")
        screen.type("python3")  # answers the pending ask
        screen.expect("q1 answered: python3")
        assert screen.wait_until(lambda: bool(slept), 120)
        screen.pause(1.0)  # the worker's long command is running
        screen.type("另外也打印 world")  # nobody asks: it goes to the inbox
        screen.expect("✉ 你说:另外也打印 world")
        screen.type("?做到哪了")
        screen.expect("旁路问答:协调者在等 worker 跑完")
        proc.send_signal(signal.SIGINT)  # Ctrl+C, to flower alone
        screen.expect("中断:输入要告诉代理的话")
        screen.type("改用 pypy")
        screen.expect("已打断")
        screen.expect("达成 · $")  # the end line, in the suite's zh
        assert proc.wait(timeout=120) == 0
    boss = [r for r in fake_api.main_requests() if "你是协调者" in r.system_text]
    resumed = [r for r in boss if "改用 pypy" in r.conversation_text]
    assert resumed, "the coordinator never heard the interrupt"
    assert {r.headers.get("x-claude-code-session-id") for r in boss} == {
        boss[0].headers.get("x-claude-code-session-id")
    }  # one session throughout: interrupted and resumed, not restarted
    brief = (workspace / ".flower" / "notes" / "需求.md").read_text()
    assert "另外也打印 world" in brief  # the mail was also appended to the brief
    runs = workspace.parent / "runs"
    aside = [row["step"] for row in json.loads((runs / "aside" / "manifest.json").read_text())]
    main_steps = [row["step"] for row in json.loads((runs / "manifest.json").read_text())]
    assert aside == ["旁路问答"] and "旁路问答" not in main_steps  # kept out of the main run


def test_ctrl_c_typed_in_the_terminal_interrupts_without_burning_a_judged_round(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    """Ctrl+C in a real terminal signals its whole foreground process group. The CLI got it
    too and ended its turn by itself before the human said a word: a failed attempt retried
    with the network's resume prompt, or an empty report judged as a round. Now only flower
    gets it; Enter alone resumes the same session telling the agent to carry on."""
    slept: list[str] = []
    worker = slow_then_quick(workspace, slept)
    fake_api.script = rules((When(kind="subagent"), worker), (When(), starter_cast()))
    args = (DEMO_ASK, "--timeout", "120", "-w", str(workspace))
    with on_a_terminal(*args, env=cli_env, cwd=workspace.parent) as (proc, screen):
        screen.expect("?? q1: 用哪个 Python 解释器?")
        screen.type("python3")
        assert screen.wait_until(lambda: bool(slept), 120)
        screen.pause(1.0)  # the worker's long command is running
        os.write(screen.fd, b"\x03")  # Ctrl+C, typed
        screen.expect("中断:输入要告诉代理的话")
        screen.pause(5.0)  # the human reads the hint before pressing Enter
        screen.type("")
        screen.expect("达成 · $")  # the end line, in the suite's zh
        assert proc.wait(timeout=120) == 0
    assert "~ retry" not in screen.text  # no attempt failed
    rows = json.loads((workspace.parent / "runs" / "manifest.json").read_text())
    work = [row for row in rows if row["step"].startswith("干活")]
    assert [row["step"] for row in work] == ["干活", "干活·判定#1"]  # one round, judged once
    assert work[0]["attempts"] == 1 and work[0]["errors"] == []
    boss = [r for r in fake_api.main_requests() if "你是协调者" in r.system_text]
    assert any(Runtime.CARRY_ON_NOTE in r.last_user_text for r in boss)
    assert len({r.headers.get("x-claude-code-session-id") for r in boss}) == 1
