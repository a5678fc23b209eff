"""Delivery: what the run hands the user at its end, and how (`--finish`).

The isolated workers' commits are on the run's branch (flower.core.worktrees). At the end,
`deliver()` collects and removes every worktree, then finishes as the user asked:

    branch   (the default) the branch is the result; the checkout is not touched
    merge    the branch is also merged into the checkout's HEAD, when the run reached its
             goal and git can merge without a conflict or overwriting a local change
             (else it stays a branch and `notes` says why)
    patch    the branch's changes are also written as a patch file in the run dir (for CI
             artifacts; `git apply` takes it)

A branch with no commit is deleted: the workers changed nothing. `Delivery` is what the last
lines and the JSON summary say: the branch, the commit it started from, its commits, the
files it changes and the exact command that applies it to the checkout.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from flower.core.git import git, must
from flower.core.lang import text
from flower.core.rundir import RunDir
from flower.core.worktrees import PREFIX, Branch, Worktrees

__all__ = ["FINISHES", "Delivery", "Finish", "deliver"]

Finish = Literal["branch", "merge", "patch"]
FINISHES: tuple[Finish, ...] = ("branch", "merge", "patch")
SHOWN_FILES = 10  # in the end line; the JSON lists them all


@dataclass(frozen=True)
class Delivery:
    """Where the run's work is. `finish` is what was done: "branch", "merged" or "patch";
    `apply` the command that brings the work into the checkout (None once merged or when
    there is nothing to bring)."""

    branch: str | None
    base: str
    commits: list[dict[str, str]] = field(default_factory=list)  # {"sha", "subject"}
    files: list[str] = field(default_factory=list)
    apply: str | None = None
    finish: str = "branch"
    patch: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "base": self.base,
            "commits": self.commits,
            "files": self.files,
            "apply": self.apply,
            "finish": self.finish,
            "patch": self.patch,
            "notes": self.notes,
        }

    def lines(self) -> list[str]:
        """What the end of a run prints."""
        if self.branch is None:
            return [text("delivery.nothing"), *self.notes]
        shown = ", ".join(self.files[:SHOWN_FILES])
        extra = len(self.files) - SHOWN_FILES
        more = text("delivery.more", count=extra) if extra > 0 else ""
        if self.finish in ("merged", "patch"):
            where = text(f"delivery.{self.finish}", branch=self.branch, patch=self.patch)
        else:
            where = text("delivery.branch", branch=self.branch)
        out = [
            text(
                "delivery.work",
                where=where,
                commits=len(self.commits),
                base=self.base[:12],
                files=len(self.files),
                shown=shown,
                more=more,
            )
        ]
        if self.apply:
            out.append(text("delivery.apply", command=self.apply))
        return out + [f"  {note}" for note in self.notes]


def deliver(worktrees: Worktrees, *, finish: Finish = "branch", achieved: bool) -> Delivery | None:
    """Collect and remove the run's worktrees, then finish as asked (`merge` only when the
    run `achieved` its goal); None when no isolated worker ever started (the branch is made
    with the first worktree: without one there is nothing to collect, and no git to ask, in a
    folder that is no repository)."""
    branch = worktrees.branch()
    if branch is None:
        return None
    notes = worktrees.clean()
    ws = worktrees.workspace
    tip = must(ws, "rev-parse", branch.ref).strip()
    commits = _commits(ws, branch.base, tip)
    if not commits:
        must(ws, "update-ref", "-d", branch.ref, tip)
        return Delivery(None, branch.base, notes=notes)
    files = must(ws, "diff", "--name-only", "-z", branch.base, tip).split("\0")[:-1]
    merge = f"git -C {shlex.quote(str(ws))} merge {branch.name}"
    done = Delivery(branch.name, branch.base, commits, files, merge, notes=notes)
    if finish == "merge":
        return _merged(done, ws, branch, achieved)
    if finish == "patch":
        patch = RunDir(worktrees.run_dir).patch(branch.name.removeprefix(f"{PREFIX}/"))
        patch.parent.mkdir(parents=True, exist_ok=True)
        patch.write_text(must(ws, "diff", "--binary", branch.base, tip), encoding="utf-8")
        apply = f"git -C {shlex.quote(str(ws))} apply {shlex.quote(str(patch))}"
        return replace(done, finish="patch", patch=str(patch), apply=apply)
    return done


def _commits(ws: Path, base: str, tip: str) -> list[dict[str, str]]:
    listed = must(ws, "log", "--reverse", "--format=%H%x00%s", f"{base}..{tip}")
    pairs = (line.split("\0", 1) for line in listed.splitlines() if line)
    return [{"sha": sha, "subject": subject} for sha, subject in pairs]


def _merged(done: Delivery, ws: Path, branch: Branch, achieved: bool) -> Delivery:
    """Merge the branch into the checkout's HEAD; on any refusal, abort and keep it a
    branch with the reason in its notes."""
    if not achieved:
        why = text("delivery.not_merged_goal")
        return replace(done, notes=[*done.notes, why])
    merged = git(ws, "merge", "--no-edit", branch.name)
    if merged.returncode == 0:
        return replace(done, finish="merged", apply=None)
    git(ws, "merge", "--abort")
    said = " ".join((merged.stderr or merged.stdout).split())[-300:]
    return replace(done, notes=[*done.notes, text("delivery.not_merged_git", said=said)])
