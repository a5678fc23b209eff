"""A kill costs no judged round (issue 30, item 2).

Killed while round 1's judge rules, twice: the wake has round 1 judged again, and round 2
still works (with `--rounds 2`, a used-up round would end "not achieved").

Killed after round 1's judge said "not achieved" and before the coordinator answered its
feedback (its CLI still starting; or the feedback written, the model's reply held), twice,
then the same ask run again. The feedback was only in the killed
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
from flower.testing import FakeAPI, Reply, Request, Script
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


def kill_in_round_two(
    env: dict[str, str], workspace: Path, *, process: int, held: list[float] | None
) -> None:
    """Start the ask; SIGKILL its process group as soon as the `process`-th process of the
    run has recorded round 2 of the work step (the judge's feedback is its prompt), before
    the coordinator's CLI has started; or, given `held`, once the `process`-th reply to the
    feedback is held (the CLI has written the feedback, the model has not answered)."""
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
            if held is not None and len(held) >= process:
                break
            if held is None and len(mine.get("runs", [])) == process and work.get("attempt") == 1:
                break
            time.sleep(0.005)
        else:
            out, err = proc.communicate(timeout=30)
            pytest.fail(f"round 2 never started in process {process}: {out}\n{err}")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def ends_on_feedback(request: Request) -> bool:
    """Whether `request` is the coordinator's and its last message holds the judge's
    feedback."""
    if request.agent_id is not None or not request.messages:
        return False
    last = request.messages[-1]
    said = json.dumps(last.get("content"), ensure_ascii=False)
    return last.get("role") == "user" and any(f in said for f in FEEDBACK)


def answer_held(workspace: Path, held: list[float]) -> Script:
    """The chaos cast, with the coordinator's replies to round 2's feedback held HELD_S
    seconds (each noted in `held`)."""
    script = cast(workspace)

    def holding(request: Request) -> Reply:
        reply = script(request)
        if ends_on_feedback(request) and "r2-a" not in _ledger(workspace):
            held.append(time.monotonic())
            return replace(reply, delay=HELD_S)
        return reply

    return holding


def continued_after_two_kills(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, *, answering: bool
) -> subprocess.CompletedProcess[str]:
    held: list[float] | None = [] if answering else None
    fake_api.script = answer_held(workspace, held) if held is not None else cast(workspace)
    kill_in_round_two(cli_env, workspace, process=1, held=held)
    kill_in_round_two(cli_env, workspace, process=2, held=held)
    fake_api.script = cast(workspace)
    seen = len(fake_api.requests)
    again = flower(
        ASK, "--timeout", "0", "--rounds", ROUNDS, "--json", "-w", str(workspace),
        env=cli_env, cwd=workspace.parent,
    )  # fmt: skip
    woken = fake_api.requests[seen:]
    assert any(ends_on_feedback(r) for r in woken), "the woken coordinator never heard the judge"
    return again


@pytest.mark.parametrize("lang", ["zh", pytest.param("en", marks=pytest.mark.english)])
@pytest.mark.parametrize("answering", [False, True], ids=["cli-starting", "model-answering"])
def test_kills_before_the_coordinator_answered_the_feedback_cost_no_round(
    lang: str, answering: bool, fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    assert cli_env["FLOWER_LANG"] == lang
    again = continued_after_two_kills(fake_api, cli_env, workspace, answering=answering)
    assert again.returncode == 0, again.stderr
    summary = parse_document(again.stdout)
    assert summary["status"] == "achieved"
    # round 2 is still round 2: its work, then the second ruling, and nothing more
    assert [s["name"] for s in summary["steps"]][-2:] == ["干活#round2", "干活·判定#2"]
    effects = (workspace / LEDGER).read_text().split()
    assert sorted(effects) == sorted(e for round_ in EFFECTS.values() for e in round_)


def judging_held(workspace: Path, judged: list[float]) -> Script:
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
