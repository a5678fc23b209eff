"""The isolated workers' worktrees and the run's branch, on plain git (the CLI's side of it,
the hooks, is proven in tests/cli/test_delivery.py and test_guard_cli.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from flower.core.delivery import deliver
from flower.core.progress import Progress
from flower.core.worktrees import Worktrees


def git(path: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def ws(workspace: Path) -> Path:
    git(workspace, "init", "-q", "-b", "main")
    (workspace / "a.txt").write_text("one\ntwo\nthree\n")
    git(workspace, "add", "a.txt")
    git(workspace, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-q", "-m", "start")
    return workspace


@pytest.fixture
def trees(ws: Path) -> Worktrees:
    return Worktrees(ws, ws.parent / "runs", "r1")


def work(trees: Worktrees, name: str, **files: str) -> Path:
    path = trees.create(name)
    for file, content in files.items():
        (path / file).write_text(content)
    return path


def test_each_worker_starts_where_the_last_one_landed(trees: Worktrees, ws: Path) -> None:
    head = git(ws, "rev-parse", "HEAD")
    first = work(trees, "agent-1", **{"b.txt": "bug\n"})
    assert trees.branch() is not None and trees.branch().base == head  # type: ignore[union-attr]
    trees.collect(first / "sub" / "dir", who="coder 1", report="wrote b\nthe details")
    second = trees.create("agent-2")
    assert (second / "b.txt").read_text() == "bug\n"
    (second / "b.txt").write_text("fixed\n")
    trees.collect(second, who="coder 2", report="fixed b")
    assert git(ws, "log", "--format=%s", "flower/r1") == "coder 2: fixed b\ncoder 1: wrote b\nstart"
    assert git(ws, "log", "-1", "--format=%b", "flower/r1~1").startswith("wrote b\nthe details")
    assert git(ws, "rev-parse", "HEAD") == head and git(ws, "status", "--porcelain") == ""


def test_workers_side_by_side_are_merged_and_a_conflict_is_kept_and_said(
    trees: Worktrees, ws: Path
) -> None:
    left = work(trees, "agent-l", **{"a.txt": "ONE\ntwo\nthree\n"})
    right = work(trees, "agent-r", **{"a.txt": "one\ntwo\nTHREE\n"})
    clash = work(trees, "agent-c", **{"a.txt": "uno\ntwo\nthree\n"})
    for path in (left, right, clash):
        trees.collect(path, who=path.name, report="done")
    assert git(ws, "show", "flower/r1:a.txt") == "ONE\ntwo\nTHREE"
    notes = trees.clean()
    assert len(notes) == 1 and "agent-c" in notes[0] and str(clash) in notes[0]
    assert trees.leftovers() == [clash] and (clash / "a.txt").read_text() == "uno\ntwo\nthree\n"


def test_clean_collects_what_a_killed_worker_left_and_removes_every_worktree(
    trees: Worktrees, ws: Path
) -> None:
    work(trees, "agent-k", **{"k.txt": "half done\n"})
    later = Worktrees(ws, ws.parent / "runs", "r2")  # the next process of the same run
    assert later.clean() == [] and later.leftovers() == []
    assert git(ws, "show", "flower/r1:k.txt") == "half done"
    assert not (ws.parent / "runs" / "worktrees").exists()
    assert git(ws, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_only_the_runs_own_worktrees_are_touched(trees: Worktrees, ws: Path) -> None:
    (ws / "stray.txt").write_text("the user's\n")
    trees.collect(ws, who="main", report="")
    work(trees, "agent-1")
    trees.collect(ws, who="main", report="")
    assert git(ws, "rev-list", "--count", "main..flower/r1") == "0"
    assert git(ws, "status", "--porcelain") == "?? stray.txt"
    with pytest.raises(ValueError, match="not a worktree name"):
        trees.create("../escape")


def test_a_fresh_run_gets_a_new_branch_and_a_woken_one_keeps_it(trees: Worktrees, ws: Path) -> None:
    work(trees, "agent-1")
    progress = Progress(ws.parent / "runs", ws)
    progress.join("r2", woke=True)
    assert Worktrees(ws, ws.parent / "runs", "r2").branch() == trees.branch()
    progress.join("r3", woke=False)
    assert Worktrees(ws, ws.parent / "runs", "r3").branch() is None


def test_a_branch_without_commits_is_deleted_and_nothing_is_delivered(
    trees: Worktrees, ws: Path
) -> None:
    work(trees, "agent-1")
    delivered = deliver(trees, achieved=True)
    assert delivered is not None and delivered.branch is None and delivered.commits == []
    assert git(ws, "branch", "--list", "flower/*") == ""
    assert deliver(Worktrees(ws, ws.parent / "elsewhere", "r9"), achieved=True) is None


@pytest.mark.english
def test_merge_waits_for_the_goal_and_never_overwrites_a_local_change(
    trees: Worktrees, ws: Path
) -> None:
    path = work(trees, "agent-1", **{"a.txt": "changed\n"})
    trees.collect(path, who="coder", report="changed a")
    unreached = deliver(trees, finish="merge", achieved=False)
    assert unreached is not None and unreached.finish == "branch"
    assert "did not reach its goal" in unreached.notes[0]
    (ws / "a.txt").write_text("the user's own edit\n")
    refused = deliver(trees, finish="merge", achieved=True)
    assert refused is not None and refused.finish == "branch" and refused.apply
    assert refused.notes[0].startswith("not merged: git said:")
    assert (ws / "a.txt").read_text() == "the user's own edit\n"
    assert not (ws / ".git" / "MERGE_HEAD").exists()


def test_the_judge_reviews_the_tip_and_what_it_changes_is_never_collected(
    trees: Worktrees, ws: Path
) -> None:
    assert trees.review() is None  # no worker yet: the checkout is the work
    trees.collect(work(trees, "agent-1", **{"b.txt": "round 1\n"}), who="c", report="r1")
    review = trees.review()
    assert review is not None and (review / "b.txt").read_text() == "round 1\n"
    (review / "b.txt").write_text("the judge's scribble\n")
    trees.collect(work(trees, "agent-2", **{"c.txt": "round 2\n"}), who="c", report="r2")
    again = trees.review()
    assert again == review and (review / "c.txt").is_file()
    assert (review / "b.txt").read_text() == "round 1\n"
    trees.collect(review, who="judge", report="")
    assert trees.clean() == [] and not review.exists()
    assert git(ws, "show", "flower/r1:b.txt") == "round 1"
