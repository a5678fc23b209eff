"""flowerbox.inside.entry, the agent container's entry: the relay first (in its own threads),
then the command, whose exit status becomes the container's (docker's 128+N for a signal, as
a shell would)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

PY = sys.executable


def inside(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "flowerbox.inside.entry", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_commands_exit_code_is_the_containers() -> None:
    assert inside("--", PY, "-c", "raise SystemExit(3)").returncode == 3


def test_a_command_killed_by_a_signal_exits_128_plus_its_number() -> None:
    kill_self = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    assert inside("--", PY, "-c", kill_self).returncode == 143


def test_the_command_reaches_the_socket_through_the_relay(sockdir: Path) -> None:
    path = sockdir / "echo.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()

        def echo_once() -> None:
            conn, _ = server.accept()
            with conn:
                conn.sendall(conn.recv(64).upper())

        threading.Thread(target=echo_once, daemon=True).start()
        port = free_port()
        probe = (
            f"import socket; c = socket.create_connection(('127.0.0.1', {port}), 5); "
            "c.sendall(b'ping'); print(c.recv(64).decode())"
        )
        done = inside("--relay", f"127.0.0.1:{port}={path}", "--", PY, "-c", probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "PING"


def test_a_socket_that_never_appears_is_exit_2_naming_it(sockdir: Path) -> None:
    missing = sockdir / "never.sock"
    done = subprocess.run(
        [
            PY,
            "-c",
            "import flowerbox.inside.entry as i; i.READY_TIMEOUT_S = 0.5; "
            f"raise SystemExit(i.main(['--relay', '127.0.0.1:28182={missing}', '--', 'true']))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"the gateway's socket {missing} never appeared" in done.stderr


def test_a_key_file_becomes_the_commands_key_and_only_its(tmp_path: Path) -> None:
    """The broker's run token reaches the command from a file (never the container's
    environment or argv, which `docker inspect` shows)."""
    key_file = tmp_path / "token"
    key_file.write_text("run-token-abc\n")
    show = "import os; print(os.environ['ANTHROPIC_API_KEY'])"
    done = inside("--key-file", str(key_file), "--", PY, "-c", show)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "run-token-abc"


def test_a_missing_key_file_is_exit_2_naming_it(tmp_path: Path) -> None:
    done = inside("--key-file", str(tmp_path / "none"), "--", PY, "-c", "print('ran')")
    assert done.returncode == 2 and "ran" not in done.stdout
    assert str(tmp_path / "none") in done.stderr


def test_the_relay_runs_in_the_entrys_own_process(sockdir: Path) -> None:
    """The entry relays in threads of its own (issue 31: a relay process of its own held 7
    MiB more in every box): the command's connection is served, and the command is the
    entry's only child. Its listeners are bound and accepting before the command starts, so
    the command never waits for the relay's start."""
    path = sockdir / "echo.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()

        def echo_once() -> None:
            conn, _ = server.accept()
            with conn:
                conn.sendall(conn.recv(64).upper())

        threading.Thread(target=echo_once, daemon=True).start()
        port = free_port()
        probe = (
            "import os, socket; parent = os.getppid(); "
            "print(open(f'/proc/{parent}/task/{parent}/children').read().split()); "
            f"c = socket.create_connection(('127.0.0.1', {port}), 5); "
            "c.sendall(b'ping'); print(c.recv(64).decode()); print(os.getpid())"
        )
        done = inside("--relay", f"127.0.0.1:{port}={path}", "--", PY, "-c", probe)
    assert done.returncode == 0, done.stderr
    children, answer, pid = done.stdout.split("\n")[:3]
    assert answer == "PING"
    assert children == repr([pid])


def test_a_port_already_taken_is_exit_2_naming_it(sockdir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = inside("--relay", f"127.0.0.1:{port}={sockdir / 'api.sock'}", "--", "true")
    assert done.returncode == 2
    assert "the relay cannot listen" in done.stderr and "in use" in done.stderr
