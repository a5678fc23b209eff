"""The relay inside the agent's container: loopback TCP ports piped to the gateway's sockets.

    python -m flowerbox.inside.relay --listen 127.0.0.1:8080=/run/flowerbox/api.sock \\
        [--listen 127.0.0.1:3128=/run/flowerbox/proxy.sock ...]

In a box it runs in the entry's own process (`start`, flowerbox.inside.entry); run on its own
(tests, benchmarks) it is this command.

The container has no network; the gateway's unix sockets are mounted into it. Each mapping is
a TCP listener on 127.0.0.1 whose every connection is joined byte for byte to a new
connection to the socket, both ways, half-closes passed on (an EOF from one side becomes a
write EOF on the other), until both directions have ended. It knows nothing of HTTP.

When every listener is up it prints one line per mapping, "relay 127.0.0.1:PORT -> PATH"
(port 0 picks a free port and the line shows the real one). A socket that cannot be reached
closes that one TCP connection and nothing else. SIGTERM or SIGINT: exit 0.

Threads (one per listener, two per connection: the box makes a handful), not asyncio: the
relay runs in every box for the whole run, and asyncio's modules alone held 7 of its 11 MiB
(issue 31: a hundred runs on one machine).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

__all__ = ["Mapping", "main", "parse_mapping", "serve", "start"]

CHUNK = 64 * 1024
ACCEPT_RETRY_S = 0.1
STOP_POLL_S = 1.0


class Mapping(NamedTuple):  # not a dataclass: those import inspect, ast and dis (1.5 MiB)
    """One `HOST:PORT=SOCKET` argument (only loopback hosts are accepted), or one
    `FD=SOCKET`: a listening socket the caller bound and handed down as `fd`."""

    host: str
    port: int
    socket: Path
    fd: int | None = None


def parse_mapping(text: str) -> Mapping:
    address, sep, path = text.partition("=")
    host, _, port = address.rpartition(":")
    if not sep or not path or not port.isdigit() or host not in ("127.0.0.1", "localhost"):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected 127.0.0.1:PORT=/path/to.sock (loopback only)"
        )
    return Mapping(host, int(port), Path(path))


def parse_inherited(text: str) -> Mapping:
    """`FD=SOCKET`: a loopback listener already bound by the caller (the box's entry binds
    before it starts the relay, so connections wait in its backlog while the relay starts)."""
    fd, sep, path = text.partition("=")
    if not sep or not path or not fd.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected FD=/path/to.sock")
    return Mapping("127.0.0.1", 0, Path(path), int(fd))


def _pipe(source: socket.socket, target: socket.socket) -> None:
    """Copy until EOF, then half-close the far side; an error shuts both down outright (the
    other direction's read then ends too)."""
    try:
        while data := source.recv(CHUNK):
            target.sendall(data)
        target.shutdown(socket.SHUT_WR)
    except OSError:
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _join(socket_path: Path, client: socket.socket) -> None:
    """One TCP connection joined to a new connection to `socket_path`, both ways, until both
    directions have ended."""
    with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        try:
            server.connect(str(socket_path))
        except OSError as exc:
            print(f"relay: {socket_path}: {exc.strerror or exc}", file=sys.stderr, flush=True)
            return
        back = threading.Thread(target=_pipe, args=(server, client), daemon=True)
        back.start()
        _pipe(client, server)
        back.join()


def _accept(listener: socket.socket, socket_path: Path, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            client, _ = listener.accept()
        except OSError:
            if stop.is_set():
                return
            time.sleep(ACCEPT_RETRY_S)  # out of file descriptors, say: the next may pass
            continue
        try:
            threading.Thread(target=_join, args=(socket_path, client), daemon=True).start()
        except RuntimeError:  # no thread to be had (the box's pids limit): this one only
            client.close()
            time.sleep(ACCEPT_RETRY_S)


def start(listeners: list[tuple[socket.socket, Path]], stop: threading.Event) -> None:
    """Relay each listener's connections to its socket, in threads of this process, until
    `stop` is set (the box's entry runs the relay so: flowerbox.inside.entry)."""
    for listener, socket_path in listeners:
        accepting = threading.Thread(
            target=_accept, args=(listener, socket_path, stop), daemon=True
        )
        accepting.start()


def serve(mappings: list[Mapping], stop: threading.Event) -> None:
    """Run the listeners until `stop` is set; prints the ready lines once all are up.
    Connections still open then end with the process (their threads are daemons)."""
    listeners: list[tuple[socket.socket, Mapping]] = []
    try:
        for mapping in mappings:
            if mapping.fd is None:
                listener = socket.create_server((mapping.host, mapping.port))
            else:
                listener = socket.socket(fileno=mapping.fd)
            listeners.append((listener, mapping))
        start([(listener, mapping.socket) for listener, mapping in listeners], stop)
        for listener, mapping in listeners:
            port = listener.getsockname()[1]
            print(f"relay {mapping.host}:{port} -> {mapping.socket}", flush=True)
        while not stop.wait(STOP_POLL_S):
            pass
    finally:
        stop.set()
        for listener, _ in listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes its accept()
            listener.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flowerbox.inside.relay",
        description="Expose unix sockets on loopback TCP ports.",
    )
    parser.add_argument(
        "--listen", type=parse_mapping, action="append", default=[], metavar="127.0.0.1:PORT=SOCKET"
    )
    parser.add_argument(
        "--listen-fd", type=parse_inherited, action="append", default=[], metavar="FD=SOCKET"
    )
    args = parser.parse_args(argv)
    if not args.listen and not args.listen_fd:
        parser.error("give at least one --listen or --listen-fd")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: stop.set())
    try:
        serve(args.listen + args.listen_fd, stop)
    except OSError as exc:  # a port already taken: say which, exit non-zero
        print(f"relay: cannot listen: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
