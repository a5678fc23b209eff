"""Inside the agent's container: start the relay on ports bound here, then run the command
once the gateway's socket is there, and exit with its code.
`python -m inside.entry --relay 127.0.0.1:8080=/run/flowerbox/api.sock -- flower ...`

The container has no network; the relay turns the gateway's unix socket into the loopback
port ANTHROPIC_BASE_URL names. It runs in this process's threads (flowerbox.inside.relay's
`start`): a process of its own held 7 MiB more in every box (issue 31, a hundred runs on one
machine). SIGTERM and SIGINT are passed on to the command (flower stops at a message
boundary and records its step), and the relay goes when the command is done.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from flowerbox.inside import relay

READY_TIMEOUT_S = 20.0
LOOPBACK = ("127.0.0.1", "localhost")
LISTEN_BACKLOG = 128


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flowerbox.inside.entry")
    parser.add_argument("--relay", action="append", default=[], help="HOST:PORT=SOCKET")
    parser.add_argument("--key-file", type=Path, help="the command's ANTHROPIC_API_KEY")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    env = dict(os.environ)
    if args.key_file is not None:
        try:  # a broker's run token: a file, as the container's environment is inspectable
            env["ANTHROPIC_API_KEY"] = args.key_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            print(
                f"flowerbox: the run's key {args.key_file} cannot be read: {exc}", file=sys.stderr
            )
            return 2
    # The relay starts while the gateway may still be coming up (the host starts both
    # containers at once): it connects per connection, so only the command waits for the
    # gateway.
    stop = threading.Event()
    try:
        _start_relay(args.relay, stop)
    except OSError as exc:
        print(f"flowerbox: the relay cannot listen: {exc}", file=sys.stderr)
        return 2
    try:
        for mapping in args.relay:
            socket_path = Path(mapping.split("=", 1)[1])
            if not _wait_for(socket_path):
                print(
                    f"flowerbox: the gateway's socket {socket_path} never appeared",
                    file=sys.stderr,
                )
                return 2
        child = subprocess.Popen(command, env=env)

        def forward(signum: int, frame: FrameType | None) -> None:
            child.send_signal(signum)

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, forward)
        code = child.wait()
        # Killed by a signal: the shell's 128+N, as docker reports it (a negative return
        # code would leave the container as 256-N: 241 for SIGTERM).
        return 128 - code if code < 0 else code
    finally:
        stop.set()  # the process ends next, and the relay's threads with it


def _start_relay(mappings: list[str], stop: threading.Event) -> None:
    """The relay, in this process's threads, on loopback listeners bound here
    (`HOST:PORT=SOCKET` each); all bound before any relays, so a port taken is refused
    before the command starts."""
    listeners: list[tuple[socket.socket, Path]] = []
    try:
        for mapping in mappings:
            address, _, socket_path = mapping.partition("=")
            listeners.append((_bind(address), Path(socket_path)))
    except OSError:
        for listener, _ in listeners:
            listener.close()
        raise
    relay.start(listeners, stop)


def _bind(address: str) -> socket.socket:
    """A listener on `HOST:PORT`, loopback only (the box has no other network)."""
    host, _, port = address.rpartition(":")
    if host not in LOOPBACK or not port.isdigit():
        raise OSError(f"{address!r} is not a loopback HOST:PORT")
    return socket.create_server((host, int(port)), backlog=LISTEN_BACKLOG)


def _wait_for(path: Path) -> bool:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.01)
    return path.exists()


if __name__ == "__main__":
    sys.exit(main())
