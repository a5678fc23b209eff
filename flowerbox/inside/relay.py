"""The relay inside the agent's container: loopback TCP ports piped to the gateway's sockets.

    python -m flowerbox.inside.relay --listen 127.0.0.1:8080=/run/flowerbox/api.sock \\
        [--listen 127.0.0.1:3128=/run/flowerbox/proxy.sock ...]

The container has no network; the gateway's unix sockets are mounted into it. Each mapping is
a TCP listener on 127.0.0.1 whose every connection is joined byte for byte to a new
connection to the socket, both ways, half-closes passed on (an EOF from one side becomes a
write EOF on the other), until both directions have ended. It knows nothing of HTTP.

When every listener is up it prints one line per mapping, "relay 127.0.0.1:PORT -> PATH"
(port 0 picks a free port and the line shows the real one). A socket that cannot be reached
closes that one TCP connection and nothing else. SIGTERM or SIGINT: exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Mapping", "main", "parse_mapping", "serve"]

CHUNK = 64 * 1024


@dataclass(frozen=True)
class Mapping:
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


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF, then half-close the far side; an error closes it outright."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


async def _join(
    socket_path: Path, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
) -> None:
    try:
        server_r, server_w = await asyncio.open_unix_connection(str(socket_path))
    except OSError as exc:
        print(f"relay: {socket_path}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        client_w.close()
        return
    try:
        await asyncio.gather(_pipe(client_r, server_w), _pipe(server_r, client_w))
    finally:
        for writer in (server_w, client_w):
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


async def serve(mappings: list[Mapping], stop: asyncio.Event) -> None:
    """Run the listeners until `stop` is set; prints the ready lines once all are up."""
    servers = []
    # The event loop keeps only weak references to tasks: without this set a connection's
    # task can be collected mid-flight (seen under load as "Task was destroyed but it is
    # pending"), which cut that connection.
    connections: set[asyncio.Task[Any]] = set()
    try:
        for mapping in mappings:
            path = mapping.socket

            async def handle(
                r: asyncio.StreamReader, w: asyncio.StreamWriter, path: Path = path
            ) -> None:
                task = asyncio.current_task()
                assert task is not None
                connections.add(task)
                try:
                    await _join(path, r, w)
                except asyncio.CancelledError:
                    pass  # only the shutdown below cancels; end quietly (3.11's streams log it)
                finally:
                    connections.discard(task)

            if mapping.fd is None:
                server = await asyncio.start_server(handle, mapping.host, mapping.port)
            else:
                server = await asyncio.start_server(handle, sock=socket.socket(fileno=mapping.fd))
            servers.append((server, mapping))
        for server, mapping in servers:
            port = server.sockets[0].getsockname()[1]
            print(f"relay {mapping.host}:{port} -> {mapping.socket}", flush=True)
        await stop.wait()
    finally:
        for server, _ in servers:
            server.close()
        for task in list(connections):
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)
        for server, _ in servers:
            await server.wait_closed()


async def _main(mappings: list[Mapping]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await serve(mappings, stop)


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
    try:
        asyncio.run(_main(args.listen + args.listen_fd))
    except OSError as exc:  # a port already taken: say which, exit non-zero
        print(f"relay: cannot listen: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
