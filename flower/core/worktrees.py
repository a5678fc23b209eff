"""Worktrees: where a run's isolated workers work, and how their work lands on one branch.

Left to itself the CLI puts each isolated worker in `.claude/worktrees/agent-<id>`, branched
from the checkout's HEAD, and leaves its changes there uncommitted: round 2 started again
from the original commit, and a run's result was spread over as many worktrees as workers,
none of them on a branch anybody was told about. flower makes the worktrees itself (the
CLI's WorktreeCreate hook: with it registered, the CLI makes none of its own)::

    create("agent-a1")     <run_dir>/worktrees/agent-a1, detached at the tip of the run's
                           branch (made at the checkout's HEAD when the first worker starts)
    collect(path, ...)     the worker stopped (SubagentStop): its changes are committed there
                           and the branch moves to that commit; a worker that ran beside
                           another is merged with the tip (on a conflict its worktree stays)
    review()               <run_dir>/worktrees/review, a checkout of the branch's tip for
                           the judge (the user's checkout does not have the work)
    clean()                every worktree of the run collected, removed, pruned

So each worker starts from everything the earlier ones did, the run's work is one branch,
`flower/<run id>` (the id of the process its first worker started in; every later process
of the run finds it in progress.json), and the user's checkout, index and HEAD are never
touched. What becomes of the branch at the end is
flower.core.delivery's.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claude_agent_sdk import HookMatcher

from flower.core.git import git, must
from flower.core.hooks import Placed, as_handler
from flower.core.progress import Progress
from flower.core.rundir import RunDir

__all__ = ["PREFIX", "REVIEW", "Branch", "Worktrees"]

PREFIX = "flower"
REVIEW = "review"  # the judge's checkout; workers' worktrees are agent-<id>
REPORT_CHARS = 4000  # of a worker's report, kept in its commit's message
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class Branch:
    """The run's branch and the commit it started from."""

    name: str
    base: str

    @property
    def ref(self) -> str:
        return f"refs/heads/{self.name}"


class Worktrees:
    """The isolated workers' worktrees of the run in `run_dir` for `workspace` (a git
    repository with at least one commit), and the branch `flower/<run id>` they stack on."""

    def __init__(self, workspace: Path, run_dir: Path, run_id: str) -> None:
        self.workspace = workspace
        self.run_dir = run_dir.resolve()
        self.root = RunDir(self.run_dir).worktrees
        self.run_id = run_id
        self._progress = Progress(run_dir, workspace)
        self._lock = threading.RLock()
        self._conflicts: dict[Path, str] = {}

    # -- the branch -----------------------------------------------------------------------

    def branch(self) -> Branch | None:
        """The run's branch, or None while no isolated worker has started."""
        known = self._progress.branch()
        return Branch(known["name"], known["base"]) if len(known) == 2 else None

    def _branch(self) -> Branch:
        """The run's branch, made at the checkout's HEAD (or made again at its base, should
        it have been deleted) on first use."""
        branch = self.branch()
        if branch is None:
            head = must(self.workspace, "rev-parse", "--verify", "HEAD^{commit}").strip()
            claimed = self._progress.claim_branch(f"{PREFIX}/{self.run_id}", head)
            branch = Branch(claimed["name"], claimed["base"])
        if git(self.workspace, "rev-parse", "--verify", "-q", branch.ref).returncode != 0:
            must(self.workspace, "update-ref", branch.ref, branch.base, "")
        return branch

    # -- the worktrees ---------------------------------------------------------------------

    def create(self, name: str) -> Path:
        """A new worktree for worker `name`, detached at the branch's tip."""
        if not _NAME.fullmatch(name):
            raise ValueError(f"not a worktree name flower makes: {name!r}")
        with self._lock:
            branch = self._branch()
            path = self.root / name
            self.root.mkdir(parents=True, exist_ok=True)
            must(self.workspace, "worktree", "add", "--quiet", "--detach", str(path), branch.ref)
        return path

    def collect(self, path: Path, *, who: str, report: str) -> None:
        """Commit what the worker left in the worktree `path` (or a folder in it) and move the
        branch there. Other folders (the checkout itself, a non-isolated worker's cwd) are
        left alone."""
        path = next((p for p in (path, *path.parents) if self.owns(p)), self.root)
        if path in (self.root, self.root / REVIEW):
            return
        with self._lock:
            branch = self.branch()
            if branch is None or not path.is_dir():
                return
            _commit(path, who=who, report=report)
            self._land(path, branch, who)

    def owns(self, path: Path) -> bool:
        """Whether `path` is (the top of) one of the run's worktrees."""
        return path.parent == self.root

    def _land(self, path: Path, branch: Branch, who: str) -> None:
        """Move the branch to the worktree's HEAD: fast-forward, or merge the tip into the
        worktree first when another worker landed meanwhile."""
        head = must(path, "rev-parse", "HEAD").strip()
        tip = must(self.workspace, "rev-parse", branch.ref).strip()
        if head == tip or _descends(path, head, tip):
            return  # nothing new, or already on the branch
        if not _descends(path, tip, head):
            merged = git(path, "merge", "--no-edit", "-m", f"flower: merge the work of {who}", tip)
            if merged.returncode != 0:
                git(path, "merge", "--abort")
                self._conflicts[path] = (
                    f"the work of {who} conflicts with {branch.name}: it is kept, committed "
                    f"({head[:12]}), in the worktree {path}"
                )
                return
            head = must(path, "rev-parse", "HEAD").strip()
        must(self.workspace, "update-ref", branch.ref, head, tip)
        self._conflicts.pop(path, None)

    def review(self) -> Path | None:
        """A fresh checkout of the branch's tip for whoever judges the work, or None while
        no worker has started. What is changed there is never collected."""
        with self._lock:
            branch = self.branch()
            if branch is None:
                return None
            path = self.root / REVIEW
            if path in self.leftovers():
                must(self.workspace, "worktree", "remove", "--force", str(path))
            must(self.workspace, "worktree", "add", "--quiet", "--detach", str(path), branch.ref)
            return path

    def leftovers(self) -> list[Path]:
        """The worktrees of this run that git still knows."""
        listing = must(self.workspace, "worktree", "list", "--porcelain", "-z")
        paths = [Path(line[9:]) for line in listing.split("\0") if line.startswith("worktree ")]
        return [p for p in paths if self.owns(p)]

    def clean(self) -> list[str]:
        """Collect every worktree of the run (a worker killed mid-way left its changes
        uncommitted), remove them, prune git's records; what the user must know, as lines
        (a worktree kept because its work conflicts)."""
        with self._lock:
            for path in self.leftovers():
                self.collect(path, who=path.name, report="")
                if path not in self._conflicts:
                    must(self.workspace, "worktree", "remove", "--force", str(path))
            git(self.workspace, "worktree", "prune")
            if self.root.is_dir() and not any(self.root.iterdir()):
                self.root.rmdir()
            return list(self._conflicts.values())

    # -- the hooks -------------------------------------------------------------------------

    def hooks(self) -> dict[str, list[HookMatcher]]:
        """WorktreeCreate (the worktree is made here) and SubagentStop (its work lands)."""
        return {
            "WorktreeCreate": [as_handler(self._on_create)],
            "SubagentStop": [as_handler(self._on_stop)],
        }

    def _on_create(self, hook_input: Mapping[str, Any]) -> Placed:
        return Placed(self.create(str(hook_input.get("name", ""))))

    def _on_stop(self, hook_input: Mapping[str, Any]) -> None:
        cwd = Path(str(hook_input.get("cwd") or "."))
        who = f"{hook_input.get('agent_type') or 'worker'} {hook_input.get('agent_id') or ''}"
        self.collect(
            cwd, who=who.strip(), report=str(hook_input.get("last_assistant_message") or "")
        )


def _commit(path: Path, *, who: str, report: str) -> None:
    """Everything the worker changed in `path` (what .gitignore ignores aside), as one commit
    whose message is its report."""
    must(path, "add", "--all")
    if git(path, "diff", "--cached", "--quiet").returncode == 0:
        return
    said = report.strip()[:REPORT_CHARS] or f"what {who} left in its worktree"
    subject = " ".join(said.splitlines()[0].split())[:60]
    must(path, "commit", "--quiet", "--no-verify", "-F", "-", stdin=f"{who}: {subject}\n\n{said}\n")


def _descends(cwd: Path, ancestor: str, commit: str) -> bool:
    """Whether `commit` has `ancestor` in its history."""
    return git(cwd, "merge-base", "--is-ancestor", ancestor, commit).returncode == 0
