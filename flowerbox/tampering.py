"""The probes of what the box could change in the workspace that would outlive it: the
protected paths, the folders above them, and git's ways of pointing the user's repository
elsewhere (run by `python -m flowerbox.probes`, like the others). Whatever a probe manages to
create or move is put back at once; only the `.git/commondir` plant stays, for the host to
look for in the user's real `.git` (flowerbox.selftest removes it if it got there).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

Observation = dict[str, Any]


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def protected_paths(args: argparse.Namespace) -> Observation:
    """Try to write each protected path (a new file in a folder; open-for-append on a file,
    writing nothing) and to rename it. Anything that did get created or moved is put back at
    once."""
    workspace = Path(args.workspace)
    writable, refused, missing = [], {}, []
    renamed, rename_refused = [], {}
    for name in args.protect:
        path = workspace / name
        if not path.exists():
            missing.append(name)
            continue
        try:
            if path.is_dir():
                planted = path / f".flowerbox-selftest-{args.token}"
                planted.write_text("")
                planted.unlink()
            else:
                os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
            writable.append(name)
        except OSError as exc:
            refused[name] = _err(exc)
        if error := _rename_back(path, args.token):
            rename_refused[name] = error
        else:
            renamed.append(name)
    return {
        "writable": writable,
        "refused": refused,
        "missing": missing,
        "renamed": renamed,
        "rename_refused": rename_refused,
    }


def _rename_back(path: Path, token: str) -> str:
    """'' when `path` could be renamed (it is renamed back at once), else the refusal."""
    moved = path.with_name(f"{path.name}.flowerbox-moved-{token}")
    try:
        os.rename(path, moved)
    except OSError as exc:
        return _err(exc)
    try:
        os.rename(moved, path)
    except OSError as exc:  # pragma: no cover - a rename that works one way only
        return f"renamed to {moved} and NOT back: {_err(exc)}"
    return ""


def _parents(names: list[str]) -> list[str]:
    """The folders between each protected path and the workspace root (the root, a mount
    point of its own, excluded), outermost first, each once."""
    found: list[str] = []
    for name in names:
        for parent in reversed(Path(name).parents[:-1]):
            if str(parent) not in found:
                found.append(str(parent))
    return found


def protected_parents(args: argparse.Namespace) -> Observation:
    """Rename every folder above a protected path (`.git` above `.git/hooks`): a renamed
    parent takes its read-only mount along and leaves the old name free for a new one.
    Each rename that works is undone at once."""
    workspace = Path(args.workspace)
    present = [name for name in args.protect if (workspace / name).exists()]
    renamed, refused = [], {}
    for parent in _parents(present):
        if error := _rename_back(workspace / parent, args.token):
            refused[parent] = error
        else:
            renamed.append(parent)
    return {"renamed": renamed, "refused": refused}


def git_redirects(args: argparse.Namespace) -> Observation:
    """Git's ways of pointing the user's repository elsewhere, tried from inside:
    `.git/commondir` (planted with ".", which leaves git working, and left for the host to look
    for in the user's real `.git`), and a replacement `.git`: moved away, then a directory and
    a `gitdir:` file (as a worktree has) put in its place. Every move is undone at once.
    A workspace that is a linked worktree has a `.git` *file* naming its gitdir: it is tried
    for a write (open-for-append, writing nothing) and a rename."""
    git = Path(args.workspace) / ".git"
    if git.is_symlink() or (git.exists() and not git.is_dir() and not git.is_file()):
        return {"git": "neither a folder nor a file"}
    if not git.exists():
        return {"git": "absent"}
    if git.is_file():
        try:
            os.close(os.open(git, os.O_WRONLY | os.O_APPEND))
            writable = ""
        except OSError as exc:
            writable = _err(exc)
        renamed = _rename_back(git, args.token)
        return {"git": "file", "file_refused": writable, "file_rename_refused": renamed}
    observation: Observation = {"git": "folder"}
    commondir = git / "commondir"
    if commondir.exists() or commondir.is_symlink():
        observation["commondir"] = "there already"
    else:
        try:
            commondir.write_text(".\n")
            observation["commondir"] = "planted"
        except OSError as exc:
            observation["commondir"] = _err(exc)
    moved = git.with_name(f".git.flowerbox-moved-{args.token}")
    try:
        os.rename(git, moved)
    except OSError as exc:
        return {**observation, "moved": False, "replace": _err(exc)}
    replaced = []
    try:
        git.mkdir()
        git.rmdir()
        replaced.append("a folder")
        git.write_text(f"gitdir: {moved}\n")
        git.unlink()
        replaced.append("a gitdir: file")
    except OSError as exc:
        replaced.append(_err(exc))
    finally:
        os.rename(moved, git)
    return {**observation, "moved": True, "replace": f"replaced by {' and '.join(replaced)}"}
