"""Conformance with seed 004, replacing the interaction layer (004_fafb6e9677d1435b.txt).

Each test states one statement of the page as the seed says it, or, where flower keeps a
deviation, as docs/decisions.md ("Seed conformance (issue 22)") records it, on the real CLI
against the fake API. The docstring of each test names the section of the page.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from flower.core.agent import AgentSpec, HandoffPolicy
from flower.core.events import Event
from flower.core.resilience import Resilience
from flower.core.runtime import Runtime
from flower.testing import (
    DEMO_ASK,
    Always,
    FakeAPI,
    Reply,
    Request,
    Usage,
    When,
    http_error,
    rules,
    sequence,
    starter_cast,
    text,
    tool,
)
from tests.cli.conftest import offline_env, on_a_terminal

BASH = AgentSpec("worker", "", allowed_tools=["Bash"])


@pytest.fixture
def runtime(flower_env: FakeAPI, workspace: Path) -> Iterator[Runtime]:
    fast = Resilience(cli_retries=1, base_delay=0.01, max_delay=0.02, probe_interval=0.05)
    rt = Runtime(
        workspace=workspace,
        run_dir=workspace.parent / "runs",
        resilience=fast,
        handoff=HandoffPolicy(window=200_000),
    )
    try:
        yield rt
    finally:
        rt.close()


@pytest.fixture
def health_down_once(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """FLOWER_HEALTH_URL (what flowerbox sets) on a local server: 503 to the first probe,
    200 after, so flower's wait for the endpoint says it is down, then back."""
    answered: list[int] = []

    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answered.append(503 if not answered else 200)
            self.send_response(answered[-1])
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            """Silent."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("FLOWER_HEALTH_URL", f"http://127.0.0.1:{server.server_port}/health")
    try:
        yield answered
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


@pytest.mark.anyio
async def test_every_retry_event_names_its_step_and_attempt(
    flower_env: FakeAPI, runtime: Runtime, health_down_once: list[int]
) -> None:
    """004, "15 значений EventKind": retry (Runtime) carries `step, attempt`, for the CLI's own
    retries, flower's, and the probe's lines while it waits for the endpoint. Two overloads:
    the CLI retries once itself, gives up; flower's layer probes (down, then back) and
    resumes the session."""
    flower_env.script = Always(text("through", fault=http_error(529, times=2)))
    seen: list[Event] = []
    result = await runtime.run(BASH, "go", step_name="取词", on_event=seen.append)
    assert result.ok and result.attempts == 2
    assert health_down_once == [503, 200]
    retries = [e.payload for e in seen if e.kind == "retry"]
    assert [p["source"] for p in retries].count("probe") == 2  # down, then back
    assert {p["source"] for p in retries} == {"cli", "flower", "probe"}
    assert all(p["step"] == "取词" and p["attempt"] == 1 for p in retries)


@pytest.mark.anyio
async def test_the_near_handoff_event_names_its_step(flower_env: FakeAPI, runtime: Runtime) -> None:
    """004, "15 значений EventKind": handoff carries `phase, step, context, window`, in its
    "near" phase too (the warning that the handoff line approaches)."""
    flower_env.script = sequence(
        tool("Bash", {"command": "echo 1"}, usage=Usage(input_tokens=140_000)), text("done")
    )
    seen: list[Event] = []
    result = await runtime.run(BASH, "go", step_name="改文件", on_event=seen.append)
    assert result.ok and result.retired == []  # warned, not handed off
    [near] = [e.payload for e in seen if e.kind == "handoff"]
    assert near["phase"] == "near" and near["step"] == "改文件"
    assert near["context"] >= 140_000 and near["window"] == 200_000


@pytest.mark.parametrize("ctrl_c", [False, True], ids=["waits", "ctrl-c-skips"])
def test_the_terminal_waits_for_a_side_question_before_it_exits(
    fake_api: FakeAPI, claude_home: Path, workspace: Path, ctrl_c: bool
) -> None:
    """004, "Когда менять вообще не надо": the reference terminal waits for the side path
    (the oracle) to finish before it exits. The run ends while its `?` question is still being
    answered: the answer is printed, then the run's status; Ctrl+C skips the wait."""
    slept: list[str] = []

    def worker(request: Request) -> Reply:
        if not request.tool_results():
            slept.append(str(request.agent_id))
            return tool("Bash", {"command": "python3 -c 'import time; time.sleep(4)'"})
        return text("hello.py 写好了")

    fake_api.script = rules(
        (When(kind="main", system_contains="你是旁路问答"), Always(text("还在跑", delay=12))),
        (When(kind="subagent"), worker),
        (When(), starter_cast(ask_human=False)),
    )
    env = offline_env(fake_api, claude_home)
    ask = (DEMO_ASK, "--timeout", "120", "-w", str(workspace))
    with on_a_terminal(*ask, env=env, cwd=workspace.parent) as (proc, screen):
        assert fake_api.wait_for(lambda reqs: bool(slept), 120)
        screen.type("?做到哪了")
        screen.expect("等旁路问答答完再退出")
        if ctrl_c:
            proc.send_signal(signal.SIGINT)
        screen.expect("达成 · $")  # the end line, in the suite's zh
        assert proc.wait(timeout=60) == 0
    answer, status = screen.text.find("旁路问答:还在跑"), screen.text.find("达成 · $")
    if ctrl_c:
        assert answer == -1 and "中断" not in screen.text  # no interrupt prompt either
    else:
        assert 0 <= answer < status
