"""Continuing a stopped run (issue 19, item 1): `flower resume`, or the same ask again, picks
the run up where it was (the frozen goal and the brief untouched, the coordinator told
nothing new); a genuinely new ask amends the run and says so. The real CLI, the scripted
cast, a run stopped mid-work by SIGTERM."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from flower.testing import DEMO_ASK, FakeAPI, Request, When, rules, starter_cast, text
from flower.testing.demo import GOAL_MARKERS, ROLE_MARKERS
from flower.testing.script import Always
from tests.cli.conftest import flower, start_flower, stop_mid_work
from tests.json_contract import parse_document

WAKE_WORDS = "人在唤醒这次运行时补充了"  # what the coordinator is told of a new ask on a wake
NOTES = Path(".flower") / "notes"


def _stopped_mid_work(fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path) -> None:
    stopped = stop_mid_work(fake_api, cli_env, workspace)
    assert stopped.returncode == 130, stopped.stderr
    assert "在这里运行 `flower resume` 可继续" in stopped.stdout  # the suite's zh


@pytest.mark.parametrize("how", ["resume", "the same ask"])
def test_continuing_redoes_nothing_and_amends_nothing(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, how: str
) -> None:
    _stopped_mid_work(fake_api, cli_env, workspace)
    bare = flower(env=cli_env, cwd=workspace)  # `flower` alone, in the folder
    assert "This folder holds an unfinished run: `flower resume` continues it." in bare.stdout
    goal = (workspace / NOTES / "目标.md").read_bytes()
    brief = (workspace / NOTES / "需求.md").read_bytes()
    before = len(fake_api.requests)
    fake_api.script = starter_cast()
    again = ["resume"] if how == "resume" else [f"  {DEMO_ASK} "]  # spacing is not a new ask
    done = flower(
        *again, "--timeout", "0", "--json", "-w", str(workspace), env=cli_env, cwd=workspace.parent
    )
    assert done.returncode == 0, done.stderr
    summary = parse_document(done.stdout)
    assert summary["status"] == "achieved"
    assert summary["command"] == ("flower resume" if how == "resume" else "flower go")
    assert "goal" not in [step["step"] for step in summary["steps"]]  # not set again
    assert (workspace / NOTES / "目标.md").read_bytes() == goal  # byte for byte
    assert (workspace / NOTES / "需求.md").read_bytes() == brief  # not amended with itself
    later = fake_api.requests[before:]
    assert later and not any(r.contains(WAKE_WORDS) for r in later)
    # 000:203: the complete brief on disk skips the clarify step: the clarifier is not asked
    clarifier = ROLE_MARKERS["clarify"]
    assert not any(marker in r.system_text for r in later for marker in clarifier)
    if how == "the same ask":
        assert "the same ask as before, so nothing is added" in done.stderr


def test_a_new_ask_amends_the_run_and_says_so(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    _stopped_mid_work(fake_api, cli_env, workspace)
    fake_api.script = starter_cast()
    new_ask = ["再打印一行 world", "--timeout", "0", "--json", "-w", str(workspace)]
    done = flower(*new_ask, env=cli_env, cwd=workspace.parent)
    assert done.returncode == 0, done.stderr
    assert "a new ask: it is added to the brief" in done.stderr
    assert "再打印一行 world" in (workspace / NOTES / "需求.md").read_text()
    steps = [step["step"] for step in parse_document(done.stdout)["steps"]]
    assert "goal" in steps  # the goal is set again from the amended brief
    assert any(r.contains(WAKE_WORDS) for r in fake_api.main_requests())
    # and that ask, given again, is no newer than the first time
    again = flower(*new_ask, env=cli_env, cwd=workspace.parent)
    assert again.returncode == 0, again.stderr
    assert "the same ask as before" in again.stderr
    assert "goal" not in [step["step"] for step in parse_document(again.stdout)["steps"]]


@pytest.mark.english  # its English (issue 36)
def test_resume_with_nothing_to_resume_says_so(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    assert "This folder holds an unfinished run" not in flower(env=cli_env, cwd=workspace).stdout
    done = flower("resume", "-w", str(workspace), env=cli_env, cwd=workspace.parent)
    assert done.returncode == 2
    assert "nothing to resume in" in done.stderr and 'flower "ask"' in done.stderr
    refused = flower("resume", "--json", "-w", str(workspace), env=cli_env, cwd=workspace.parent)
    assert refused.returncode == 2
    document = parse_document(refused.stdout)
    assert document["command"] == "flower resume" and document["error"]["kind"] == "usage"
    assert not (workspace / ".flower").exists() and not (workspace.parent / "runs").exists()


NEW_WORDS = "再打印一行 world"
NEW_GOAL = """## 目标
hello.py 打印 hello,再打印一行 world

## 验收清单
- python3 hello.py 的输出是 hello 和 world 两行"""
SETS_THE_GOAL = When(
    kind="main", system_contains=ROLE_MARKERS["judge"][0], contains=GOAL_MARKERS[0]
)


def _goal_requests(requests: list[Request]) -> list[Request]:
    return [r for r in requests if SETS_THE_GOAL.matches(r)]


def _stop_a_wake_during_the_goal_reset(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    """A run achieved, then woken with NEW_WORDS and SIGTERMed while the judge sets the goal
    again from them (its reply is held back until after the stop)."""
    fake_api.script = starter_cast()
    first = flower(DEMO_ASK, "--timeout", "0", "-w", str(workspace), env=cli_env, cwd=workspace)
    assert first.returncode == 0, first.stderr
    before = len(fake_api.requests)
    fake_api.script = rules(
        (SETS_THE_GOAL, Always(text(NEW_GOAL, delay=30))), (When(), starter_cast())
    )
    woken = start_flower(
        NEW_WORDS, "--timeout", "0", "-w", str(workspace), env=cli_env, cwd=workspace
    )
    try:
        assert fake_api.wait_for(lambda reqs: bool(_goal_requests(reqs[before:])), 120)
        woken.send_signal(signal.SIGTERM)
        _, err = woken.communicate(timeout=60)
    finally:
        if woken.poll() is None:
            os.killpg(woken.pid, signal.SIGKILL)
    assert woken.returncode == 130, err
    assert (workspace / NOTES / "目标.md").read_text().count("world") == 0  # still the old goal


CONTINUATIONS = {
    "flower resume": ["resume"],
    "the same words again": [NEW_WORDS],
    "flowerbox resume (go --continue)": [NEW_WORDS, "--continue"],
}


@pytest.mark.parametrize("how", list(CONTINUATIONS))
def test_a_wake_stopped_during_the_goal_reset_still_reaches_goal_and_coordinator(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, how: str
) -> None:
    """000:305: the wake's words land in the brief, the goal and the coordinator, whatever
    stopped the wake and however the run is continued; the judge rules on the new goal."""
    _stop_a_wake_during_the_goal_reset(fake_api, cli_env, workspace)
    before = len(fake_api.requests)
    fake_api.script = rules((SETS_THE_GOAL, Always(text(NEW_GOAL))), (When(), starter_cast()))
    done = flower(
        *CONTINUATIONS[how], "--timeout", "0", "-w", str(workspace), env=cli_env, cwd=workspace
    )
    assert done.returncode == 0, done.stderr
    assert "an earlier wake stopped before its words reached" in done.stdout
    assert "could not be delivered" not in done.stdout  # no git here, no isolated worker
    later = fake_api.requests[before:]
    assert _goal_requests(later)  # the goal was set again ...
    assert "world" in (workspace / NOTES / "目标.md").read_text()
    judged = [
        r
        for r in later
        if r.kind == "main"
        and ROLE_MARKERS["judge"][0] in r.system_text
        and r not in _goal_requests(later)
    ]
    assert judged and all(
        "再打印一行 world" in r.last_user_text for r in judged
    )  # ... and ruled on
    coordinator = [r for r in later if ROLE_MARKERS["coordinator"][0] in r.system_text]
    assert any(r.contains(WAKE_WORDS) and r.contains(NEW_WORDS) for r in coordinator)
    assert (workspace / NOTES / "需求.md").read_text().count(NEW_WORDS) == 1
    assert not (workspace / "runs" / "wake.json").exists()  # delivered: nothing pending
