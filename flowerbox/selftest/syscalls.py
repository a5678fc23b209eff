"""Syscalls Docker's default seccomp profile refuses, tried for real (the seccomp probe).

    tried = attempt_all()   # {"keyctl": "EPERM", "mount": "EFAULT", ...}

Each call is made through libc's `syscall()` with arguments the kernel itself rejects early
and harmlessly (an unknown keyctl operation, a NULL mount target, unknown perf flags...), so
nothing is ever created, mounted or loaded. A filter answers before the kernel looks at the
arguments, with EPERM; without one, the kernel's own answer (EFAULT, EINVAL, ENOTSUP, ENOSYS, or
success for the user namespace) shows the call got through. Where the kernel checks a
capability before the arguments (kexec_load on a kernel built with kexec), its answer is EPERM
too and cannot tell the filter from the missing capability (docs/selftest.md says so).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

CLONE_NEWUSER = 0x10000000
# Syscall numbers (include/uapi/asm-generic/unistd.h for aarch64; arch/x86/entry/syscalls for
# x86_64).
NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": {
        "unshare": 272,
        "keyctl": 250,
        "bpf": 321,
        "mount": 165,
        "kexec_load": 246,
        "open_by_handle_at": 304,
        "perf_event_open": 298,
    },
    "aarch64": {
        "unshare": 97,
        "keyctl": 219,
        "bpf": 280,
        "mount": 40,
        "kexec_load": 104,
        "open_by_handle_at": 265,
        "perf_event_open": 241,
    },
}
# The arguments: each rejected by the kernel before it does anything, when no filter refuses.
ARGUMENTS: dict[str, tuple[int, ...]] = {
    "unshare": (CLONE_NEWUSER,),  # in a child process: it would succeed without a filter
    "keyctl": (0x7FFFFFFF, 0, 0, 0, 0),  # an unknown operation: ENOTSUP
    "bpf": (0x7FFFFFFF, 0, 0),  # an unknown command, no attributes: EINVAL
    "mount": (0, 0, 0, 0, 0),  # a NULL target: EFAULT
    "kexec_load": (0, 0, 0, 0xFFFFFFFF),  # unknown flags: EINVAL (ENOSYS without kexec)
    "open_by_handle_at": (-1, 0, 0),  # a NULL handle: EFAULT (or EBADF)
    "perf_event_open": (0, 0, -1, -1, 0xFFFFFFFF),  # a NULL attr, unknown flags: EINVAL
}


def attempt_all() -> dict[str, str]:
    """Each syscall's outcome: "ok" or the errno's name. KeyError on an unknown machine."""
    numbers = NUMBERS[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    outcomes = {}
    for name, args in ARGUMENTS.items():
        if name == "unshare":
            outcomes[name] = _in_child(libc, numbers[name], args)
        else:
            outcomes[name] = _attempt(libc, numbers[name], args)
    return outcomes


def _attempt(libc: ctypes.CDLL, number: int, args: tuple[int, ...]) -> str:
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(arg) for arg in args))
    return "ok" if result >= 0 else _name(ctypes.get_errno())


def _in_child(libc: ctypes.CDLL, number: int, args: tuple[int, ...]) -> str:
    """The call in a forked child (a new user namespace would be this process's otherwise;
    it also needs a single-threaded caller); the child's exit code carries the errno."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child leaves through _exit
        outcome = _attempt(libc, number, args)
        os._exit(0 if outcome == "ok" else getattr(errno, outcome, 255))
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return "ok" if code == 0 else _name(code)


def _name(number: int) -> str:
    return errno.errorcode.get(number, str(number))
