"""SIGKILL of `flower "ask"` mid-attempt, then the run continued (issue 19, item 3): the killed
attempt keeps its row in the manifest (tokens, cost, session), the judged round goes on from
where it was, and a budget that spans the wake counts what the killed attempt spent."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from flower.core.lineage import Lineage
from flower.testing import FakeAPI, Reply, Request, When, rules, text, tool
from flower.testing.demo import DEMO_ASK, starter_cast, verdict_reply
from tests.cli.conftest import FLOWER, flower
from tests.json_contract import parse_document

SLOW = "echo $$ > {pidfile}; exec sleep 120"


def kill_in_round_two(fake_api: FakeAPI, env: dict[str, str], workspace: Path) -> None:
    """Run the starter until round 2's worker is busy (round 1 judged "not yet"), then
    SIGKILL flower, and the rest of its process group after it."""
    cast = starter_cast()
    workers: list[str] = []
    pidfile = workspace.parent / "sleeper.pid"
    runs = workspace.parent / "runs"
    slow = SLOW.format(pidfile=pidfile)

    def worker(request: Request) -> Reply:
        if request.agent_id not in workers:
            workers.append(str(request.agent_id))
        if len(workers) < 2:
            return cast(request)  # round 1: write hello.py and run it
        return tool("Bash", {"command": slow}) if not request.tool_results() else text("slept")

    judged: list[int] = []

    def judge(request: Request) -> Reply:
        judged.append(1)
        return verdict_reply("未达成")

    fake_api.script = rules(
        (When(kind="subagent"), worker),
        (When(kind="main", system_contains="你是裁判", contains="设定目标"), cast),
        (When(kind="main", system_contains="你是裁判"), judge),
        (When(), cast),
    )
    proc = subprocess.Popen(
        [*FLOWER, DEMO_ASK, "--timeout", "0", "--rounds", "3", "-w", str(workspace)],
        env=env,
        cwd=workspace.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert fake_api.wait_for(
            lambda reqs: len(workers) >= 2 and pidfile.is_file() and round_two_written(runs), 180
        )
        os.kill(proc.pid, signal.SIGKILL)  # flower first, nothing gets to say goodbye
        proc.wait(timeout=30)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # its CLI too (issue 19, item 2 is elsewhere)
        proc.wait(timeout=30)
        if pidfile.is_file() and (sleeper := pidfile.read_text().strip()).isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(sleeper), signal.SIGKILL)  # the worker's tool, in its own group
    assert proc.returncode == -signal.SIGKILL
    assert len(judged) == 1


def round_two_written(runs: Path) -> bool:
    """Whether the manifest's running row holds both calls of round 2 so far (the
    coordinator's delegation, the worker's first): flower writes a running row in the
    background, and a kill before that write leaves the row behind what was spent (a busy
    CI once killed it at cost 0, and a budget of "half the killed attempt" was then none)."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        running = [r for r in rows_of(runs) if r.get("state") == "running"]
        return bool(running) and running[-1]["usage"]["api_calls"] >= 2
    return False


def rows_of(runs: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((runs / "manifest.json").read_text())
    return rows


def test_a_killed_attempt_keeps_its_row_and_the_round_goes_on(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    runs = workspace.parent / "runs"
    kill_in_round_two(fake_api, cli_env, workspace)
    killed = Lineage(runs, workspace).recall("干活")
    [row] = [r for r in rows_of(runs) if r["step"] == "干活#round2"]
    assert row["state"] == "running" and row["session_id"] == killed
    assert row["usage"]["api_calls"] >= 1 and row["usage"]["input_tokens"] > 0
    assert row["cost_usd"] > 0
    status = flower("status", str(runs), "--json", env=cli_env, cwd=workspace.parent)
    [run] = parse_document(status.stdout)["runs"]
    assert run["state"] == "lost" and run["current"] is None  # its process is gone
    [shown] = [s for s in run["steps"] if s["name"] == "干活#round2"]
    assert shown["state"] == "interrupted"
    assert shown["cost_usd"] == round(row["cost_usd"], 6)  # --json rounds to 1e-6
    analyzed = flower("analyze", str(runs), "--json", env=cli_env, cwd=workspace.parent)
    [seen] = [s for s in parse_document(analyzed.stdout)["steps"] if s["name"] == "干活#round2"]
    assert seen["state"] == "interrupted" and seen["usage"] == row["usage"]

    fake_api.script = starter_cast()
    again = flower(
        "", "--timeout", "0", "--rounds", "3", "--json", "-w", str(workspace),
        env=cli_env, cwd=workspace.parent,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    steps = [s["name"] for s in parse_document(again.stdout)["steps"]]
    assert steps == ["干活#round2", "干活·判定#2"]  # round 2 is still round 2


def test_a_budget_across_the_wake_counts_the_killed_attempt(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    runs = workspace.parent / "runs"
    kill_in_round_two(fake_api, cli_env, workspace)
    rows = rows_of(runs)
    killed = next(r for r in rows if r["state"] == "running")
    finished = sum(r["cost_usd"] for r in rows if r is not killed)
    budget = finished + killed["cost_usd"] / 2  # spent only if the killed attempt counts
    seen = len(fake_api.requests)
    fake_api.script = starter_cast()
    again = flower(
        "", "--timeout", "0", "--budget", f"{budget:.6f}", "--json", "-w", str(workspace),
        env=cli_env, cwd=workspace.parent,
    )  # fmt: skip
    assert again.returncode == 1, again.stderr
    assert "budget" in again.stderr
    assert fake_api.requests[seen:] == []  # not one model call past the budget
