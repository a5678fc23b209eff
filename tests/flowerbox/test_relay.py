"""The relay as a real process: loopback TCP joined to unix sockets, half-closes passed on,
a dead socket costing one connection, SIGTERM a clean exit; and run in a process's threads
(`start`, as the box's entry runs it): a connection with no thread to be had costs only
itself."""

from __future__ import annotations

import argparse
import signal
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flowerbox.inside import relay
from flowerbox.inside.relay import Mapping, parse_mapping
from tests.flowerbox.conftest import RelayProcess

StartRelay = Callable[..., RelayProcess]


class _Echo(socketserver.StreamRequestHandler):
    """Echoes everything in upper case, then answers "bye" after the client's EOF: proves
    the client's half-close arrived and that the reverse direction stayed open after it."""

    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data.upper())
        self.request.sendall(b"bye")


@pytest.fixture
def echo_socket(sockdir: Path) -> Iterator[Path]:
    path = sockdir / "echo.sock"
    server = socketserver.ThreadingUnixStreamServer(str(path), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def talk(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
        received = b""
        while data := conn.recv(65536):
            received += data
        return received


def test_mappings_parse_and_only_loopback_is_accepted() -> None:
    assert parse_mapping("127.0.0.1:8080=/run/a.sock") == Mapping(
        "127.0.0.1", 8080, Path("/run/a.sock")
    )
    for bad in ("0.0.0.0:80=/a.sock", "127.0.0.1:80", "127.0.0.1:x=/a.sock"):
        with pytest.raises(argparse.ArgumentTypeError, match="loopback only"):
            parse_mapping(bad)


def test_a_tcp_client_reaches_the_socket_both_ways(
    echo_socket: Path, start_relay: StartRelay
) -> None:
    relay = start_relay(echo_socket)
    payload = b"hello through the relay " * 10_000  # larger than one read
    assert talk(relay.ports[0], payload) == payload.upper() + b"bye"
    assert talk(relay.ports[0], b"again") == b"AGAIN" + b"bye"


def test_a_dead_socket_closes_the_connection_and_the_relay_lives_on(
    sockdir: Path, start_relay: StartRelay
) -> None:
    missing = sockdir / "later.sock"
    relay = start_relay(missing)
    with socket.create_connection(("127.0.0.1", relay.ports[0]), timeout=5) as conn:
        assert conn.recv(1) == b""  # closed at once, not left hanging
    server = socketserver.UnixStreamServer(str(missing), _Echo)
    thread = threading.Thread(target=server.handle_request)
    thread.start()
    try:
        assert talk(relay.ports[0], b"now") == b"NOWbye"
    finally:
        thread.join(timeout=5)
        server.server_close()
    assert relay.process.poll() is None


def test_several_mappings_and_sigterm(
    echo_socket: Path, sockdir: Path, start_relay: StartRelay
) -> None:
    relay = start_relay(echo_socket, sockdir / "none.sock")
    assert len(set(relay.ports)) == 2
    assert talk(relay.ports[0], b"a") == b"Abye"
    with socket.create_connection(("127.0.0.1", relay.ports[0]), timeout=5) as open_conn:
        open_conn.sendall(b"still here")
        assert open_conn.recv(100) == b"STILL HERE"
        relay.process.send_signal(signal.SIGTERM)  # with a connection in flight
        assert relay.process.wait(timeout=10) == 0


def test_a_connection_with_no_thread_to_be_had_is_closed_and_the_next_is_served(
    echo_socket: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the box's pids limit a connection's thread cannot start: that connection is closed
    and the listener goes on (in a box the relay runs in the entry's threads)."""
    start = threading.Thread.start
    refused: list[str] = []

    def once_refused(thread: threading.Thread) -> None:
        if thread.name.endswith("(_join)") and not refused:
            refused.append(thread.name)
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", once_refused)
    stop = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        relay.start([(listener, echo_socket)], stop)
        port = listener.getsockname()[1]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as first:
                assert first.recv(1) == b""  # closed, not left hanging
            assert refused
            assert talk(port, b"next") == b"NEXTbye"
        finally:
            stop.set()
