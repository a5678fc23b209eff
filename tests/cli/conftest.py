"""Run the flower CLI as a user does: a subprocess, pointed at the fake API."""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from flower.testing import DEMO_ASK, FakeAPI, Reply, Request, When, rules, starter_cast, text, tool
from tests.conftest import hearing_ctrl_c
from tests.processes import wait_running_below

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


def start_flower(*args: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    """`flower ARGS` in the background, in a process group of its own, output captured."""
    return subprocess.Popen(
        [*FLOWER, *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


READS = {"0", "7", "23", "270", "271"}  # x86_64 read, poll, select, pselect6, ppoll


def waiting_for_input(pid: int, timeout: float = 10.0) -> None:
    """Wait until `pid` is blocked in a read of its input. A prompt is on the screen before
    its read starts, and a Ctrl+C that lands in between is taken by Python only at its next
    check, which a read already blocked never reaches (the test then waited 60 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/syscall").read_text().split(" ", 1)[0] in READS:
                return
        time.sleep(0.01)
    raise TimeoutError(f"process {pid} never waited for input")


@contextlib.contextmanager
def on_a_terminal(
    *args: str,
    env: dict[str, str],
    cwd: Path,
    program: Sequence[str] = FLOWER,
    stop: signal.Signals = signal.SIGKILL,
    columns: int = 200,
) -> Iterator[tuple[subprocess.Popen[bytes], Screen]]:
    """`flower ARGS` (or `program ARGS`) on a terminal of its own (a pty; no colour,
    `columns` wide) that is its controlling terminal, so Ctrl+C typed there reaches its whole
    foreground process group as in a real terminal; and its screen. Ended with `stop` sent
    to its process group if it is still running at the end."""
    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))

    def own_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        hearing_ctrl_c()  # as a terminal's foreground job, even from `make check &`

    proc = subprocess.Popen(
        [*program, *args],
        stdin=child,
        stdout=child,
        stderr=child,
        env={**env, "NO_COLOR": "1", "COLUMNS": str(columns)},
        cwd=cwd,
        preexec_fn=own_terminal,  # the child only calls setsid and an ioctl: fork-safe
    )
    os.close(child)
    try:
        yield proc, Screen(parent)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, stop)  # its own session: the group is its pid
            proc.wait(timeout=120)
        os.close(parent)


def stop_mid_work(
    api: FakeAPI, env: dict[str, str], workspace: Path
) -> subprocess.CompletedProcess[str]:
    """`flower DEMO_ASK` SIGTERMed while its worker runs a slow tool: the brief and the goal
    frozen, the work begun. Returns the stopped run's exit code and output."""
    slow = "python3 -c 'import time; time.sleep(60)'"

    def worker(request: Request) -> Reply:
        return text("slept") if request.tool_results() else tool("Bash", {"command": slow})

    api.script = rules((When(kind="subagent"), worker), (When(), starter_cast()))
    proc = start_flower(
        DEMO_ASK, "--timeout", "0", "-w", str(workspace), env=env, cwd=workspace.parent
    )
    try:
        assert api.wait_for(lambda reqs: any(r.kind == "subagent" for r in reqs), 120)
        wait_running_below(proc.pid, "python3", "time.sleep(60)")  # the worker's slow tool
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Screen:
    """A process's terminal (the parent side of a pty): what it printed so far, without
    terminal controls, and a keyboard. Read while waiting, so the process never blocks on a
    full terminal."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.raw = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def wait_until(self, done: Callable[[], bool], timeout: float = 90) -> bool:
        """Read the screen until `done()` holds; False if it did not within `timeout`."""
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if select.select([self.fd], [], [], min(left, 0.2))[0]:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the process closed the terminal
                    return done()
                self.raw += self._decoder.decode(chunk)
        return True

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw)  # over the whole: a control may span two reads

    def pause(self, seconds: float) -> None:
        """Let `seconds` pass, reading what is printed meanwhile."""
        self.wait_until(lambda: False, seconds)

    def expect(self, needle: str, timeout: float = 90) -> None:
        seen = self.wait_until(lambda: needle in self.text, timeout)
        assert seen, f"never saw {needle!r}; screen:\n{self.text[-3000:]}"

    def type(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())
