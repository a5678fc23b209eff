"""The process between flower and the Claude Code CLI: the CLI's tree dies with flower.

Run as a script (`python -I -S reaper.py CLI-ARGS...`, through reaper.sh, which the SDK runs as
its `cli_path`), so it imports the standard library only. Linux only: it needs prctl.

Why a process in between, and not only a parent-death signal on the CLI: the CLI starts its
Bash tools in sessions of their own, so a signal to the CLI or its process group never reaches
them. This process is a *child subreaper*: whatever the CLI leaves behind is re-parented to it
instead of to init, so "everything below me" is always its own descendants, which it can find
in /proc and kill.

    flower ──(PDEATHSIG: SIGUSR1)── reaper ──(PDEATHSIG: SIGKILL)── claude ── bash tools ...

- flower dies (even by SIGKILL): the kernel sends SIGUSR1 here; the whole tree is killed.
- the CLI exits: what it left running is killed, and this process exits with its code.
- SIGTERM (the SDK closing the CLI) is passed on to the CLI, which ends as it chooses.
- the CLI runs in a session of its own, without a controlling terminal: Ctrl+C (and the
  other keys and hang-ups of a terminal) reach flower alone, which decides what they mean
  (an interrupt through the SDK, a clean stop). Had the CLI got the terminal's SIGINT too, it
  would end its turn by itself at the first Ctrl+C, before the human said anything: a failed
  attempt, or an empty report judged as a round (issue 21). Here they are ignored.
- this process is SIGKILLed: the CLI gets SIGKILL (its own death signal).

Where the kernel has no child subreaper (gVisor's runsc before 2023: prctl says EINVAL; a
flowerbox `--runtime runsc` box), a process whose parent exits goes to init instead, out of
the tree. So the CLI is started with ENV_TAG in its environment (which every process below it
inherits): the tree is "my descendants, plus every process carrying my tag", found in /proc
either way; only the orphans cannot be waited for (init reaps them). Decided at run time, by
what prctl answers, not by a flag.

A resumed session runs in a temp CLAUDE_CONFIG_DIR (`claude-resume-*`) that the SDK removes
when the session ends, which a killed flower never reaches. This process writes OWNER_FILE into
it ("<flower's pid> <its start time>"), so the next run of the workspace can tell a dead run's
folder from a live one's (flower/core/leftovers.py).

The parent-death signal follows the *thread* that forked: the SDK spawns the CLI from the
event loop's thread (anyio.open_process), which lives as long as the loop that uses the CLI.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import sys
import time
from types import FrameType

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PARENT_GONE = signal.SIGUSR1
IGNORED = (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
ENV_PYTHON = "FLOWER_REAPER_PYTHON"
ENV_CLI = "FLOWER_REAPER_CLI"
ENV_PARENT = "FLOWER_REAPER_PARENT"
ENV_TAG = "FLOWER_REAPER_TAG"  # "<reaper pid>-<its start time>": in the CLI's tree's environment
ORPHAN_ROUNDS = 50  # tagged orphans (not children: no waitpid) killed until none is left
RESUME_PREFIX = "claude-resume-"  # the SDK's tempfile.mkdtemp prefix (session_resume.py)
OWNER_FILE = ".flower-owner"

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def parents() -> dict[int, int]:
    """pid -> parent pid of every process this user can see in /proc."""
    found: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        found[int(name)] = int(fields[1])
    return found


def started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (with the pid, an identity that a
    reused pid does not share); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[19].decode()
    except OSError:
        return None


def mark_owner(config_dir: str, parent: int) -> None:
    """Name the flower process that owns this resumed session's temp folder (best effort)."""
    with contextlib.suppress(OSError):
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(os.path.join(config_dir, OWNER_FILE), flags, 0o600)
        try:
            os.write(fd, f"{parent} {started(parent)}\n".encode())
        finally:
            os.close(fd)


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in parents().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def tagged(tag: str) -> list[int]:
    """Every process this user can see whose environment carries ENV_TAG=`tag` (zombies
    show an empty one)."""
    needle = f"{ENV_TAG}={tag}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                if needle in environ.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue  # gone meanwhile, or not ours
    return found


def kill_tree(tag: str) -> None:
    """SIGKILL every descendant and every process tagged `tag`, and reap them; returns when
    no child and no tagged process is left.

    With a subreaper, killed processes' children are re-parented here, so each round finds
    what appeared since the last one; waitpid ends the loop with ECHILD. Without one, they
    go to init: the tag finds them, and they are killed until none is left.
    """
    me = os.getpid()

    def kill(pids: list[int]) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    while True:
        kill([*descendants(me), *tagged(tag)])
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    for _ in range(ORPHAN_ROUNDS):
        left = tagged(tag)
        if not left:
            return
        kill(left)
        time.sleep(0.02)


def _exec_cli(cli: str, argv: list[str], reaper: int, tag: str) -> None:
    """In the forked child: default signals, no terminal, die with the reaper, become the
    CLI."""
    for sig in IGNORED:
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.setsid()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != reaper:  # the reaper died before the line above took effect
            os._exit(128 + signal.SIGKILL)
        os.execve(cli, [cli, *argv], {**os.environ, ENV_TAG: tag})
    except OSError as exc:
        print(f"flower: cannot start the Claude Code CLI {cli}: {exc}", file=sys.stderr)
    os._exit(127)


def main(argv: list[str]) -> int:
    cli = os.environ.pop(ENV_CLI)
    parent = int(os.environ.pop(ENV_PARENT))
    os.environ.pop(ENV_PYTHON, None)
    me = os.getpid()
    tag = f"{me}-{started(me)}"
    for sig in IGNORED:
        signal.signal(sig, signal.SIG_IGN)

    def parent_gone(signum: int, frame: FrameType | None) -> None:
        kill_tree(tag)
        os._exit(128 + PARENT_GONE)

    signal.signal(PARENT_GONE, parent_gone)
    try:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    except OSError as exc:  # no subreaper in this kernel (gVisor): the tag finds orphans
        if exc.errno != errno.EINVAL:
            raise
    prctl(PR_SET_PDEATHSIG, PARENT_GONE)
    if os.getppid() != parent:  # flower died before the death signal was armed
        return 128 + PARENT_GONE
    config_dir = os.environ.get("CLAUDE_CONFIG_DIR", "")
    if os.path.basename(config_dir).startswith(RESUME_PREFIX):
        mark_owner(config_dir, parent)
    child = os.fork()
    if child == 0:
        _exec_cli(cli, argv, me, tag)
    signal.signal(signal.SIGTERM, lambda signum, frame: os.kill(child, signum))
    while True:  # reap orphans re-parented here as they end, until the CLI itself ends
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            break
    kill_tree(tag)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
