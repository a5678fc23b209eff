"""The first word of `flower ...`: help is help, and nothing that looks like a command or an
option starts a paid run by accident (flower.cli.routing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.cli.routing import mistyped
from flower.testing import FakeAPI, starter_cast
from tests.cli.conftest import flower, on_a_terminal

# What flower says in English (issue 36: what a person reads follows --lang; zh is the suite's
# default, and tests/cli/test_lang_cli.py reads the zh help and refusals).
pytestmark = pytest.mark.english


@pytest.fixture
def at_home(cli_env: dict[str, str], tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A user in their home folder, where a stray run would leave .flower/ and runs/."""
    home = tmp_path / "user"
    home.mkdir()
    return {**cli_env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}, home


@pytest.mark.parametrize("args", [[], ["help"], ["-h"], ["--help"], ["h"], ["?"]])
def test_help_in_every_spelling_is_the_help_and_exit_0(
    fake_api: FakeAPI, at_home: tuple[dict[str, str], Path], args: list[str]
) -> None:
    env, home = at_home
    done = flower(*args, env=env, cwd=home)
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout and "Commands" in done.stdout
    assert sorted(p.name for p in home.iterdir()) == []  # no .flower/, no runs/
    assert fake_api.requests == []


def test_help_then_a_command_is_that_commands_help(cli_env: dict[str, str], tmp_path: Path) -> None:
    for args in (["help", "status"], ["status", "-h"]):
        done = flower(*args, env=cli_env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "Usage:" in done.stdout and "status" in done.stdout and "--follow" in done.stdout


@pytest.mark.parametrize(
    ("word", "meant"),
    [("statu", "status"), ("anwser", "answer"), ("—help", "--help"), ("version", "--version")],
)
def test_a_look_alike_off_a_terminal_is_refused_naming_the_command(
    fake_api: FakeAPI, at_home: tuple[dict[str, str], Path], word: str, meant: str
) -> None:
    env, home = at_home
    done = flower(word, env=env, cwd=home)
    assert done.returncode == 2
    said = " ".join(done.stderr.replace("│", " ").split())
    assert f"`python -m flower.cli {meant}` mistyped" in said and "no run was started" in said
    assert f"`python -m flower.cli go {word}`" in said  # how to mean it
    assert sorted(p.name for p in home.iterdir()) == [] and fake_api.requests == []


def test_a_look_alike_on_a_terminal_asks_first_and_no_means_nothing_starts(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    args = ["statu", "-w", str(workspace)]
    with on_a_terminal(*args, env=cli_env, cwd=workspace) as (proc, screen):
        screen.expect("Start a run whose whole ask is 'statu'? [y/N]")
        screen.type("n")
        screen.expect("nothing started; did you mean")
        assert proc.wait(timeout=30) == 2
    assert list(workspace.iterdir()) == [] and fake_api.requests == []


def test_a_look_alike_confirmed_on_a_terminal_is_the_ask(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast()
    args = ["statu", "--timeout", "0", "-w", str(workspace)]
    with on_a_terminal(*args, env=cli_env, cwd=workspace) as (_, screen):
        screen.expect("[y/N]")
        screen.type("y")
        screen.expect("fresh run in")  # then it is ended: the test has seen what it needs


def test_a_sentence_or_go_word_is_an_ask_as_before(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    """Nothing in the way of a real ask: `go WORD` says so explicitly, and a word that is no
    typo of a command (`second` is two letters from `send`) is an ask as it is."""
    for args in (["go", "statu"], ["add a status page"], ["second"], ["refactor"]):
        done = flower(*args, "-w", str(workspace / "nope"), env=cli_env, cwd=workspace)
        assert done.returncode == 2 and "is not a folder" in done.stderr  # reached go itself


@pytest.mark.parametrize(
    ("word", "command", "typo"),
    [
        ("statu", "status", True),  # a letter missing
        ("stauts", "status", True),  # two swapped
        ("anwser", "answer", True),
        ("setpu", "setup", True),
        ("anlyse", "analyze", True),  # two typos in a long command
        ("sent", "send", True),
        ("second", "send", False),  # a word of its own
        ("repo", "report", False),
        ("refactor", "resume", False),
    ],
)
def test_a_typo_is_one_slip_of_the_keyboard_not_a_word_of_its_own(
    word: str, command: str, typo: bool
) -> None:
    assert mistyped(word, command) is typo
