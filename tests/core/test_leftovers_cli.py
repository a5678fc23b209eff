"""A killed run's `claude-resume-*` folder is removed by the next run of the workspace
(issue 19, item 5), and nothing else is: not another workspace's, not a live run's, not a link.

The killed run is a real flower process (Runtime, the real CLI, the fake API) SIGKILLed in the
middle of a session resumed from the store; the next run is `flower once`. Both get a TMPDIR
of the test's own, so the SDK's temp folders land where the test can see them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from claude_agent_sdk import project_key_for_directory

from flower.core.reaper import OWNER_FILE, started
from flower.testing import FakeAPI, sequence, text, tool
from tests.cli.conftest import FLOWER, offline_env
from tests.processes import wait_running_below

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reaper's")

ROOT = Path(__file__).resolve().parents[2]

SLOW = "python3 -c 'import time; time.sleep(60)'"  # the CLI refuses a plain long sleep
RESUMING = """
import asyncio, sys
from flower.core.agent import AgentSpec
from flower.core.runtime import Runtime

async def main() -> None:
    runtime = Runtime(workspace=sys.argv[1], run_dir=sys.argv[2])
    spec = AgentSpec("worker", "", allowed_tools=["Bash"])
    first = await runtime.run(spec, "first")
    await runtime.run(spec, "second", resume=first.session_id)

asyncio.run(main())
"""


def plant(temp: Path, name: str, workspace: Path, owner: str | None) -> Path:
    folder = temp / f"claude-resume-{name}"
    (folder / "projects" / project_key_for_directory(workspace)).mkdir(parents=True)
    if owner is not None:
        (folder / OWNER_FILE).write_text(owner)
    return folder


def resume_folders(temp: Path) -> set[str]:
    return {p.name for p in temp.glob("claude-resume-*")}


def test_the_next_run_removes_a_killed_runs_resume_folder_and_nothing_else(
    fake_api: FakeAPI, claude_home: Path, workspace: Path, tmp_path: Path
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**offline_env(fake_api, claude_home), "PYTHONPATH": str(ROOT), "TMPDIR": str(temp)}
    fake_api.script = sequence(text("first done"), tool("Bash", {"command": SLOW}))
    killed = subprocess.Popen(
        [sys.executable, "-c", RESUMING, str(workspace), str(tmp_path / "runs")],
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        assert fake_api.wait_for(lambda reqs: len(reqs) >= 2, 120)
        wait_running_below(killed.pid, "python3", "time.sleep(60)")  # the resumed Bash tool
        assert len(resume_folders(temp)) == 1
        killed.kill()
        killed.wait(timeout=10)
    finally:
        if killed.poll() is None:
            os.killpg(killed.pid, signal.SIGKILL)
    [left] = resume_folders(temp)
    assert (temp / left / OWNER_FILE).is_file()

    other = tmp_path / "other-ws"
    other.mkdir()
    me = f"{os.getpid()} {started(os.getpid())}"
    foreign = plant(temp, "foreign", other.resolve(), "1 0")  # another workspace's, dead
    live = plant(temp, "live", workspace, me)  # this workspace's, its flower alive
    unowned = plant(temp, "unowned", workspace, None)  # not started through the reaper
    (temp / "claude-resume-link").symlink_to(temp / left)

    fake_api.script = sequence(text("next run"))
    again = subprocess.run(
        [*FLOWER, "once", "hi", "-w", str(workspace), "--run-dir", str(tmp_path / "runs")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert not (temp / left).exists()
    assert foreign.is_dir() and live.is_dir() and unowned.is_dir()
    assert (temp / "claude-resume-link").is_symlink()
