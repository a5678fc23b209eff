"""RunDir owns the run directory's layout: every caller finds a file through it."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import flower
from flower import RunDir

FILE_NAMES = ("sessions.db", "manifest.json", "lineage.json", "asks.json", "rejected")


def test_the_layout_is_the_documented_one(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert run.sessions == tmp_path / "sessions.db"
    assert run.manifest == tmp_path / "manifest.json"
    assert run.lineage == tmp_path / "lineage.json"
    assert run.asks == tmp_path / "asks.json"
    assert run.inbox == tmp_path / "inbox"
    assert run.rejected == tmp_path / "inbox" / "rejected"
    assert run.aside == RunDir(tmp_path / "aside")
    assert run.workbench == tmp_path / "workbench"
    assert run.home == tmp_path / "home"
    assert run.events("20250101-000000-abcdef") == tmp_path / "events/20250101-000000-abcdef.jsonl"


def test_a_run_dir_is_a_frozen_value(tmp_path: Path) -> None:
    assert RunDir(str(tmp_path)) == RunDir(tmp_path) and RunDir(tmp_path).path == tmp_path
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunDir(tmp_path).path = tmp_path / "x"  # type: ignore[misc]
    assert not tmp_path.joinpath("inbox").exists()  # nothing is created


def test_drops_are_fresh_sort_in_drop_order_and_live_in_the_inbox(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    drops = [run.new_drop() for _ in range(50)]
    assert len(set(drops)) == 50 and sorted(drops) == drops
    assert all(d.parent == run.inbox and d.suffix == ".json" for d in drops)
    assert not any(d.name.startswith(".") for d in drops)  # the watcher skips dot names


def test_holds_a_run(tmp_path: Path) -> None:
    assert not RunDir(tmp_path).holds_a_run()
    RunDir(tmp_path).asks.write_text("[]")
    assert RunDir(tmp_path).holds_a_run()


def test_no_other_module_spells_a_run_dir_file_name() -> None:
    root = Path(str(flower.__file__)).parent
    spelled = {
        f"{path.relative_to(root)}: {node.value}"
        for path in root.rglob("*.py")
        if path.name != "rundir.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in FILE_NAMES
    }
    assert spelled == set()
