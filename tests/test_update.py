"""The automatic update's decision table, and that maybe_update never runs pip in a test."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from flower.update import INTERVAL, PACKAGE, cache_dir, maybe_update, should_update, update_command

NOW = 1_800_000_000.0
PIP = [sys.executable, "-m", "pip", "install", "--upgrade", "--quiet", PACKAGE]


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """A source root without .git: what a pip-installed flower looks like to the decision."""
    root = tmp_path / "site"
    root.mkdir()
    return root


@pytest.fixture
def stamp(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "flower" / "last-update"


def _stamped(stamp: Path, age: float) -> Path:
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.touch()
    os.utime(stamp, (NOW - age, NOW - age))
    return stamp


def test_a_git_checkout_never_updates_whatever_the_switch_says(tmp_path: Path, stamp: Path) -> None:
    (tmp_path / ".git").mkdir()
    for env in ({}, {"FLOWER_NO_UPDATE": ""}, {"FLOWER_NO_UPDATE": "1"}):
        due, why = should_update(NOW, env, tmp_path, stamp)
        assert (due, why) == (False, f"running from the git checkout {tmp_path}")


def test_a_worktree_checkout_counts_too(tmp_path: Path, stamp: Path) -> None:
    (tmp_path / ".git").write_text("gitdir: /elsewhere\n")  # git worktree add
    assert should_update(NOW, {}, tmp_path, stamp)[0] is False


@pytest.mark.parametrize("value", ["1", "0", "no", "false", " "])
def test_any_non_empty_no_update_disables(value: str, installed: Path, stamp: Path) -> None:
    assert should_update(NOW, {"FLOWER_NO_UPDATE": value}, installed, stamp) == (
        False,
        "FLOWER_NO_UPDATE is set",
    )


def test_an_empty_no_update_counts_as_unset(installed: Path, stamp: Path) -> None:
    assert should_update(NOW, {"FLOWER_NO_UPDATE": ""}, installed, stamp) == (True, "never checked")


def test_at_most_once_a_day(installed: Path, stamp: Path) -> None:
    _stamped(stamp, INTERVAL - 60)
    due, why = should_update(NOW, {}, installed, stamp)
    assert not due and "at most once a day" in why
    _stamped(stamp, INTERVAL + 60)
    assert should_update(NOW, {}, installed, stamp) == (True, "last checked 24.0 h ago")


def test_a_stamp_from_the_future_is_due(installed: Path, stamp: Path) -> None:
    _stamped(stamp, -3600)  # a clock set back must not block updates forever
    assert should_update(NOW, {}, installed, stamp)[0] is True


def test_no_source_root_is_an_installed_flower(stamp: Path) -> None:
    assert should_update(NOW, {}, None, stamp) == (True, "never checked")


def test_update_command_upgrades_flowerbox_with_this_interpreter(
    installed: Path, tmp_path: Path
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    command = update_command(env=env, now=NOW, source=installed, home=tmp_path)
    assert command == PIP
    assert PACKAGE == "flowerbox"
    env["FLOWER_NO_UPDATE"] = "1"
    assert update_command(env=env, now=NOW, source=installed, home=tmp_path) is None


def test_cache_dir_follows_xdg_and_falls_back_to_home(tmp_path: Path) -> None:
    assert cache_dir({"XDG_CACHE_HOME": "/x"}, tmp_path) == Path("/x/flower")
    assert cache_dir({"XDG_CACHE_HOME": ""}, tmp_path) == tmp_path / ".cache" / "flower"


def test_maybe_update_starts_nothing_when_disabled(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("FLOWER_NO_UPDATE", "1")
    started: list[list[str]] = []
    began = time.perf_counter()
    maybe_update(spawn=lambda command, log: started.append(command))
    assert time.perf_counter() - began < 0.5
    assert started == []
    assert not (tmp_path / "cache").exists()  # not even the stamp


def test_maybe_update_is_a_no_op_in_this_checkout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The tests run from the git checkout: no update, even with the switch unset.
    monkeypatch.delenv("FLOWER_NO_UPDATE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    started: list[list[str]] = []
    maybe_update(spawn=lambda command, log: started.append(command))
    assert started == []


def test_maybe_update_starts_pip_once_a_day_and_logs_in_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, installed: Path
) -> None:
    monkeypatch.delenv("FLOWER_NO_UPDATE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    started: list[tuple[list[str], Path]] = []
    maybe_update(spawn=lambda command, log: started.append((command, log)), source=installed)
    maybe_update(spawn=lambda command, log: started.append((command, log)), source=installed)
    folder = tmp_path / "cache" / "flower"
    assert started == [(PIP, folder / "update.log")]
    assert (folder / "last-update").is_file()  # stamped before the start: once a day


def test_maybe_update_swallows_a_failing_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, installed: Path
) -> None:
    monkeypatch.delenv("FLOWER_NO_UPDATE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls: list[Path] = []

    def broken(command: list[str], log: Path) -> None:
        calls.append(log)
        raise OSError("no pip here")

    maybe_update(spawn=broken, source=installed)  # returns, whatever happened
    assert len(calls) == 1
