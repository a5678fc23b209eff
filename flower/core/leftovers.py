"""What a killed run leaves in the temp folder, removed by the next run of the same workspace.

A session resumed from the store runs in a `claude-resume-*` folder that the SDK deletes when
the session ends; a SIGKILLed flower never gets there. The folder holds a copy of the session
and of the CLI's credentials file, so it should not wait for a reboot. Runtime calls sweep()
when it starts: it removes such folders that belong to this workspace (they hold
`projects/<this workspace's project key>`) and to a dead flower process (the owner file the
reaper wrote names it, with its start time so that a reused pid does not count as alive).

The temp folder may be shared (/tmp), so only folders owned by this user count, links are not
followed (lstat; rmtree removes through file descriptors), and a folder without an owner file
is left alone: flower did not start its CLI (another program's, a macOS run's), or is still
about to. That makes the sweep Linux's, like the reaper.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from claude_agent_sdk import project_key_for_directory

from flower.core.reaper import OWNER_FILE, RESUME_PREFIX, started


def sweep(
    workspace: Path,
    *,
    temp: Path | None = None,
    salvage: Callable[[Path], object] | None = None,
) -> list[Path]:
    """Remove this workspace's dead runs' resume folders; the ones removed. `salvage` is
    called with each before it goes (the store takes what the kill kept from it)."""
    key = project_key_for_directory(workspace)
    try:
        entries = list(os.scandir(temp or tempfile.gettempdir()))
    except OSError:
        return []
    removed = []
    for entry in entries:
        path = Path(entry.path)
        if entry.name.startswith(RESUME_PREFIX) and is_leftover(path, key):
            if salvage is not None:
                salvage(path)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def is_leftover(folder: Path, project_key: str) -> bool:
    """A real folder of this user's, for this project key, whose flower process is gone."""
    if not _own_dir(folder) or not _own_dir(folder / "projects" / project_key):
        return False
    owner = _owner(folder / OWNER_FILE)
    if owner is None:
        return False
    pid, start = owner
    return started(pid) != start


def _own_dir(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def _owner(path: Path) -> tuple[int, str] | None:
    """(pid, start time) from an owner file: a small regular file of ours, never a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return None
        text = os.read(fd, 64).decode("ascii", "replace")
    finally:
        os.close(fd)
    match text.split():
        case [pid, start] if pid.isdigit():
            return int(pid), start
    return None
