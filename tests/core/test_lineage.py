"""lineage.json: step -> session id per workspace realpath, shared between processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from claude_agent_sdk import project_key_for_directory

from flower.core.lineage import Lineage
from flower.core.statefile import CorruptStateError

REMEMBERER = """
import sys
from flower.core.lineage import Lineage
lineage = Lineage(sys.argv[1], sys.argv[2])
for i in range(int(sys.argv[4])):
    lineage.remember(f"{sys.argv[3]}-{i}", f"session-{sys.argv[3]}-{i}")
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def test_a_remembered_session_is_recalled_by_a_later_instance(
    run_dir: Path, workspace: Path
) -> None:
    Lineage(run_dir, workspace).remember("clarify", "s-1")
    later = Lineage(run_dir, workspace)
    assert later.recall("clarify") == "s-1"
    assert later.recall("judge") is None


def test_without_a_file_nothing_is_recalled(run_dir: Path, workspace: Path) -> None:
    assert Lineage(run_dir, workspace).recall("clarify") is None
    assert not run_dir.exists()


def test_the_newest_session_of_a_step_wins(run_dir: Path, workspace: Path) -> None:
    lineage = Lineage(run_dir, workspace)
    lineage.remember("work", "s-1")
    lineage.remember("review", "s-2")
    lineage.remember("work", "s-3")
    assert lineage.sessions() == {"work": "s-3", "review": "s-2"}


def test_the_file_stores_the_realpath_and_the_sdk_project_key(
    run_dir: Path, workspace: Path
) -> None:
    Lineage(run_dir, workspace).remember("work", "s-1")
    data = json.loads((run_dir / "lineage.json").read_text())
    assert data == {
        "workspaces": {
            str(workspace.resolve()): {
                "project_key": project_key_for_directory(workspace),
                "steps": {"work": "s-1"},
            }
        }
    }


def test_a_symlink_to_the_workspace_finds_the_same_lineage(
    run_dir: Path, workspace: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link"
    link.symlink_to(workspace)
    Lineage(run_dir, link).remember("work", "s-1")
    assert Lineage(run_dir, workspace).recall("work") == "s-1"


def test_a_moved_workspace_silently_starts_fresh(
    run_dir: Path, workspace: Path, tmp_path: Path
) -> None:
    """The seed keys the lineage by the absolute path: a folder moved under another parent,
    its name unchanged, starts fresh as surely as a renamed one."""
    Lineage(run_dir, workspace).remember("work", "s-1")
    (tmp_path / "elsewhere").mkdir()
    same_name = workspace.rename(tmp_path / "elsewhere" / workspace.name)
    assert Lineage(run_dir, same_name).recall("work") is None
    renamed = same_name.rename(tmp_path / "moved")
    assert Lineage(run_dir, renamed).recall("work") is None


def test_remembering_from_a_new_path_keeps_the_old_path_s_lineage(
    run_dir: Path, workspace: Path, tmp_path: Path
) -> None:
    Lineage(run_dir, workspace).remember("work", "s-old")
    moved = workspace.rename(tmp_path / "moved")
    Lineage(run_dir, moved).remember("work", "s-new")
    back = moved.rename(workspace)
    assert Lineage(run_dir, back).recall("work") == "s-old"
    assert Lineage(run_dir, moved).recall("work") == "s-new"


def test_an_empty_session_id_is_refused(run_dir: Path, workspace: Path) -> None:
    with pytest.raises(ValueError, match="empty session id"):
        Lineage(run_dir, workspace).remember("work", "")


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[]",
        "{}",
        '{"workspace": "/elsewhere", "steps": {"work": "s-1"}}',
        '{"workspaces": {"/elsewhere": {"steps": ["s-1"]}}}',
    ],
    ids=["not-json", "list", "no-workspaces", "other-format", "steps-not-a-dict"],
)
def test_an_unknown_file_is_an_error_and_is_left_untouched(
    run_dir: Path, workspace: Path, content: str
) -> None:
    run_dir.mkdir()
    (run_dir / "lineage.json").write_text(content)
    lineage = Lineage(run_dir, workspace)
    with pytest.raises(CorruptStateError, match="lineage.json"):
        lineage.recall("work")
    with pytest.raises(CorruptStateError, match="lineage.json"):
        lineage.remember("work", "s-1")
    assert (run_dir / "lineage.json").read_text() == content


def test_two_processes_remembering_at_once_keep_every_step(run_dir: Path, workspace: Path) -> None:
    steps = 100
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", REMEMBERER, str(run_dir), str(workspace), who, str(steps)]
        )
        for who in ("a", "b")
    ]
    assert [proc.wait(timeout=60) for proc in procs] == [0, 0]
    assert Lineage(run_dir, workspace).sessions() == {
        f"{who}-{i}": f"session-{who}-{i}" for who in ("a", "b") for i in range(steps)
    }
