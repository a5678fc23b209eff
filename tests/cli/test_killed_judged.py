"""A kill between two judged rounds costs no round (issue 30, item 2): SIGKILL `flower "ask"`
after round 1's judge said "not achieved" and before its feedback reached the coordinator,
twice, then run the same ask again. The feedback was only in the killed process's memory: a
wake that told the coordinator to "carry on" heard "the round is done" (its session ended
there), the judge said "not achieved" again, and each kill used up a round of `--rounds`
(bench.chaosbox, seed 46, run 8: "round 3/3", round 2's effects never written)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from bench.chaos import ASK, EFFECTS, FEEDBACK, LEDGER, cast
from flower.testing import FakeAPI
from tests.cli.conftest import flower, start_flower
from tests.json_contract import parse_document

ROUNDS = "3"


def progress_of(runs: Path) -> dict[str, Any]:
    """This workspace's entry of progress.json ({} before it is written or mid-replace)."""
    try:
        found = json.loads((runs / "progress.json").read_text())
    except (OSError, ValueError):
        return {}
    [mine] = found.get("workspaces", {}).values() or [{}]
    return mine if isinstance(mine, dict) else {}


def kill_as_round_two_starts(env: dict[str, str], workspace: Path, *, process: int) -> None:
    """Start the ask; SIGKILL its process group as soon as the `process`-th process of the
    run has recorded round 2 of the work step (the judge's feedback is its prompt), before
    the coordinator's CLI has started."""
    runs = workspace.parent / "runs"
    proc = start_flower(
        ASK, "--timeout", "0", "--rounds", ROUNDS, "-w", str(workspace),
        env=env, cwd=workspace.parent,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            mine = progress_of(runs)
            work = mine.get("steps", {}).get("干活", {})
            if len(mine.get("runs", [])) == process and work.get("attempt") == 1:
                break
            time.sleep(0.005)
        else:
            out, err = proc.communicate(timeout=30)
            pytest.fail(f"round 2 never started in process {process}: {out}\n{err}")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def shown_feedback(fake_api: FakeAPI, since: int) -> bool:
    """Whether a coordinator request after request `since` ended on the judge's feedback."""
    for request in fake_api.requests[since:]:
        if request.agent_id is not None or not request.messages:
            continue
        last = request.messages[-1]
        said = json.dumps(last.get("content"), ensure_ascii=False)
        if last.get("role") == "user" and any(f in said for f in FEEDBACK):
            return True
    return False


def continued_after_two_kills(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> subprocess.CompletedProcess[str]:
    fake_api.script = cast(workspace)
    kill_as_round_two_starts(cli_env, workspace, process=1)
    kill_as_round_two_starts(cli_env, workspace, process=2)
    seen = len(fake_api.requests)
    again = flower(
        ASK, "--timeout", "0", "--rounds", ROUNDS, "--json", "-w", str(workspace),
        env=cli_env, cwd=workspace.parent,
    )  # fmt: skip
    assert shown_feedback(fake_api, seen), "the woken coordinator never heard the judge"
    return again


@pytest.mark.parametrize("lang", ["zh", pytest.param("en", marks=pytest.mark.english)])
def test_kills_before_the_feedback_reached_the_coordinator_cost_no_round(
    lang: str, fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    assert cli_env["FLOWER_LANG"] == lang
    again = continued_after_two_kills(fake_api, cli_env, workspace)
    assert again.returncode == 0, again.stderr
    summary = parse_document(again.stdout)
    assert summary["status"] == "achieved"
    # round 2 is still round 2: its work, then the second ruling, and nothing more
    assert [s["name"] for s in summary["steps"]][-2:] == ["干活#round2", "干活·判定#2"]
    effects = (workspace / LEDGER).read_text().split()
    assert sorted(effects) == sorted(e for round_ in EFFECTS.values() for e in round_)
