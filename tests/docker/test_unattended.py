"""`flowerbox "ask"` with nobody at a terminal (issue 36): as `flower` does, it does not wait
for the agents' questions unless --timeout says so; it waited 30 minutes per question, since
flower in the box is always told how answers come (`flowerbox answer`)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from docker import DockerClient  # noqa: TID251 - the test looks for containers left behind

from flower.core.texts.zh import ZH
from flower.testing import FakeAPI
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.docker.e2e import FLOWERBOX, as_user, box_env, user_argv
from tests.docker.test_commands import leftovers

pytestmark = pytest.mark.docker

NOT_WAITED = ZH["launch.nobody_answers"].split("（", 1)[0]  # the e2e runs speak zh


def test_off_a_terminal_a_question_is_not_waited_for_and_that_is_said(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    real_api.script = starter_cast()
    done = subprocess.run(  # a 1800 s wait for q1 would end here, in TimeoutExpired
        user_argv(host_user, [FLOWERBOX, DEMO_ASK], box_env(real_api, host_user)),
        cwd=user_workspace,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert NOT_WAITED in " ".join(done.stderr.split())
    assert "q1 timeout" in done.stdout  # asked, and not answered: nobody was there
    last = done.stderr.strip().splitlines()[-1]  # a CI log ends with the outcome (issue 36)
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}: 完成,退出码 0 · \$\d+\.\d{4}", last), last
    assert not leftovers(docker_client, user_workspace)


def test_off_a_terminal_timeout_waits_and_flowerbox_answer_answers(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    real_api.script = starter_cast()
    env = box_env(real_api, host_user)
    out = user_workspace.parent / "out.txt"
    with out.open("w") as sink:
        proc = subprocess.Popen(
            user_argv(host_user, [FLOWERBOX, DEMO_ASK, "--timeout", "600"], env),
            cwd=user_workspace,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 300
            while "flowerbox answer q1" not in out.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
                time.sleep(1)
            answered = as_user(
                host_user, [FLOWERBOX, "answer", "q1", "pypy"], cwd=user_workspace, env=env
            )
            assert answered.returncode == 0, answered.stderr
            assert proc.wait(timeout=300) == 0, out.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=120)
    said = out.read_text()
    assert NOT_WAITED not in " ".join(said.split())
    assert "q1 answered: pypy" in said
    assert any("pypy" in r.conversation_text for r in real_api.main_requests())
    assert not leftovers(docker_client, user_workspace)
