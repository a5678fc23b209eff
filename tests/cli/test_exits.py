"""The one place that maps errors to exit codes: a FlowerError is its message and exit 2,
anything else is a bug and keeps its traceback."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import typer

from flower.cli.exits import Exit, exit_codes
from flower.errors import FlowerError, RunDirError
from flower.testing import PLACEHOLDER_KEY, FakeAPI
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.cli.conftest import FLOWER, on_a_terminal, waiting_for_input


@pytest.mark.english  # its English (issue 36)
def test_a_flower_error_becomes_its_message_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(typer.Exit) as caught, exit_codes():
        raise RunDirError(Path("nowhere"), "no run directory at nowhere: pass --run-dir")
    assert caught.value.exit_code == Exit.USAGE == 2
    assert "error: no run directory at nowhere: pass --run-dir" in capsys.readouterr().err


@pytest.mark.parametrize("bug", [ValueError("a bug"), RuntimeError("a bug"), OSError("a bug")])
def test_any_other_exception_is_not_swallowed(bug: Exception) -> None:
    assert not isinstance(bug, FlowerError)
    with pytest.raises(type(bug), match="a bug"), exit_codes():
        raise bug


def _flower(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`flower ARGS` with a key that is never used (the credentials come before a workflow
    file runs; these files fail before any request)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env["ANTHROPIC_API_KEY"] = PLACEHOLDER_KEY
    return subprocess.run(
        [*FLOWER, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


@pytest.mark.english  # its English (issue 36)
def test_the_cli_shows_a_bugs_traceback_and_a_refusals_message(tmp_path: Path) -> None:
    """A user's workflow file that raises ValueError at import is a bug in that file: the
    traceback shows where; a file that is not there is flower refusing: one line, exit 2."""
    (tmp_path / "broken.py").write_text("raise ValueError('bug in the workflow file')\n")
    bug = _flower(tmp_path, "run", "broken.py")
    assert bug.returncode == 1
    assert "Traceback" in bug.stderr and "bug in the workflow file" in bug.stderr

    refused = _flower(tmp_path, "run", "missing.py")
    assert refused.returncode == 2
    assert "missing.py is not a file" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.parametrize(
    ("lang", "prompt", "said"),
    [
        ("zh", "把它们加进 .git/info/exclude", "已中断"),
        ("en", "add them to .git/info/exclude", "interrupted"),
    ],
)
def test_ctrl_c_at_the_first_prompt_exits_130_in_the_runs_language(
    fake_api: FakeAPI,
    cli_env: dict[str, str],
    workspace: Path,
    lang: str,
    prompt: str,
    said: str,
) -> None:
    """Issue 36: Ctrl+C at a run's first question (keep runs/ out of git status?) exited 1,
    click's "Aborted!", where every other Ctrl+C stop is 130; and that question was English
    under --lang zh."""
    fake_api.script = starter_cast()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
    for command in (["git", "init", "-q"], [*git, "commit", "-q", "--allow-empty", "-m", "0"]):
        subprocess.run(command, cwd=workspace, check=True, capture_output=True)
    args = ("--lang", lang, DEMO_ASK, "-w", str(workspace))
    with on_a_terminal(*args, env=cli_env, cwd=workspace.parent) as (run, screen):
        screen.expect(prompt)
        waiting_for_input(run.pid)  # as a person's Ctrl+C comes: while the prompt waits
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=60) == Exit.INTERRUPTED == 130
        screen.pause(0.5)
    assert said in screen.text and "Aborted" not in screen.text
    assert not fake_api.requests  # nothing started
