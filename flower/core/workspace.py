"""The workspace rules that more than one caller needs: whether a folder is inside a git
repository, and where a workspace's workbench lives.

flower's runtime, starter, status and flowerbox on the host all ask these questions; the
answer is written once, here, so they cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BRIEF_NAME", "WORKBENCH_DIRNAME", "in_git_repository", "workbench_location"]

WORKBENCH_DIRNAME = ".flower"
BRIEF_NAME = "需求.md"  # the starter's brief, in the workbench's notes/
"""The workbench's folder name inside a workspace (Workbench's default `dirname`)."""


def in_git_repository(path: Path) -> bool:
    """True if `path` is inside a git work tree (`.git` is a folder, or a file in worktrees)."""
    return any((folder / ".git").exists() for folder in (path, *path.parents))


def workbench_location(workspace: Path, *, isolate: bool = False) -> Path:
    """Where the workbench of `workspace` lives: `<workspace>/.flower`, or, when agents are
    isolated in git worktrees, `<parent>/.flower-<name>` beside the repository (an isolated
    agent cannot write the shared checkout, and the workbench is what they share).

    `workspace` is used as given: pass its realpath, as flower and flowerbox do.
    """
    if isolate:
        return workspace.parent / f"{WORKBENCH_DIRNAME}-{workspace.name}"
    return workspace / WORKBENCH_DIRNAME
