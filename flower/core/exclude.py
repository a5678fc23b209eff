"""Keeping flower's own folders out of `git status`, in this clone only.

A run writes its run dir (`runs/`) and, without isolation, its workbench (`.flower/`) inside
the workspace; in a git repository both show up as untracked, and a hurried `git add -A`
commits transcripts. `.git/info/exclude` is git's per-clone ignore file: nothing versioned
changes, and deleting the line undoes it.

    missing = git_unexcluded(workspace, [run_dir, workbench])   # ["/runs/"]: not ignored yet
    git_exclude(workspace, missing)                           # appended to info/exclude
"""

from __future__ import annotations

from pathlib import Path

from flower.core.git import git, must

__all__ = ["git_exclude", "git_unexcluded"]


def git_unexcluded(workspace: Path, folders: list[Path]) -> list[str]:
    """Patterns (`/runs/`, anchored at the repository's top) for those `folders` that lie
    inside the workspace's repository and that git does not ignore yet; [] outside git."""
    found = git(workspace, "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        return []
    top = Path(found.stdout.strip()).resolve()
    patterns: list[str] = []
    for folder in folders:
        where = folder.expanduser().resolve()
        if where == top or not where.is_relative_to(top):
            continue
        relative = f"{where.relative_to(top).as_posix()}/"
        if git(top, "check-ignore", "-q", "--", relative).returncode != 0:
            patterns.append(f"/{relative}")
    return patterns


def git_exclude(workspace: Path, patterns: list[str]) -> Path:
    """Append `patterns` to the repository's info/exclude; returns that file's path."""
    path = Path(
        must(workspace, "rev-parse", "--path-format=absolute", "--git-path", "info/exclude").strip()
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    lead = "" if not text or text.endswith("\n") else "\n"
    added = "".join(f"{pattern}\n" for pattern in patterns)
    path.write_text(
        f"{text}{lead}# flower's run folders (delete to undo)\n{added}", encoding="utf-8"
    )
    return path
