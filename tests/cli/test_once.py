"""`flower once` as a user runs it: a subprocess, the fake API, exit codes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from flower.testing import Always, FakeAPI, http_error, sequence, text, tool
from tests.cli.conftest import FLOWER, flower, offline_env

# What flower says in English (issue 36: what a person reads follows --lang; zh is the suite's
# default, and tests/cli/test_lang_cli.py reads the zh refusals).
pytestmark = pytest.mark.english


def test_once_writes_and_exits_zero(fake_api: FakeAPI, claude_home: Path, workspace: Path) -> None:
    target = workspace / "note.md"
    fake_api.script = sequence(
        tool("Write", {"file_path": str(target), "content": "# note\n"}), text("wrote note.md")
    )
    done = flower(
        "once",
        "write a note",
        "-w",
        str(workspace),
        env=offline_env(fake_api, claude_home),
        cwd=workspace.parent,
    )
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "# note\n"
    assert "[Write]" in done.stdout and "wrote note.md" in done.stdout
    assert (workspace.parent / "runs" / "manifest.json").is_file()


def test_once_exits_one_when_the_step_fails(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    fake_api.script = Always(text("never", fault=http_error(401)))  # fatal: no retries
    done = flower(
        "once",
        "hi",
        "-w",
        str(workspace),
        env=offline_env(fake_api, claude_home),
        cwd=workspace.parent,
    )
    assert done.returncode == 1
    assert "Invalid API key" in done.stdout  # the event stream
    assert "step failed: Invalid API key" in done.stderr


def test_once_without_credentials_exits_two_with_the_four_lines(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    env = offline_env(fake_api, claude_home)
    del env["ANTHROPIC_API_KEY"]
    done = flower("once", "hi", "-w", str(workspace), env=env, cwd=workspace.parent)
    assert done.returncode == 2
    assert "ANTHROPIC_API_KEY" in done.stderr and "flower setup" in done.stderr
    assert not (workspace.parent / "runs").exists()
    assert fake_api.requests == []


def test_once_with_a_missing_workspace_exits_two(
    fake_api: FakeAPI, claude_home: Path, tmp_path: Path
) -> None:
    done = flower(
        "once",
        "hi",
        "-w",
        str(tmp_path / "nope"),
        env=offline_env(fake_api, claude_home),
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "is not a folder: create it" in done.stderr


def test_unknown_option_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run([*FLOWER, "once", "--frobnicate", "x"], capture_output=True, text=True)
    assert done.returncode == 2 and "No such option" in done.stderr
