"""`flower "ask"` end to end: the real CLI, the scripted cast, exit codes CI can use."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from flower.core.lineage import Lineage
from flower.testing import FakeAPI
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.cli.conftest import FLOWER, flower, stop_mid_work
from tests.json_contract import parse_document


def test_an_unattended_run_reaches_its_goal_and_says_so_in_json(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast()
    done = flower(
        DEMO_ASK,
        "--timeout",
        "0",
        "--json",
        "-w",
        str(workspace),
        env=cli_env,
        cwd=workspace.parent,
    )
    assert done.returncode == 0, done.stderr
    summary = parse_document(done.stdout)  # stdout carries the JSON only; the events go to stderr
    assert summary["status"] == "achieved" and summary["exit_code"] == 0
    assert summary["verdict"]["state"] == "achieved"
    # Stable ids for scripts, the recorded labels for people.
    assert [(s["step"], s["role"], s["round"]) for s in summary["steps"]] == [
        ("clarify", "step", None),
        ("goal", "step", None),
        ("work", "step", None),
        ("work", "judge", 1),
    ]
    assert [s["name"] for s in summary["steps"]] == ["确认需求", "设定目标", "干活", "干活·判定#1"]
    assert summary["cost_usd"] > 0
    assert (workspace / "hello.py").read_text() == 'print("hello")\n'
    assert "fresh run" in done.stderr and "q1 timeout" in done.stderr


def test_a_goal_not_reached_exits_1(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast(verdict="未达成")
    done = flower(
        DEMO_ASK,
        "--timeout",
        "0",
        "--rounds",
        "2",
        "--json",
        "-w",
        str(workspace),
        env=cli_env,
        cwd=workspace.parent,
    )
    assert done.returncode == 1, done.stderr
    summary = parse_document(done.stdout)
    assert summary["status"] == "not_achieved" and summary["failed_at"] == "work"
    assert [s["name"] for s in summary["steps"]][-2:] == ["干活#round2", "干活·判定#2"]
    assert [(s["role"], s["round"]) for s in summary["steps"]][-2:] == [("step", 2), ("judge", 2)]


def test_an_unreachable_goal_with_nobody_to_ask_exits_3(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast(verdict="无法达成")
    done = flower(
        DEMO_ASK,
        "--timeout",
        "0",
        "--json",
        "-w",
        str(workspace),
        env=cli_env,
        cwd=workspace.parent,
    )
    assert done.returncode == 3, done.stderr
    assert parse_document(done.stdout)["status"] == "needs_human"


def test_a_second_ask_in_the_folder_wakes_the_run(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast()
    first = flower(
        DEMO_ASK, "--timeout", "0", "-w", str(workspace), env=cli_env, cwd=workspace.parent
    )
    assert first.returncode == 0, first.stderr
    again = flower(
        "再打印一行 world",
        "--timeout",
        "0",
        "-w",
        str(workspace),
        env=cli_env,
        cwd=workspace.parent,
    )
    assert again.returncode == 0, again.stderr
    assert "waking the run" in again.stdout and "resuming" in again.stdout
    assert "再打印一行 world" in (workspace / ".flower" / "notes" / "需求.md").read_text()


def test_sigterm_mid_step_then_the_next_ask_resumes_the_same_session(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    stopped_run = stop_mid_work(fake_api, cli_env, workspace)
    assert stopped_run.returncode == 130, stopped_run.stderr
    assert "已停止(SIGTERM)" in stopped_run.stdout  # the suite's zh
    runs = workspace.parent / "runs"
    stopped = Lineage(runs, workspace).recall("干活")
    rows = json.loads((runs / "manifest.json").read_text())
    assert rows[-1]["step"] == "干活" and rows[-1]["error"] == "stopped-from-outside"
    assert rows[-1]["session_id"] == stopped
    fake_api.script = starter_cast()
    again = flower("", "--timeout", "0", "-w", str(workspace), env=cli_env, cwd=workspace.parent)
    assert again.returncode == 0, again.stderr
    boss = [r for r in fake_api.main_requests() if "你是协调者" in r.system_text]
    assert boss[-1].headers.get("x-claude-code-session-id") == stopped  # the same session


@pytest.mark.english  # its English (issue 36)
def test_bad_input_gets_clear_messages_and_exit_2(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    empty = flower("", "--timeout", "0", "-w", str(workspace), env=cli_env, cwd=workspace.parent)
    assert empty.returncode == 2 and "no ask: say what you want done" in empty.stderr
    assert list(workspace.iterdir()) == [] and not (workspace.parent / "runs").exists()
    missing = flower("x", "-w", str(tmp_path / "nope"), env=cli_env, cwd=tmp_path)
    assert missing.returncode == 2 and "is not a folder" in missing.stderr
    isolated = flower("x", "--isolate", "-w", str(workspace), env=cli_env, cwd=workspace.parent)
    assert isolated.returncode == 2 and "git init" in isolated.stderr
    blocker = tmp_path / "runs-file"
    blocker.write_text("")
    held = flower("x", "--run-dir", str(blocker), "-w", str(workspace), env=cli_env, cwd=tmp_path)
    assert held.returncode == 2 and "is a file" in held.stderr
    unknown = flower("x", "--frobnicate", env=cli_env, cwd=tmp_path)
    assert unknown.returncode == 2 and "No such option" in unknown.stderr
    assert fake_api.requests == []


@pytest.mark.english  # its English (issue 36)
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["x", "--timeout", "-5"], "'--timeout'"),
        (["x", "--budget", "-1"], "-1 USD is no budget"),
        (["x", "--budget", "0"], "0 USD is no budget"),
        (["x", "--model", ""], "an empty model name"),
        (["resume", "--budget", "nan"], "nan USD is no budget"),
        (["once", "x", "--budget", "-0.5"], "-0.5 USD is no budget"),
        (["once", "x", "--model", " "], "an empty model name"),
        (["run", "flow.py", "--timeout", "-1"], "'--timeout'"),
        (["once", ""], "an empty prompt: say what the agent should do"),
        (["once", "  "], "an empty prompt: say what the agent should do"),
    ],
)
def test_a_value_flower_cannot_use_is_refused_before_anything(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, args: list[str], said: str
) -> None:
    done = flower(*args, "-w", str(workspace), env=cli_env, cwd=workspace)
    assert done.returncode == 2
    assert said in " ".join(done.stderr.replace("│", " ").split())
    assert list(workspace.iterdir()) == [] and fake_api.requests == []


def test_flower_demo_runs_the_whole_cycle_without_a_key(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env |= {"HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    done = subprocess.run([*FLOWER, "demo"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "达成 · $" in done.stdout and 'hello.py: print("hello")' in done.stdout  # zh
