"""Questions that fit the terminal: with nobody at one, a question is not waited for unless
the user asked for a wait, and then the line says how to answer it from elsewhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from flower.core.inbox import pending_asks
from flower.testing import FakeAPI
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.cli.conftest import FLOWER, flower, on_a_terminal


def test_off_a_terminal_a_question_is_not_waited_for_and_that_is_said(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    """It waited 30 minutes per question, saying "type your answer and press Enter"."""
    fake_api.script = starter_cast()
    done = flower(DEMO_ASK, "-w", str(workspace), env=cli_env, cwd=workspace.parent, timeout=120)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "stdin is not a terminal, so the agents' questions are not waited for" in said
    assert "pass --timeout SECONDS" in said and "q1 timeout" in said
    assert "type your answer" not in said


@pytest.mark.parametrize(
    ("args", "extra", "hint"),
    [
        (["--timeout", "120"], {}, 'flower answer q1 "..." --run-dir {runs}'),
        ([], {"FLOWER_ANSWER_COMMAND": 'flowerbox answer {id} "..." -r R1'}, "flowerbox answer q1"),
    ],
)
def test_a_question_waited_for_off_a_terminal_says_how_and_flower_answer_answers_it(
    fake_api: FakeAPI,
    cli_env: dict[str, str],
    workspace: Path,
    args: list[str],
    extra: dict[str, str],
    hint: str,
) -> None:
    fake_api.script = starter_cast()
    runs = workspace.parent / "runs"
    out = workspace.parent / "out.txt"
    with out.open("w") as sink:
        proc = subprocess.Popen(
            [*FLOWER, DEMO_ASK, *args, "-w", str(workspace)],
            env={**cli_env, **extra},
            cwd=workspace.parent,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while not pending_asks(runs):
            assert time.monotonic() < deadline and proc.poll() is None, out.read_text()
            time.sleep(0.1)
        time.sleep(0.5)  # the line is printed with the ask
        wanted = f"(answer from another terminal: {hint.format(runs=runs)}"
        assert wanted in out.read_text()
        assert "type your answer" not in out.read_text()
        answered = flower("answer", "q1", "python3", env=cli_env, cwd=workspace.parent)
        assert answered.returncode == 0, answered.stderr
        assert proc.wait(timeout=120) == 0, out.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "q1 answered: python3" in out.read_text()
    assert json.loads((runs / "asks.json").read_text()) == []


def test_a_60_column_terminal_still_shows_what_waits_for_you(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    """Issue 36: on 60 columns the live line was cut before `waiting for you: q1`."""
    fake_api.script = starter_cast()
    args = (DEMO_ASK, "--timeout", "120", "-w", str(workspace))
    with on_a_terminal(*args, env=cli_env, cwd=workspace.parent, columns=60) as (run, screen):
        screen.expect("?? q1")
        screen.pause(2.5)  # the live line redraws each second
        lines = [line for line in screen.text.splitlines() if "· " in line]
        assert any("等你回答:q1" in line for line in lines), screen.text[-2000:]
        screen.type("python3")
        screen.expect("达成 · $", timeout=120)
        assert run.wait(timeout=60) == 0
