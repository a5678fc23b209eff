"""`flower answer` and `flower send`: a human's words reach a run through its inbox."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from flower.core.inbox import pending_asks, write_asks
from flower.core.rundir import RunDir
from flower.testing import FakeAPI
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.cli.conftest import FLOWER, flower

# What flower says in English (issue 36: what a person reads follows --lang; zh is the suite's
# default, and tests/cli/test_lang_cli.py reads the zh refusals).
pytestmark = pytest.mark.english

ASK = {"id": "q1", "question": "which?", "options": ["a", "b"], "asked_at": 0}


def inbox(run_dir: Path) -> list[dict[str, str]]:
    return [json.loads(p.read_text()) for p in sorted(RunDir(run_dir).inbox.glob("*.json"))]


def test_an_answer_to_a_waiting_question_is_dropped_in_the_inbox(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    write_asks(tmp_path, [ASK])
    answer = ("answer", "q1", "b, please", "--run-dir", str(tmp_path))
    done = flower(*answer, env=cli_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert inbox(tmp_path) == [{"answer": "q1", "text": "b, please"}]


def test_an_unknown_question_id_is_refused_and_drops_nothing(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    write_asks(tmp_path, [ASK])
    done = flower("answer", "q7", "b", "--run-dir", str(tmp_path), env=cli_env, cwd=tmp_path)
    assert done.returncode == 2
    assert "no question q7 is waiting" in done.stderr and "the waiting ones: q1" in done.stderr
    assert not RunDir(tmp_path).inbox.exists()


def test_send_needs_a_run_folder_and_then_drops_a_message(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    refused = flower("send", "hi", "--run-dir", str(tmp_path / "nope"), env=cli_env, cwd=tmp_path)
    assert refused.returncode == 2 and "holds no run" in refused.stderr
    write_asks(tmp_path, [])
    sent = flower("send", "use tabs", "--run-dir", str(tmp_path), env=cli_env, cwd=tmp_path)
    assert sent.returncode == 0, sent.stderr
    assert inbox(tmp_path) == [{"send": "use tabs"}]


def test_a_live_run_waiting_on_its_clarifier_takes_the_answer_and_finishes(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast(ask_human=True)
    runs = workspace.parent / "runs"
    argv = [*FLOWER, DEMO_ASK, "--timeout", "120", "-w", str(workspace), "--run-dir", str(runs)]
    run = subprocess.Popen(
        argv, env=cli_env, cwd=workspace.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 90
        while not pending_asks(runs) and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        [waiting] = pending_asks(runs)
        # A second run in the same run directory is refused and touches nothing (issue 20)
        for second in (["something else", "--timeout", "0", "-w", str(workspace)], ["once", "x"]):
            refused = flower(*second, "--run-dir", str(runs), env=cli_env, cwd=workspace)
            assert refused.returncode == 2, refused.stderr
            assert f"another flower run is going in {runs} (pid {run.pid}" in refused.stderr
            assert "`flower answer ID" in refused.stderr.replace("\n", " ")
        assert pending_asks(runs) == [waiting]  # the first run's question is still there
        answer = ("answer", waiting["id"], "pypy", "--run-dir", str(runs))
        answered = flower(*answer, env=cli_env, cwd=workspace)
        assert answered.returncode == 0, answered.stderr
        _, err = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()  # reaped and its pipes closed, whatever failed above
    assert run.returncode == 0, err.decode()[-3000:]
    shown = [r.result_for("toolu_demo_question") for r in fake_api.requests]
    assert any(result is not None and "pypy" in result.text for result in shown)
    assert pending_asks(runs) == []
