"""An attached run on a terminal (issue 21): flower in the box has no terminal, so its
question says the `flowerbox answer` command that works on the host, and a line typed into
flowerbox's own terminal answers it (it was printed to the user's shell after the run)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from docker import DockerClient  # noqa: TID251 - the test looks for containers left behind

from flower.core.texts.zh import ZH
from flower.testing import FakeAPI, Reply, Request, text, tool
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.cli.conftest import on_a_terminal
from tests.docker.e2e import REAL
from tests.docker.test_commands import leftovers
from tests.flowerbox.conftest import wait_for

pytestmark = pytest.mark.docker


def test_a_line_typed_into_an_attached_run_answers_its_question(
    real_api: FakeAPI, flowerbox_image: str, docker_client: DockerClient, tmp_path: Path
) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
    for command in (["git", "init", "-q"], [*git, "commit", "-q", "--allow-empty", "-m", "0"]):
        subprocess.run(command, cwd=ws, check=True, capture_output=True)
    real_api.script = starter_cast()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "FLOWER"))}
    env |= {
        "ANTHROPIC_API_KEY": REAL,
        "ANTHROPIC_BASE_URL": real_api.url,
        "FLOWERBOX_IMAGE": flowerbox_image,
        "FLOWER_LANG": "zh",
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config"),
    }
    # no --timeout: flower in the box has no terminal, but it is told answers come from the host
    program = [sys.executable, "-m", "flowerbox"]
    with on_a_terminal(
        DEMO_ASK, "-w", str(ws), env=env, cwd=ws, program=program, stop=signal.SIGTERM
    ) as (proc, screen):  # SIGTERM: flowerbox stops its box and removes the containers
        screen.expect(ZH["launch.typed_answers"].split("（", 1)[0], timeout=300)
        screen.expect("?? q1: 用哪个 Python 解释器?", timeout=300)
        screen.expect('(answer from another terminal: flowerbox answer q1 "..." -r ')
        screen.type("pypy")
        screen.expect("q1 answered: pypy")
        screen.expect("达成 · $", timeout=300)  # the end line (zh)
        assert proc.wait(timeout=120) == 0
    assert "type your answer" not in screen.text
    assert any("pypy" in r.conversation_text for r in real_api.main_requests())  # the answer
    assert not leftovers(docker_client, ws)


def test_an_attached_run_whose_flowerbox_was_killed_forwards_nothing_more(
    real_api: FakeAPI, flowerbox_image: str, docker_client: DockerClient, tmp_path: Path
) -> None:
    """The attached `flowerbox` holds its gateway's lease as a detached run's keeper does:
    SIGKILLed while the model holds its request (nobody kills the box: the run is `lost`
    until `flowerbox stop`), the held answer comes, the CLI asks again, and nothing of it
    reaches the API (issue 30)."""
    ws = tmp_path / "project"
    ws.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True, capture_output=True)
    held: list[int] = []

    def script(request: Request) -> Reply:
        if request.tool_results():
            return text("echoed")
        held.append(request.index)
        return replace(tool("Bash", {"command": "echo lease"}), delay=8.0)

    real_api.script = script
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "FLOWER"))}
    env |= {
        "ANTHROPIC_API_KEY": REAL,
        "ANTHROPIC_BASE_URL": real_api.url,
        "FLOWERBOX_IMAGE": flowerbox_image,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }
    flowerbox = subprocess.Popen(
        [sys.executable, "-m", "flowerbox", "once", "echo lease", "-w", str(ws)],
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert real_api.wait_for(lambda _: bool(held), 300)
        os.killpg(flowerbox.pid, signal.SIGKILL)
        flowerbox.wait(timeout=30)
        killed = time.time()

        def late() -> list[int]:
            return [r.index for r in real_api.requests if r.received_at > killed]

        def refused() -> bool:
            found = home.glob(".local/state/flowerbox/runs/*/gateway/requests.jsonl")
            return any("keeper is gone" in path.read_text() for path in found)

        wait_for(lambda: refused() or bool(late()), 60)  # asked after the held answer
        time.sleep(3.0)  # and retried
        assert late() == []
        assert refused()
    finally:
        label = f"dev.flower.box.workspace={ws}"
        for container in docker_client.containers.list(all=True, filters={"label": label}):
            container.remove(force=True)
