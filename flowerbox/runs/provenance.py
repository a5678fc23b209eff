"""Provenance: a git note on every commit a run made, written on the host after the run.

    snapshot(spec, image_id="sha256:...")     # before the box starts: every ref's commit
    notes = attach_notes(spec, code)          # after it ended: notes on what is new

"What the run made" is every commit reachable from any ref or worktree HEAD now and from none
of them before the run (all branches, all worktrees: flower's workers commit in worktrees of
their own). Each gets a note under its own ref, `refs/notes/flowerbox` (`git log
--notes=flowerbox`), saying which run, image, flower and Claude Code versions, model(s),
network policy and cost made it. Nothing here runs in the box, and the box never sees the
user's git directory (it works on a shadow whose branches flowerbox.box.gitshadow brings back
first), so the agent can neither forge a note nor redirect these git calls; the snapshot and
the cost come from flowerbox's host-only state.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from flower import cli_version, text
from flowerbox.box import state
from flowerbox.box.facts import summary
from flowerbox.box.spec import BoxSpec
from flowerbox.errors import HostGitError, ProvenanceError
from flowerbox.note import IDENTITY, NOTES_REF, Provenance, Spend, allowlist
from flowerbox.runs import records

__all__ = [
    "NOTES_REF", "SNAPSHOT", "attach_notes", "is_repository", "network_policy", "new_commits",
    "note_text", "snapshot", "tips",
]  # fmt: skip

SNAPSHOT = "provenance-start.json"


def _run(workspace: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """git in the user's repository, through flowerbox.hostgit (no hook or command of any
    config runs)."""
    try:
        return state.host_git().run(*args, workspace=workspace, stdin=stdin)
    except HostGitError as exc:
        raise ProvenanceError(str(exc)) from exc


def _git(workspace: Path, *args: str, stdin: str | None = None) -> str:
    done = _run(workspace, *args, stdin=stdin)
    if done.returncode != 0:
        said = done.stderr.strip()
        raise ProvenanceError(text("hostgit.failed", args=" ".join(args[:3]), said=said))
    return done.stdout


def _succeeds(workspace: Path, *args: str) -> bool:
    return _run(workspace, *args).returncode == 0


def is_repository(workspace: Path) -> bool:
    return _succeeds(workspace, "rev-parse", "--git-dir")


def tips(workspace: Path) -> set[str]:
    """The commit of every ref (branches, tags, remotes; not notes) and of every worktree's
    HEAD, detached ones included (none for a repository without a commit)."""
    refs = _git(workspace, "for-each-ref", "--format=%(objectname) %(objecttype) %(refname)")
    found = {
        sha
        for sha, kind, name in (line.split(" ", 2) for line in refs.splitlines())
        if kind == "commit" and not name.startswith("refs/notes/")
    }
    for line in _git(workspace, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("HEAD ") and set(sha := line.split()[1]) != {"0"}:
            found.add(sha)  # all zeros: a worktree whose branch has no commit yet
    return found


def snapshot(spec: BoxSpec, *, image_id: str) -> None:
    """Record, in the run's host-only folder, what the repository held before the run (and
    the image it runs, resolved now: the tag may move before the run ends)."""
    before = sorted(tips(spec.workspace)) if spec.git == "dir" else None
    data = {"tips": before, "image": spec.image, "image_id": image_id}
    (spec.state_dir / SNAPSHOT).write_text(json.dumps(data, indent=2) + "\n")


def new_commits(workspace: Path, before: list[str]) -> list[str]:
    """Commits reachable from a tip now and from none before, oldest first."""
    now = sorted(tips(workspace))
    if not now:
        return []
    args = ["rev-list", "--reverse", "--stdin"]
    stdin = "\n".join([*now, *(f"^{sha}" for sha in before if _exists(workspace, sha))]) + "\n"
    return _git(workspace, *args, stdin=stdin).split()


def _exists(workspace: Path, sha: str) -> bool:
    return _succeeds(workspace, "cat-file", "-e", f"{sha}^{{commit}}")


def note_text(spec: BoxSpec, *, image: str, image_id: str, code: int | None) -> str:
    """The note (flowerbox.note's lines), the same for every commit of the run."""
    usage = records.usage(spec)
    recorded = records.load(spec.state_dir)
    spend = Spend(
        usage.get("total_cost_usd"), usage.get("requests", 0), tuple(usage.get("models", {}))
    )
    return Provenance(
        run=spec.run_id,
        image=f"{image} {image_id}",
        network=network_policy(spec),
        spend=spend,
        claude_code=cli_version(),
        box=summary(recorded.meta.get("box") if recorded else None),
        exit="unknown" if code is None else str(code),
    ).text()


def network_policy(spec: BoxSpec) -> str:
    """The run's network as the user set it (--net, --allow)."""
    if spec.net == "open":
        return "open (--net open: a network of its own, unfiltered)"
    return allowlist(spec.allow)


def attach_notes(spec: BoxSpec, code: int | None) -> list[str]:
    """Note every commit the run made; returns their shas (none: not a repository, or no
    snapshot was taken). A commit that already has a flowerbox note gets this run's appended."""
    path = spec.state_dir / SNAPSHOT
    if not path.is_file():
        return []
    start = json.loads(path.read_text())
    if start.get("tips") is None or not is_repository(spec.workspace):
        return []
    commits = new_commits(spec.workspace, list(start["tips"]))
    if not commits:
        return []
    text = note_text(spec, image=start["image"], image_id=start["image_id"], code=code)
    identity = () if _git_identity(spec.workspace) else IDENTITY
    for sha in commits:
        _git(
            spec.workspace,
            *identity,
            "notes",
            "--ref",
            NOTES_REF,
            "append",
            "-F",
            "-",
            sha,
            stdin=text,
        )
    return commits


def _git_identity(workspace: Path) -> bool:
    """Does git have a committer identity here (a notes ref is a commit history)?"""
    return _succeeds(workspace, "var", "GIT_COMMITTER_IDENT")
