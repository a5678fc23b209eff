"""The probes of what the box could change in the workspace that would outlive it: the
protected paths, the folders above them, and git's ways of pointing the user's repository
elsewhere (run by `python -m selftest.probes`, like the others). Whatever a probe manages to
create or move is put back at once; only the `.git/commondir` plant (a redirect to a folder of
hooks) stays, for the host to look for in the user's real `.git`, and the trust-boundary
attacks of `host_plants` stay, for the host side to be run against (flowerbox.selftest.hostboundary
judges them, then removes each plant).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Observation = dict[str, Any]
HOOKS_PLANT = "fbx-hooks-"  # + the token: the folder in `.git` the planted commondir names
FORGED_PREFIX = "20000101-000000-"  # + 6 hex digits: a run id's shape, for the forged record


@dataclass(frozen=True)
class Plants:
    """Where host_plants puts each trust-boundary attack, relative to the workspace; the host
    side (selftest.hostboundary) reads and removes the same names. Everything but `.env` and
    the forged record lies in a run folder of the self-test's own, never in runs/ itself, so
    nothing of the user's there is moved or replaced."""

    token: str

    @property
    def run_dir(self) -> str:
        """The run folder of the check's run: its asks.json, inbox/, events/."""
        return f"runs/selftest-{self.token}"

    @property
    def evil(self) -> str:
        """What the planted PYTHONPATH names: a sitecustomize.py."""
        return f"{self.run_dir}/evil"

    @property
    def forged_id(self) -> str:
        return FORGED_PREFIX + self.token[:6]

    @property
    def record(self) -> str:
        return f"runs/flowerbox/{self.forged_id}/meta.json"

    def events(self, run_id: str) -> str:
        return f"{self.run_dir}/events/{run_id}.jsonl"

    @property
    def usage(self) -> str:
        """Where compose's gateway writes its meter (the host reads its own ledger instead)."""
        return f"{self.run_dir}/gateway-usage.json"

    def dotenv_url(self, port: int) -> str:
        """The planted ANTHROPIC_BASE_URL: the probe server, with a path that says whose."""
        return f"http://127.0.0.1:{port}/fbx-dotenv-{self.token}"


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
    `.git/commondir` (naming a folder of hooks_plant's, left for the host to look for in the
    user's real `.git` and to run `git status` against), and a replacement `.git`: moved away,
    then a directory and a `gitdir:` file (as a worktree has) put in its place. Every move is
    undone at once.
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
            hooks_plant(git, args.token, args.host_marker)
            commondir.write_text(f"{HOOKS_PLANT}{args.token}\n")
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


def hooks_plant(git: Path, token: str, marker: str) -> Path:
    """A folder in `git` that works as a commondir: the repository's objects and refs (by
    relative links), a config whose `core.fsmonitor` and a `post-index-change` hook each touch
    `marker`-something. A `git status` in a repository whose commondir names it runs both."""
    folder = git / f"{HOOKS_PLANT}{token}"
    (folder / "hooks").mkdir(parents=True)
    _removable(folder, folder / "hooks")
    for name in ("objects", "refs"):
        os.symlink(f"../{name}", folder / name)
    (folder / "config").write_text(
        f'[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch {marker}-fsmonitor; true"\n'
    )
    hook = folder / "hooks" / "post-index-change"
    hook.write_text(f"#!/bin/sh\ntouch '{marker}-hook'\n")
    hook.chmod(0o755)
    return folder


def host_plants(args: argparse.Namespace) -> Observation:
    """Plant the trust-boundary attacks (docs/threat-model.md) for the host side to be run
    against once the box is gone, and leave them there: a workspace `.env` redirect (the key's
    URL to the probe server, a PYTHONPATH to a sitecustomize.py that touches the host marker),
    a forged "running" run record naming a folder outside, `asks.json` linked to /dev/zero and
    `inbox` to that folder, FIFOs at the events file and the gateway meter. The git hook
    redirect is git_redirects' commondir plant. Says what was planted, or why not."""
    ws, plants = Path(args.workspace), Plants(args.token)
    marker, outside = args.host_marker, args.outside
    run_dir = ws / plants.run_dir
    done: Observation = {}

    def dotenv() -> str:
        evil = ws / plants.evil
        evil.mkdir(parents=True)
        (evil / "sitecustomize.py").write_text(
            f"import pathlib\npathlib.Path({marker + '-sitecustomize'!r}).touch()\n"
        )
        text = f"ANTHROPIC_BASE_URL={plants.dotenv_url(args.server[1])}\nPYTHONPATH={evil}\n"
        try:
            fd = os.open(ws / ".env", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:  # the user's own, hidden behind an empty read-only file
            try:
                os.close(os.open(ws / ".env", os.O_WRONLY | os.O_APPEND))  # writes nothing
            except OSError as exc:
                return f"yours, read-only here ({_err(exc)})"
            return "yours, and writable here"
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        return "planted"

    def record() -> None:
        meta = {
            "run_id": plants.forged_id,
            "status": "running",
            "keeper_pid": 1,
            "host": socket.gethostname(),
            "started": "2000-01-01T00:00:00.000+00:00",
            "workspace": str(ws),
            "run_dir": str(ws / "runs"),
            "command": ["once", "forged"],
            "spec": {
                "workspace": str(ws),
                **dict.fromkeys(("socket_dir", "secrets_dir", "state_dir", "home"), outside),
                "command": ["sh", "-c", f"touch {marker}-forged"],
            },
        }
        path = ws / plants.record
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(meta))

    def links() -> None:
        os.symlink("/dev/zero", run_dir / "asks.json")
        os.symlink(outside, run_dir / "inbox")

    def fifos() -> None:
        (run_dir / "events").mkdir()
        os.mkfifo(ws / plants.events(args.run_id))
        os.mkfifo(ws / plants.usage)

    records = (ws / plants.record).parent.parent
    made_records = not os.path.lexists(records)
    try:
        run_dir.mkdir(parents=True)
    except OSError as exc:
        return {"run_dir": _err(exc)}
    for name, plant in (("dotenv", dotenv), ("record", record), ("links", links), ("fifos", fifos)):
        try:
            done[name] = plant() or "planted"
        except OSError as exc:
            done[name] = _err(exc)
    made = [run_dir, run_dir / "events", ws / plants.evil, (ws / plants.record).parent]
    _removable(*made, *([records] if made_records else []))
    return done


def _removable(*folders: Path) -> None:
    """A box running as root (a negative control) leaves its folders open to all, so the
    user's host side can remove what it planted in them."""
    if os.geteuid() == 0:
        for folder in folders:
            if folder.is_dir() and not folder.is_symlink():
                folder.chmod(0o777)
