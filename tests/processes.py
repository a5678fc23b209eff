"""Which processes below a process run a command: what a test waits for where it once slept
"until the slow command runs". Host-side runs only: a box's processes are not the host's."""

from __future__ import annotations

import os
import time
from pathlib import Path


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:  # it ended meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def running_below(pid: int, program: str, needle: str) -> set[int]:
    """The processes below `pid` that are `program` (their argv[0]'s name) with `needle` in
    their arguments: the command itself, not the shell asked to start it."""
    found = set()
    for child in _descendants(pid):
        try:
            args = Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        argv = args.split("\0")
        if Path(argv[0]).name == program and any(needle in arg for arg in argv[1:]):
            found.add(child)
    return found


def wait_running_below(pid: int, program: str, needle: str, timeout: float = 120) -> set[int]:
    """`running_below`, once it finds one (the test fails if none runs within `timeout`)."""
    deadline = time.monotonic() + timeout
    while not (found := running_below(pid, program, needle)):
        assert time.monotonic() < deadline, f"{program} ... {needle} never ran below {pid}"
        time.sleep(0.05)
    return found
