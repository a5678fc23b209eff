"""English by default, Chinese available: the real CLI against the fake model, in both
languages, and a run that changes language half-way."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from flower.core.lineage import Lineage
from flower.testing import DEMO_ASKS, FakeAPI, When, rules, starter_cast
from tests.cli.conftest import flower, on_a_terminal, stop_mid_work
from tests.cli.test_interactive import slow_then_quick

CJK = re.compile(r"[\u4e00-\u9fff]")
# The documents' file names are the same in both languages (docs/documents.md): the model
# sees them in the workbench index.
FILE_NAMES = re.compile(r"需求\.md|目标\.md|问答记录\.md")
LOCALE = ("LC_ALL", "LC_MESSAGES", "LANG", "FLOWER_LANG")


def locale_env(env: dict[str, str], **values: str) -> dict[str, str]:
    """`env` with no language setting of its own but `values`."""
    return {**{k: v for k, v in env.items() if k not in LOCALE}, **values}


def chinese_lines(text: str) -> list[str]:
    """The lines of `text` with Chinese in them, the documents' file names aside."""
    return sorted({line for line in text.split("\n") if CJK.search(FILE_NAMES.sub("", line))})


def shown(api: FakeAPI) -> str:
    """Everything flower showed the model in the main sessions and the subagents."""
    return "\n".join(r.system_text + "\n" + r.conversation_text for r in api.requests)


def test_a_whole_ask_in_english_by_default(
    fake_api: FakeAPI,
    cli_env: dict[str, str],
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No FLOWER_LANG and the C locale: the model is shown English, the lines printed are
    English, the JSON document is the one the zh run prints."""
    monkeypatch.setenv("FLOWER_LANG", "en")  # the fake model answers in English
    fake_api.script = starter_cast()
    env = locale_env(cli_env, LANG="C")
    ask = DEMO_ASKS["en"]
    done = flower(ask, "--timeout", "0", "-w", str(workspace), "--json", env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    seen = shown(fake_api)
    assert "You are the clarifier" in seen and "You are the coordinator" in seen
    assert chinese_lines(seen) == []
    assert chinese_lines(done.stderr) == []
    document = json.loads(done.stdout)
    assert [s["step"] for s in document["steps"]] == ["clarify", "goal", "work", "work"]
    assert [s["name"] for s in document["steps"]] == ["确认需求", "设定目标", "干活", "干活·判定#1"]
    brief = (workspace / ".flower" / "notes" / "需求.md").read_text()
    assert brief.startswith("# Brief\n") and "## Acceptance" in brief
    plain = flower(ask, "--new", "--timeout", "0", "-w", str(workspace), env=env, cwd=workspace)
    assert plain.returncode == 0, plain.stderr
    assert "work (3/3)" in plain.stdout and chinese_lines(plain.stdout) == []


def test_a_chinese_locale_speaks_the_seeds_language(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast()  # FLOWER_LANG=zh in this process: it answers in zh
    env = locale_env(cli_env, LANG="zh_CN.UTF-8")
    done = flower(
        "写个脚本", "--clarify-only", "--timeout", "0", "-w", str(workspace), env=env, cwd=workspace
    )
    assert done.returncode == 0, done.stderr
    assert "你是澄清者" in fake_api.requests[0].system_text
    assert (workspace / ".flower" / "notes" / "需求.md").read_text().startswith("# 需求\n")


@pytest.mark.parametrize("where", [["--lang", "fr", "status"], ["status", "--lang=fr"]])
def test_an_unknown_language_is_refused_with_the_fix(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, where: list[str]
) -> None:
    done = flower(*where, env=cli_env, cwd=workspace)
    assert done.returncode == 2 and "pass --lang en or --lang zh" in done.stderr
    bad_env = flower("x", env={**cli_env, "FLOWER_LANG": "fr"}, cwd=workspace)
    assert bad_env.returncode == 2 and "FLOWER_LANG is 'fr'" in bad_env.stderr
    assert fake_api.requests == [] and list(workspace.iterdir()) == []


def test_a_run_started_in_chinese_resumes_in_english(
    fake_api: FakeAPI,
    cli_env: dict[str, str],
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stopped mid-work in zh, continued with `--lang en`: the same session of the work step
    goes on, the judge rules in English, the labels on disk are the ones of the zh run."""
    stopped = stop_mid_work(fake_api, cli_env, workspace)
    assert stopped.returncode == 130, stopped.stderr
    runs = workspace.parent / "runs"
    session = Lineage(runs, workspace).recall("干活")
    monkeypatch.setenv("FLOWER_LANG", "en")
    fake_api.script = starter_cast()
    before = len(fake_api.requests)
    again = flower(
        "",
        "--timeout",
        "0",
        "-w",
        str(workspace),
        "--lang",
        "en",
        env=cli_env,
        cwd=workspace.parent,
    )
    assert again.returncode == 0, again.stderr
    later = fake_api.requests[before:]
    # The work step's session goes on (the CLI keeps a resumed session's system prompt, so
    # its rules stay the zh ones it started with); new sessions and prompts are English.
    boss = [r for r in later if r.headers.get("x-claude-code-session-id") == session]
    assert boss and boss[0].kind == "main"
    assert any("You are the judge" in r.system_text for r in later)
    assert not any("clarifier" in r.system_text or "澄清者" in r.system_text for r in later)
    assert "resuming clarify, goal, work" in again.stdout and "work (3/3)" in again.stdout
    steps = [row["step"] for row in json.loads((runs / "manifest.json").read_text())]
    assert steps[-1] == "干活·判定#1" and "work" not in steps


def test_a_run_started_in_english_resumes_in_chinese(
    fake_api: FakeAPI,
    cli_env: dict[str, str],
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The brief frozen in English (需求.md with English headings) is found and read by a zh
    run, which goes on without clarifying again."""
    monkeypatch.setenv("FLOWER_LANG", "en")
    fake_api.script = starter_cast()
    env = locale_env(cli_env)
    args = ("--timeout", "0", "-w", str(workspace))
    first = flower(DEMO_ASKS["en"], "--clarify-only", *args, env=env, cwd=workspace)
    assert first.returncode == 0, first.stderr
    assert "## Acceptance" in (workspace / ".flower" / "notes" / "需求.md").read_text()
    monkeypatch.setenv("FLOWER_LANG", "zh")
    fake_api.script = starter_cast()
    before = len(fake_api.requests)
    again = flower("--lang", "zh", "", *args, env=env, cwd=workspace)
    assert again.returncode == 0, again.stderr
    later = fake_api.requests[before:]
    assert not any("澄清者" in r.system_text or "clarifier" in r.system_text for r in later)
    assert any("你是协调者" in r.system_text for r in later)
    goal_prompt = next(r for r in later if "你是裁判" in r.system_text).conversation_text
    assert "A Python script hello.py that prints hello" in goal_prompt  # the English brief


def test_the_ctrl_c_prompt_is_english(
    fake_api: FakeAPI,
    cli_env: dict[str, str],
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLOWER_LANG", "en")
    slept: list[str] = []
    worker = slow_then_quick(workspace, slept)
    fake_api.script = rules((When(kind="subagent"), worker), (When(), starter_cast()))
    args = (DEMO_ASKS["en"], "--timeout", "120", "-w", str(workspace))
    env = locale_env(cli_env)
    with on_a_terminal(*args, env=env, cwd=workspace.parent) as (proc, screen):
        screen.expect("?? q1: Which Python interpreter?")
        screen.type("python3")
        assert screen.wait_until(lambda: bool(slept), 120)
        screen.pause(1.0)
        os.write(screen.fd, b"\x03")  # Ctrl+C, typed
        screen.expect("Interrupted: type what to tell the agent")
        screen.type("")
        screen.expect("Interrupted; the agent carries on in the same session.")
        screen.expect("achieved")
        assert proc.wait(timeout=120) == 0


def test_status_and_analyze_in_english_name_the_steps_in_english_the_seeds_beside(
    fake_api: FakeAPI,
    cli_env: dict[str, str],
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 36: English showed the seeds' Chinese step names in `status` and `analyze`."""
    monkeypatch.setenv("FLOWER_LANG", "en")  # the fake model answers in English
    fake_api.script = starter_cast()
    env = locale_env(cli_env, FLOWER_LANG="en")
    done = flower(DEMO_ASKS["en"], "--timeout", "0", "-w", str(workspace), env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    runs = str(workspace / "runs")
    for command in ("status", "analyze"):
        english = flower(command, runs, env=env, cwd=workspace).stdout
        for name in ("clarify (确认需求)", "goal (设定目标)", "work (干活)", "work·judge#1 (干活)"):
            assert name in english, (command, english)
        chinese = flower("--lang", "zh", command, runs, env=env, cwd=workspace).stdout
        assert "干活·判定#1" in chinese and "(干活)" not in chinese, (command, chinese)
