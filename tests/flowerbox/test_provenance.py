"""Provenance on a real git repository: notes on exactly the commits a run made, on every
branch and worktree, with the run's facts; nothing for a folder that is not a repository."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from claude_agent_sdk._cli_version import __cli_version__

from flowerbox import __version__
from flowerbox.box.spec import BoxSpec
from flowerbox.runs.boundary import after_run
from flowerbox.runs.provenance import NOTES_REF, SNAPSHOT, attach_notes, snapshot

IMAGE_ID = "sha256:" + "ab" * 32


@pytest.fixture(autouse=True)
def git_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No user's git config; an identity only through the environment."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "dev" if key.endswith("NAME") else "dev@localhost")


def git(ws: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ws), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def commit(ws: Path, message: str) -> str:
    git(ws, "commit", "-q", "--allow-empty", "-m", message)
    return git(ws, "rev-parse", "HEAD")


def spec_for(ws: Path) -> BoxSpec:
    state = ws.parent / "state" / ws.name
    (state / "gateway").mkdir(parents=True, exist_ok=True)
    return BoxSpec(
        image="flowerbox:dev",
        workspace=ws,
        run_dir=ws / "runs",
        home=ws / "runs" / "home",
        socket_dir=ws / "s",
        secrets_dir=ws / "k",
        state_dir=state,
        git="dir" if (ws / ".git").is_dir() else "none",
        uid=os.getuid(),
        gid=os.getgid(),
        command=("flower", "go", "x"),
        run_id="20261130-040000-abc123",
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "project"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    commit(ws, "before the run")
    git(ws, "branch", "old")
    return ws


def usage(spec: BoxSpec) -> None:
    spec.usage_file.write_text(
        json.dumps(
            {
                "requests": 9,
                "total_cost_usd": 0.293992,
                "models": {"claude-opus-5-5": {}, "claude-haiku-5": {}},
            }
        )
    )


def test_every_commit_the_run_made_gets_a_note_and_nothing_older(ws: Path) -> None:
    spec = spec_for(ws)
    before = git(ws, "rev-parse", "HEAD")
    snapshot(spec, image_id=IMAGE_ID)
    on_main = [commit(ws, "one"), commit(ws, "two")]
    git(ws, "switch", "-q", "-c", "feature")
    on_branch = commit(ws, "on a branch")
    worktree = ws.parent / "wt"
    git(ws, "worktree", "add", "-q", "--detach", str(worktree), "main")
    in_worktree = commit(worktree, "in a detached worktree")
    usage(spec)

    noted = attach_notes(spec, 0)

    assert sorted(noted) == sorted([*on_main, on_branch, in_worktree])
    note = read_note(ws, in_worktree)
    assert note.splitlines() == [
        "flowerbox-run: 20261130-040000-abc123",
        f"image: flowerbox:dev {IMAGE_ID}",
        f"flower: {__version__}",
        f"claude-code: {__cli_version__}",
        "model: claude-haiku-5, claude-opus-5-5",
        "network: allowlist: empty (no network)",
        "box: unknown",  # no run recorded here: the engine's facts come with a real run
        "cost: $0.293992 (9 requests)",
        "exit: 0",
    ]
    with pytest.raises(subprocess.CalledProcessError):
        git(ws, "notes", "--ref", NOTES_REF, "show", before)
    log = git(ws, "log", "--notes=flowerbox", "-1", "--format=%N", on_main[0])
    assert "flowerbox-run: 20261130-040000-abc123" in log


def test_a_second_run_appends_its_note_and_without_an_identity_flowerbox_signs(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = spec_for(ws)
    snapshot(first, image_id=IMAGE_ID)
    made = commit(ws, "first run")
    assert attach_notes(first, 1) == [made]
    second = BoxSpec(**{**first.__dict__, "run_id": "second"})
    snapshot(second, image_id=IMAGE_ID)
    assert attach_notes(second, 0) == []  # it made nothing new: no note at all
    for key in ("GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL"):
        monkeypatch.delenv(key)
    git(ws, "config", "user.useConfigOnly", "true")  # no identity guessed from the host
    third = BoxSpec(**{**first.__dict__, "run_id": "third"})
    snapshot(third, image_id=IMAGE_ID)
    git(ws, "-c", "user.name=x", "-c", "user.email=x@y", "commit", "-q", "--allow-empty", "-m", "3")
    later = git(ws, "rev-parse", "HEAD")
    assert attach_notes(third, 0) == [later]
    author = git(ws, "log", "-1", "--format=%an <%ae>", NOTES_REF)
    assert author == "flowerbox <flowerbox@localhost>"
    assert "exit: 1" in read_note(ws, made) and "flowerbox-run: third" in read_note(ws, later)


def test_a_folder_that_is_not_a_repository_gets_nothing_and_no_error(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    spec = spec_for(plain)
    snapshot(spec, image_id=IMAGE_ID)
    assert json.loads((spec.state_dir / SNAPSHOT).read_text())["tips"] is None
    assert after_run(spec, 0) == []
    assert attach_notes(spec, 0) == []


def test_a_repository_without_a_commit_gets_its_first_commits_noted(tmp_path: Path) -> None:
    """`git init` and no commit yet: the worktree's HEAD is the null object id, which is no
    commit (it once ended the run with "notes failed: ... bad object 0000...")."""
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q", "-b", "main")
    spec = spec_for(fresh)
    snapshot(spec, image_id=IMAGE_ID)
    assert after_run(spec, 0) == []  # nothing made, nothing said
    made = commit(fresh, "the run's first commit")
    assert attach_notes(spec, 0) == [made]


def test_a_git_failure_is_reported_and_does_not_raise(ws: Path) -> None:
    spec = spec_for(ws)
    snapshot(spec, image_id=IMAGE_ID)
    made = commit(ws, "made")
    blocker = ws / ".git" / "refs" / "notes" / "flowerbox" / "x"
    blocker.parent.mkdir(parents=True)
    blocker.write_text(made + "\n")  # a ref below refs/notes/flowerbox: git cannot write it
    [line] = after_run(spec, 0)
    assert line.startswith("flowerbox: notes failed: git notes --ref refs/notes/flowerbox")


def read_note(workspace: Path, sha: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(workspace), "notes", "--ref", NOTES_REF, "show", sha],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout
