"""Cost, exact everywhere (issue 20, item 1): a judged job with a resumed round, a Ctrl+C
interrupt, a SIGTERM and a wake. Every figure flower shows (the live line, the end line,
the JSON summary, the manifest, `status`, `analyze`) must come to what the fake API's own
answers cost, priced from the usage each one reported."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import time
from collections.abc import Set as AbstractSet
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from flower.cli.render import Render
from flower.core.events import Event
from flower.testing import FakeAPI, Reply, Request, Usage, When, rules, text, tool
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.cli.conftest import Screen, flower, on_a_terminal, start_flower
from tests.json_contract import parse_document
from tests.processes import running_below

SLOW = "python3 -c 'import time; time.sleep(60)'"
# Answers with real weight: thousands of output tokens (what a stream's start undercounts)
# and cached input (priced apart), so a figure that misses either is off by cents.
WEIGHT = Usage(output_tokens=3000, cache_read_input_tokens=40_000)
FIGURE = re.compile(r"\$(\d+\.\d{4})")


def weighty_job(api: FakeAPI, slow: tuple[int, ...] = (0, 2)) -> None:
    """The starter cast, every answer weighty. The coordinator delegates whenever its last
    delegation did not come back done; the workers in `slow` (by order: the first and the
    third) run a slow command (the times to interrupt and to stop the run; a test that
    never stops the third worker does not wait a minute for it); the first judge of the
    work says "not yet", so round 2 resumes the coordinator's session."""
    cast = starter_cast(verdict=["未达成", "达成"])

    def coordinator(request: Request) -> Reply:
        said = [m.get("content") for m in request.messages if m.get("role") == "assistant"]
        last = said[-1] if said and isinstance(said[-1], list) else []
        done = [request.result_for(b["id"]) for b in last if b.get("type") == "tool_use"]
        if done and all(r is not None and not r.is_error for r in done):
            return text(f"第 {len(api.agent_ids())} 个 worker 写好了 hello.py。")
        brief = {"description": "写 hello.py", "prompt": "写 hello.py 并运行。"}
        return tool("Agent", {**brief, "subagent_type": "coder", "run_in_background": False})

    def worker(request: Request) -> Reply:
        order = api.agent_ids().index(str(request.agent_id))
        if order in slow and not request.tool_results():
            return tool("Bash", {"command": SLOW})
        return cast(request)

    script = rules(
        (When(kind="subagent"), worker),
        (When(kind="main", system_contains="你是协调者"), coordinator),
        (When(), cast),
    )
    api.script = lambda request: replace(script(request), usage=WEIGHT)


def hold_first_answer(api: FakeAPI, hold: str, seconds: float = 8.0) -> None:
    """Hold the first worker's first answer `seconds`: `think`, its stream open and the model
    still thinking, or `delay`, before the API sends a byte (the times to stop a run in)."""
    script = api.script

    def held(request: Request) -> Reply:
        reply = script(request)
        first = request.kind == "subagent" and len(api.subagent_requests()) == 1
        return replace(reply, **{hold: seconds}) if first else reply

    api.script = held


def held_open(api: FakeAPI, hold: str) -> None:
    """Wait until the first worker's held answer is where `hold` holds it: its stream open
    (`think`: its start has reached the client), or not a byte sent (`delay`: at once)."""
    first = api.subagent_requests()[0]
    assert hold == "delay" or api.wait_for(lambda _: first.usage is not None, 60)


def slow_command_runs(
    screen: Screen, flower: int, before: AbstractSet[int] = frozenset()
) -> set[int]:
    """Wait until a worker's SLOW command runs below `flower` (one not in `before`)."""
    found: set[int] = set()

    def runs() -> bool:
        found.update(running_below(flower, "python3", "time.sleep(60)") - before)
        return bool(found)

    assert screen.wait_until(runs, 120), "the worker's slow command never ran"
    return found


def test_every_cost_a_user_sees_is_what_the_api_answers_cost(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    weighty_job(fake_api)
    ws = workspace.parent

    def workers() -> int:
        return len(fake_api.agent_ids())

    args = (DEMO_ASK, "--timeout", "120", "-w", str(workspace))
    with on_a_terminal(*args, env=cli_env, cwd=workspace.parent) as (run, screen):
        screen.expect("等你回答:q1")
        screen.type("python3")
        assert screen.wait_until(lambda: workers() == 1, 120)
        first = slow_command_runs(screen, run.pid)  # the first worker's
        run.send_signal(signal.SIGINT)  # Ctrl+C: interrupt, then say something
        screen.expect("中断:输入要告诉代理的话")
        screen.type("先别跑那个命令")
        screen.expect("已打断")
        screen.expect("第 2/3 轮")  # judged "not yet": the coordinator's session resumed
        assert screen.wait_until(lambda: workers() == 3, 120)
        slow_command_runs(screen, run.pid, first)  # the third worker's
        run.send_signal(signal.SIGTERM)
        screen.expect("退出码 130")
        assert run.wait(timeout=60) == 130
    before = fake_api.cost()
    live, end = screen.text.rsplit("已停止", 1)  # the end line: 已停止 · $… · 退出码 130
    assert float(FIGURE.findall(end)[0]) == pytest.approx(before, abs=5e-5), end
    assert float(FIGURE.findall(live)[-1]) == pytest.approx(before, abs=5e-5)  # its last state

    log = workspace.parent / "events.jsonl"
    args = ("resume", "--timeout", "0", "--events", str(log), "-w", str(workspace))
    woken = flower(*args, env=cli_env, cwd=ws)
    assert woken.returncode == 0, woken.stderr
    total = fake_api.cost()
    woke = total - before  # what the woken run spent
    assert min(before, woke) > 0.5  # dollars, not fractions of a cent
    live, end = woken.stdout.rsplit("达成", 1)  # 达成 · $woke(连同…共 $total) · 退出码 0
    assert [float(f) for f in FIGURE.findall(end)] == [
        pytest.approx(woke, abs=5e-5),
        pytest.approx(total, abs=5e-5),  # with the run it continues
    ]
    assert float(FIGURE.findall(live)[-1]) == pytest.approx(woke, abs=5e-5)
    replay = Render(Console(file=io.StringIO()))  # another process's view: flowerbox attach
    for line in log.read_text().splitlines():
        replay(Event.from_json(json.loads(line)))
    assert float(FIGURE.findall(replay.status_line())[0]) == pytest.approx(woke, abs=5e-5)

    runs = workspace.parent / "runs"
    rows = json.loads((runs / "manifest.json").read_text())
    assert sum(r["cost_usd"] for r in rows) == pytest.approx(total, abs=1e-6)
    status = parse_document(flower("status", str(runs), "--json", env=cli_env, cwd=ws).stdout)
    assert status["total_cost_usd"] == pytest.approx(total, abs=1e-6)
    each = [run["cost_usd"] for run in status["runs"]]  # oldest first
    assert each == [pytest.approx(before, abs=1e-6), pytest.approx(woke, abs=1e-6)]
    table = flower("status", str(runs), env=cli_env, cwd=ws)
    assert f"总花费:${total:.4f}" in table.stdout
    report = parse_document(flower("analyze", str(runs), "--json", env=cli_env, cwd=ws).stdout)
    assert report["totals"]["cost_usd"] == pytest.approx(total, abs=1e-6)


def test_status_counts_what_the_running_step_has_spent(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    """Mid-step, before the CLI has costed the turn: `status` shows what was spent so far,
    each finished response at its full output count."""
    slow = "python3 -c 'import time; time.sleep(8)'"
    fake_api.script = lambda request: replace(
        text("slept") if request.tool_results() else tool("Bash", {"command": slow}),
        usage=WEIGHT,
    )
    runs = workspace.parent / "runs"
    args = ("once", "sleep a while", "--json", "-w", str(workspace), "--run-dir", str(runs))
    run = start_flower(*args, env=cli_env, cwd=workspace.parent)
    try:
        assert fake_api.wait_for(lambda requests: len(requests) == 1, 60)
        time.sleep(2.0)  # the command runs; the turn has no result yet
        status = flower("status", str(runs), "--json", env=cli_env, cwd=workspace.parent)
        during = fake_api.cost()
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    data = parse_document(status.stdout)
    [shown] = data["runs"]
    assert shown["state"] == "running" and shown["current"]
    assert data["total_cost_usd"] == pytest.approx(during, abs=1e-6) and during > 0.05
    assert run.returncode == 0, err
    assert parse_document(out)["cost_usd"] == pytest.approx(fake_api.cost(), abs=1e-6)
    assert float(FIGURE.findall(err)[-1]) == pytest.approx(fake_api.cost(), abs=5e-5)


def test_after_a_double_ctrl_c_and_a_resume_every_cost_is_what_the_api_served(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    """Issue 36: a run stopped by two Ctrl+C (the second while the first asks for words)
    must record what the API served, and so must the total after its resume (whose third
    worker nothing stops)."""
    weighty_job(fake_api, slow=(0,))
    ws = workspace.parent
    args = (DEMO_ASK, "--timeout", "120", "-w", str(workspace))
    with on_a_terminal(*args, env=cli_env, cwd=ws) as (run, screen):
        screen.expect("等你回答:q1")
        screen.type("python3")
        assert screen.wait_until(lambda: len(fake_api.agent_ids()) == 1, 120)
        slow_command_runs(screen, run.pid)  # the first worker's
        run.send_signal(signal.SIGINT)
        screen.expect("中断:输入要告诉代理的话")
        run.send_signal(signal.SIGINT)  # the second: stop the run
        screen.expect("退出码 130")
        assert run.wait(timeout=60) == 130
    _costs_agree(fake_api, cli_env, workspace, screen.text)


@pytest.mark.parametrize("hold", ["think", "delay"])
def test_a_call_in_flight_at_a_double_ctrl_c_counts_what_the_api_served_of_it(
    hold: str, fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    """Issue 36: stopped while a worker's answer is held, its stream open and the model still
    thinking (`think`: its input is served and billed, and the CLI's own total after the
    interrupt has it), or before the API sent a byte (`delay`: the hang-up drops it, nothing
    is served). Either way the accounts are what the API served, after the stop and the
    resume alike (whose third worker nothing stops)."""
    weighty_job(fake_api, slow=(0,))
    hold_first_answer(fake_api, hold)
    ws = workspace.parent
    args = (DEMO_ASK, "--timeout", "120", "-w", str(workspace))
    with on_a_terminal(*args, env=cli_env, cwd=ws) as (run, screen):
        screen.expect("等你回答:q1")
        screen.type("python3")
        assert screen.wait_until(lambda: len(fake_api.subagent_requests()) == 1, 120)
        held_open(fake_api, hold)
        run.send_signal(signal.SIGINT)
        screen.expect("中断:输入要告诉代理的话")
        run.send_signal(signal.SIGINT)
        screen.expect("退出码 130")
        assert run.wait(timeout=60) == 130
    in_flight = fake_api.subagent_requests()[0]
    assert fake_api.wait_for(lambda _: bool(in_flight.answered), 30)  # the hold is over
    assert (in_flight.usage is not None) == (hold == "think"), in_flight.answered
    _costs_agree(fake_api, cli_env, workspace, screen.text)


def _costs_agree(api: FakeAPI, env: dict[str, str], workspace: Path, screen: str) -> None:
    """The stopped run's figures, then the resumed run's, all to the API's own."""
    ws, runs = workspace.parent, workspace.parent / "runs"
    before = api.cost()
    end = screen.rsplit("已停止", 1)[1]  # the end line, in the suite's zh
    rows = json.loads((runs / "manifest.json").read_text())
    assert sum(r["cost_usd"] for r in rows) == pytest.approx(before, abs=1e-6)
    assert float(FIGURE.findall(end)[0]) == pytest.approx(before, abs=5e-5), end
    woken = flower("resume", "--timeout", "0", "-w", str(workspace), env=env, cwd=ws)
    assert woken.returncode == 0, woken.stderr
    total = api.cost()
    assert total - before > 0.5
    rows = json.loads((runs / "manifest.json").read_text())
    assert sum(r["cost_usd"] for r in rows) == pytest.approx(total, abs=1e-6)
    status = parse_document(flower("status", str(runs), "--json", env=env, cwd=ws).stdout)
    assert status["total_cost_usd"] == pytest.approx(total, abs=1e-6)
    assert f"总花费:${total:.4f}" in flower("status", str(runs), env=env, cwd=ws).stdout
    report = parse_document(flower("analyze", str(runs), "--json", env=env, cwd=ws).stdout)
    assert report["totals"]["cost_usd"] == pytest.approx(total, abs=1e-6)
