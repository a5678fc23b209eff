"""A run killed before its brief was frozen continues (issue 30, item 2): with its recorded
ask, its clarifier's session resumed, by `flower resume` and by `flower go` with no ask alike,
instead of "nothing to resume" / "no ask"."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from flower.testing import FakeAPI, Reply, Request
from flower.testing.demo import DEMO_ASK, ROLE_MARKERS, starter_cast
from tests.cli.conftest import FLOWER, flower
from tests.json_contract import parse_document


def started(options: list[str], env: dict[str, str], workspace: Path) -> subprocess.Popen[bytes]:
    """`flower DEMO_ASK OPTIONS` in the background, in a session of its own (to be killed)."""
    return subprocess.Popen(
        [*FLOWER, DEMO_ASK, *options, "-w", str(workspace)],
        env=env,
        cwd=workspace.parent,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def clarifying(request_system: str) -> bool:
    return any(marker in request_system for marker in ROLE_MARKERS["clarify"])


@pytest.mark.parametrize("continuation", [["resume"], ["go"]])
def test_a_run_killed_while_its_question_waits_goes_on_with_its_ask(
    continuation: list[str], fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast()
    runs = workspace.parent / "runs"
    proc = started(["--timeout", "60"], cli_env, workspace)
    try:  # the clarifier's question waits for a human (asks.json), nobody answers
        assert fake_api.wait_for(lambda _: _pending(runs), 120)
        time.sleep(1.0)  # the question waits (a human takes longer than this)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    [clarifier] = {
        r.headers.get("x-claude-code-session-id")
        for r in fake_api.requests
        if clarifying(r.system_text)
    }
    killed_at = len(fake_api.requests)

    done = flower(
        *continuation, "--timeout", "0", "--json", "-w", str(workspace),
        env=cli_env, cwd=workspace.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert parse_document(done.stdout)["status"] == "achieved"
    after = [r for r in fake_api.requests[killed_at:] if clarifying(r.system_text)]
    # the clarifier's own session goes on (its question and the ask are in it)
    assert after and {r.headers.get("x-claude-code-session-id") for r in after} == {clarifier}
    assert after[0].contains(DEMO_ASK)
    assert (workspace / "hello.py").is_file()


def _pending(runs: Path) -> bool:
    try:
        asks = json.loads((runs / "asks.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(asks)


@pytest.mark.parametrize("continuation", [["resume"], ["go"]])
def test_a_run_killed_before_its_workbench_existed_goes_on_unisolated_outside_git(
    continuation: list[str], fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    """Killed while its first request was in flight (its ask recorded, no workbench yet: seen
    as a run's first 0.7 s): neither workbench tells whether the run isolated its workers, and
    a run of `flower "ask"` does not (--no-isolate is the default), so it goes on unisolated,
    in a folder that is no git repository too (not "isolated workers need a git worktree")."""
    cast = starter_cast()
    held: list[int] = []

    def first_held(request: Request) -> Reply:
        if not held:
            held.append(request.index)
            return replace(cast(request), delay=60.0)
        return cast(request)

    fake_api.script = first_held
    proc = started(["--timeout", "0"], cli_env, workspace)
    try:
        assert fake_api.wait_for(lambda _: bool(held), 120)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    shutil.rmtree(workspace / ".flower", ignore_errors=True)  # as at 0.7 s: not made yet
    assert (workspace.parent / "runs" / "ask-history.json").is_file()

    done = flower(
        *continuation, "--timeout", "0", "--json", "-w", str(workspace),
        env=cli_env, cwd=workspace.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert parse_document(done.stdout)["status"] == "achieved"
    assert (workspace / "hello.py").is_file()


def test_a_question_a_kill_cut_is_asked_again_and_its_answer_reaches_the_model(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    """The kill came while the clarifier's question waited: `flower resume` asks it again
    (asks.json, a question asked after the resume began) rather than resuming the session
    with the call cut, and the answer given then is the call's result the model sees."""
    fake_api.script = starter_cast()
    runs = workspace.parent / "runs"
    proc = started(["--timeout", "60"], cli_env, workspace)
    try:
        assert fake_api.wait_for(lambda _: _pending(runs), 120)
        time.sleep(1.0)  # the question waits (its session stored), nobody answers
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    began = time.time()
    resumed = subprocess.Popen(
        [*FLOWER, "resume", "--timeout", "120", "--json", "-w", str(workspace)],
        env=cli_env,
        cwd=workspace.parent,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _asked_since(runs, began):
            assert resumed.poll() is None, "the resumed run ended without asking again"
            time.sleep(0.2)
        [ask] = json.loads((runs / "asks.json").read_text())
        assert (ask["id"], ask["options"]) == ("q1", ["python3", "pypy"])
        answered = flower(
            "answer", "q1", "python3", "--run-dir", str(runs), env=cli_env, cwd=workspace.parent
        )
        assert answered.returncode == 0, answered.stderr
        out, err = resumed.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(resumed.pid, signal.SIGKILL)
    assert resumed.returncode == 0, err
    assert parse_document(out)["status"] == "achieved"
    shown = [r.result_for("toolu_demo_question") for r in fake_api.requests]
    results = [r.text for r in shown if r is not None]
    assert results and set(results) == {"python3"}  # never shown as cut or unanswered


def _asked_since(runs: Path, moment: float) -> bool:
    try:
        asks = json.loads((runs / "asks.json").read_text())
    except (OSError, ValueError):
        return False
    return any(ask.get("asked_at", 0) >= moment for ask in asks)
