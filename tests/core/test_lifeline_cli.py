"""The Claude Code CLI and what it started die with flower (issue 19, item 2).

`flower once` runs as a user runs it, a subprocess, against the fake API; it is SIGKILLed
while its CLI waits on a Bash tool. Without the lifeline the CLI finishes the tool and sends
one more request (measured: 1 request after the kill, the CLI left running); with it, nothing
reaches the API after the kill and no process of the killed tree is alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from flower.core.agent import AgentSpec
from flower.core.reaper import descendants, parents
from flower.core.runtime import Runtime
from flower.testing import FakeAPI, Request, sequence, text, tool
from tests.cli.conftest import FLOWER, offline_env

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's"),
]

ROOT = Path(__file__).resolve().parents[2]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """Running or sleeping; a zombie (already dead, not yet reaped by init) does not count."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat.rsplit(b")", 1)[1].split()[0] != b"Z"


def marked(marker: str) -> list[int]:
    return [pid for pid in parents() if marker in cmdline(pid) and alive(pid)]


def wait_until(condition: Callable[[], object], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_sigkill_of_flower_kills_its_cli_and_the_tools_it_runs(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    marker = f"lifeline-{os.getpid()}-{time.monotonic_ns()}"
    fake_api.script = sequence(
        tool("Bash", {"command": f"sleep 4; echo {marker}"}), text("slept"), text("again")
    )
    env = {**offline_env(fake_api, claude_home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [*FLOWER, "once", "run the command", "-w", str(workspace)],
        env=env,
        cwd=workspace.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert wait_until(lambda: marked(marker), 120), "the Bash tool never started"
        tree = descendants(proc.pid)
        assert any("claude" in cmdline(pid) for pid in tree)
        proc.kill()
        killed = time.time()
        proc.wait(timeout=10)
        time.sleep(6)  # longer than the tool's sleep: an orphaned CLI would ask again by now
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    after: list[Request] = [r for r in fake_api.requests if r.received_at > killed]
    assert after == [], f"{len(after)} request(s) reached the API after the kill"
    assert [pid for pid in tree if alive(pid)] == []
    assert marked(marker) == []


async def test_the_death_signal_does_not_fire_while_flower_lives(
    flower_env: FakeAPI, workspace: Path
) -> None:
    # PDEATHSIG follows the thread that forked, not the process. The SDK forks from the event
    # loop's thread; were it a worker thread instead (anyio's idle ones exit after 10 s), the
    # CLI would be killed in the middle of this 11 s tool.
    flower_env.script = sequence(tool("Bash", {"command": "sleep 11"}), text("still here"))
    runtime = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        result = await runtime.run(AgentSpec("worker", "", allowed_tools=["Bash"]), "sleep")
    finally:
        runtime.close()
    assert result.ok and result.text == "still here" and result.attempts == 1
    assert len(flower_env.requests) == 2
