"""Which kernel the agent's processes talk to: the host's (runc), or gVisor's (runsc).

The box's own word is no proof: a name such as `uname -r`, /proc/version or a log line is
text that a hostile image, an LD_PRELOAD or a wrapper can print. The verdict therefore rests
on facts that only a gVisor sandbox produces, two of them out of the box's reach:

1. The host's process table (read on the host, not in the box). The engine records the
   container's first process (State.Pid). Under runc that is the box's own init, a host
   process like any other, run as the box's uid; every process of the agent is one too.
   Under gVisor it is runsc's sandbox (the Sentry, argv[0] `runsc-sandbox`), run as its own
   unprivileged user, and no process of the agent exists on the host at all: its system
   calls are served by the Sentry in user space. A process in the box cannot rename a
   process that is not in its kernel, nor change another's uid.
2. The kernel's boot time (/proc/stat `btime`), read in the box and on the host. A shared
   kernel tells the box the host's boot time: /proc is that kernel's, and the box can mount
   nothing over it. gVisor's Sentry is a kernel that boots with the box, so its boot time
   is the box's start, not the host's.
3. Corroboration only, never the verdict: the kernel's log (syslog(2)). Linux refuses it to
   a process without CAP_SYSLOG (the box has none); the Sentry answers with its own boot
   messages, which begin "Starting gVisor...".

PASS when gVisor was asked for and facts 1 and 2 say it is there; FAIL when it was asked for
and either is missing (the negative control `--weaken claims_runsc`: a box whose spec says
runsc, run on runc). A box that asked for runc PASSes when it runs on the host's kernel, as
asked, and says so; the all-weak control claims runsc too, so this probe FAILs there. The
verdict is made on the host (flowerbox.selftest.verdicts, in the language of the command
line); this module is the facts alone, which the probes in the box import too.
"""

from __future__ import annotations

import contextlib
import ctypes
from pathlib import Path
from typing import Any

SANDBOX_PREFIX = "runsc"  # argv[0] of gVisor's sandbox process: runsc-sandbox (and runsc-*)
PLATFORM_FLAG = "--platform="  # in the sandbox's argv when the engine registered one
BOOT_SLACK_S = 2  # btime is rounded to seconds; more than this apart: two kernels
SYSLOG_READ_ALL = 3  # klogctl(2) SYSLOG_ACTION_READ_ALL
SYSLOG_LINES = 3


def boot_time(stat: Path = Path("/proc/stat")) -> int | None:
    """The kernel's boot time (seconds since the epoch), as this process's kernel says."""
    with contextlib.suppress(OSError, ValueError):
        for line in stat.read_text().splitlines():
            if line.startswith("btime "):
                return int(line.split()[1])
    return None


def kernel_log() -> str:
    """The first lines of the kernel's log (syslog(2)), or the error that refused it."""
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(4096)
    size = libc.klogctl(SYSLOG_READ_ALL, buffer, len(buffer))
    if size < 0:
        return f"refused: errno {ctypes.get_errno()}"
    lines = buffer.raw[:size].decode(errors="replace").splitlines()
    return " | ".join(line.strip() for line in lines[:SYSLOG_LINES])


def platform_of(args: list[str]) -> str:
    """The `--platform=` among runsc's arguments (how gVisor traps the agent's system calls),
    or "" when there is none (runsc's default)."""
    return next((arg[len(PLATFORM_FLAG) :] for arg in args if arg.startswith(PLATFORM_FLAG)), "")


def host_process(pid: int | None) -> dict[str, Any]:
    """The box's first process as the host kernel sees it: argv[0], real uid, seccomp mode and
    the `--platform=` it was given (gVisor's sandbox: how its system calls are trapped; ""
    when none, runsc's default) (readable by any user: /proc/PID/cmdline and status), or why
    it could not be read."""
    if not pid:
        return {"error": "the engine recorded no process for the box"}
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError as exc:
        return {"error": f"/proc/{pid} on this host: {exc.strerror}"}
    fields = dict(line.partition(":")[::2] for line in status.splitlines())
    return {
        "argv0": argv[0].decode(errors="replace"),
        "platform": platform_of([arg.decode(errors="replace") for arg in argv[1:]]),
        "uid": int(fields.get("Uid", "-1").split()[0]),
        "seccomp": int(fields.get("Seccomp", "0").strip() or 0),
    }


def sandboxed(host: dict[str, Any]) -> bool:
    """Whether the host sees the box's first process as gVisor's sandbox (fact 1)."""
    process = host.get("argv0")
    return isinstance(process, str) and Path(process).name.startswith(SANDBOX_PREFIX)
