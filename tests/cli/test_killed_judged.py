"""A kill costs no judged round (issue 30, item 2).

Killed while round 1's judge rules, twice: the wake has round 1 judged again, and round 2
still works (with `--rounds 2`, a used-up round would end "not achieved").

Killed after round 1's judge said "not achieved" and before its feedback reached the
coordinator, twice, then the same ask run again. The feedback was only in the killed
process's memory: a wake that told the coordinator to "carry on" heard "the round is done"
(its session ended there), the judge said "not achieved" again, and each kill used up a
round of `--rounds` (bench.chaosbox, seed 46, run 8: "round 3/3", round 2's effects never
written)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench.chaos import ASK, EFFECTS, FEEDBACK, LEDGER, cast
from flower.testing import FakeAPI, Reply, Request
from flower.testing.demo import ROLE_MARKERS
from tests.cli.conftest import flower, start_flower
from tests.json_contract import parse_document

ROUNDS = "3"
HELD_S = 8.0  # a judge's reply held this long: the kill lands while it rules


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


def judging_held(workspace: Path, judged: list[float]) -> Any:
    """The chaos cast, with round 1's rulings held HELD_S seconds (each noted in `judged`)."""
    script = cast(workspace)

    def holding(request: Request) -> Reply:
        reply = script(request)
        ledger = _ledger(workspace)
        ruling = request.agent_id is None and any(
            m in request.system_text for m in ROLE_MARKERS["judge"]
        )
        if ruling and "r1-c" in ledger and "r2-a" not in ledger:  # round 1's judge
            judged.append(time.monotonic())
            return replace(reply, delay=HELD_S)
        return reply

    return holding


def _ledger(workspace: Path) -> str:
    path = workspace / LEDGER
    return path.read_text() if path.is_file() else ""


@pytest.mark.parametrize("lang", ["zh", pytest.param("en", marks=pytest.mark.english)])
def test_kills_while_round_one_is_judged_cost_no_round(
    lang: str, fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    assert cli_env["FLOWER_LANG"] == lang
    judged: list[float] = []
    fake_api.script = judging_held(workspace, judged)
    for kill in (1, 2):
        proc = start_flower(
            ASK, "--timeout", "0", "--rounds", "2", "-w", str(workspace),
            env=cli_env, cwd=workspace.parent,
        )  # fmt: skip
        try:
            held = fake_api.wait_for(lambda _, kill=kill: len(judged) >= kill, 180)
            assert held, "no ruling held"
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)
    fake_api.script = cast(workspace)
    again = flower(
        ASK, "--timeout", "0", "--rounds", "2", "--json", "-w", str(workspace),
        env=cli_env, cwd=workspace.parent,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    summary = parse_document(again.stdout)
    assert summary["status"] == "achieved"
    names = [s["name"] for s in summary["steps"]]
    assert "干活·判定#1" in names and names[-2:] == ["干活#round2", "干活·判定#2"]
    effects = (workspace / LEDGER).read_text().split()
    assert sorted(effects) == sorted(e for round_ in EFFECTS.values() for e in round_)
