"""The workspace rules that more than one caller needs: whether a folder is inside a git
repository, where a workspace's workbench lives, and which folders are never a workspace.

flower's runtime, starter, status, its CLI and flowerbox on the host all ask these
questions; the answer is written once, here, so they cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

from flower.core.lang import text

__all__ = [
    "BRIEF_NAME",
    "WORKBENCH_DIRNAME",
    "in_git_repository",
    "shown",
    "undecodable",
    "workbench_location",
    "workspace_refusal",
]

# Never a workspace themselves (a project folder may lie below them: /var/lib/ci/x, /tmp/x).
SYSTEM_FOLDERS = ("/", "/var", "/tmp", "/opt", "/srv", "/home", "/mnt", "/media")
# Never a workspace, nor inside one of these (the system's own folders).
SYSTEM_TREES = (
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/boot",
    "/dev",
    "/proc",
    "/sys",
    "/run",
    "/var/run",
    "/var/lib/docker",
)

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


def undecodable(path: Path) -> bool:
    """The path's bytes are not UTF-8 (Python holds them as lone surrogates): the Claude Code
    CLI, JSON records and the SDK's project key cannot carry such a path."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def shown(path: Path) -> str:
    """`path` printable whatever its bytes (a non-UTF-8 byte as `\\xff`)."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def workspace_refusal(path: Path) -> str | None:
    """Why no run may work in `path` (a realpath), as the end of a sentence, or None: a
    system folder (`/`, `/tmp` itself, anything in /etc or /usr...), or a name that is not
    UTF-8. The callers add their own rules (flower: the home folder; flowerbox: every
    folder a box must never see)."""
    if str(path) in SYSTEM_FOLDERS or any(path.is_relative_to(tree) for tree in SYSTEM_TREES):
        return text("error.why_system")
    if undecodable(path):
        return text("error.why_undecodable")
    return None
