"""Run the flower CLI as a user does: a subprocess, pointed at the fake API."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.testing import DEMO_ASK, FakeAPI, Reply, Request, When, rules, starter_cast, text, tool

FLOWER = [sys.executable, "-m", "flower.cli"]


def offline_env(api: FakeAPI, home: Path) -> dict[str, str]:
    """This process's environment minus any real credential, plus the fake API."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    return {**base, **api.env(home=home), "XDG_CONFIG_HOME": str(home / ".config")}


@pytest.fixture
def cli_env(fake_api: FakeAPI, claude_home: Path) -> dict[str, str]:
    return offline_env(fake_api, claude_home)


def flower(
    *args: str, env: dict[str, str], cwd: Path, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """`flower ARGS...` as a script runs it: stdin is not a terminal (it is /dev/null)."""
    return subprocess.run(
        [*FLOWER, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def stop_mid_work(
    api: FakeAPI, env: dict[str, str], workspace: Path
) -> subprocess.CompletedProcess[str]:
    """`flower DEMO_ASK` SIGTERMed while its worker runs a slow tool: the brief and the goal
    frozen, the work begun. Returns the stopped run's exit code and output."""
    slow = "python3 -c 'import time; time.sleep(60)'"

    def worker(request: Request) -> Reply:
        return text("slept") if request.tool_results() else tool("Bash", {"command": slow})

    api.script = rules((When(kind="subagent"), worker), (When(), starter_cast()))
    proc = subprocess.Popen(
        [*FLOWER, DEMO_ASK, "--timeout", "0", "-w", str(workspace)],
        env=env,
        cwd=workspace.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert api.wait_for(lambda reqs: any(r.kind == "subagent" for r in reqs), 120)
        time.sleep(1.0)  # the slow tool is running in the worker
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Screen:
    """The process's terminal: what it printed so far, and a keyboard."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.text = ""

    def expect(self, needle: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {needle!r}; screen:\n{self.text[-3000:]}"
            if select.select([self.fd], [], [], min(left, 0.2))[0]:
                try:
                    self.text += ANSI.sub("", os.read(self.fd, 65536).decode(errors="replace"))
                except OSError:  # the process closed the terminal
                    break
        assert needle in self.text, f"never saw {needle!r}; screen:\n{self.text[-3000:]}"

    def type(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())


@contextlib.contextmanager
def on_a_terminal(
    args: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    program: list[str] = FLOWER,
    stop: signal.Signals = signal.SIGKILL,
) -> Iterator[tuple[subprocess.Popen[bytes], Screen]]:
    """`flower ARGS...` (or `program ARGS...`) with a pty as its controlling terminal (so
    Ctrl+C typed there reaches its whole foreground process group, as in a real terminal),
    and that terminal's screen; on the way out, `stop` ends it if it still runs."""
    main, follower = pty.openpty()

    def own_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [*program, *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**env, "NO_COLOR": "1", "COLUMNS": "200"},
        cwd=cwd,
        preexec_fn=own_terminal,  # the child only calls setsid and an ioctl: fork-safe
    )
    os.close(follower)
    try:
        yield proc, Screen(main)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, stop)  # its own session: the group is its pid
            proc.wait(timeout=120)
        os.close(main)
