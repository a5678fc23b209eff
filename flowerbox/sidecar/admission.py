"""What clients together may hold of a threaded server: connections per peer address and
in all, counted at accept, so that no client (with a token or without) can pile up threads
and buffers until the process is killed.

    class Listener(Admitted, socketserver.TCPServer): ...
    server.admission = Admission(per_peer=128, total=1024)   # one may serve several listeners

A connection over either cap is answered `503` at once (a line sent without waiting) and
closed, before a thread is started or a byte read: its client retries later, everyone
else's connections are untouched. Each admitted connection holds one thread, at most the
request head limit of buffered head (flowerbox.sidecar.http) and, before its token was
judged, nothing else; how long it may take to send its head is the reader's deadline.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

__all__ = ["PER_PEER", "TOTAL", "Admission", "Admitted", "peer_of"]

PER_PEER = 128  # a run's Pod: its API connections, its proxy tunnels, its git
ACCEPT_BATCH = 256  # connections taken off the backlog per wakeup
TOTAL = 1024  # about 90 MiB of threads and head buffers at most
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 52\r\n"
    b"connection: close\r\nretry-after: 5\r\n\r\n"
    b"flowerbox broker: too many connections; retry later\n"
)


class Admission:
    """Open connections, per peer and in all; thread-safe."""

    def __init__(self, *, per_peer: int = PER_PEER, total: int = TOTAL) -> None:
        self.per_peer = per_peer
        self.total = total
        self._open: Counter[str] = Counter()
        self._lock = threading.Lock()

    def enter(self, peer: str) -> bool:
        """Count a new connection of `peer` in; False (and not counted) over a cap."""
        with self._lock:
            if self._open[peer] >= self.per_peer or self._open.total() >= self.total:
                return False
            self._open[peer] += 1
            return True

    def leave(self, peer: str) -> None:
        with self._lock:
            self._open[peer] -= 1
            if self._open[peer] <= 0:
                del self._open[peer]

    def open(self, peer: str | None = None) -> int:
        with self._lock:
            return self._open.total() if peer is None else self._open[peer]


def peer_of(client_address: Any) -> str:
    """A connection's peer: its IP address (a unix socket's peers are all `local`)."""
    if isinstance(client_address, tuple) and client_address:
        return str(client_address[0])
    return "local"


class Admitted(socketserver.ThreadingMixIn, socketserver.BaseServer):
    """A threaded TCP (or unix) server whose connections pass `admission` first (a server's
    own unless one is shared); `turned_away(peer)` is told of each one refused."""

    daemon_threads = True
    block_on_close = False
    admission: Admission
    socket: socket.socket  # a TCPServer's
    get_request: Callable[[], tuple[Any, Any]]  # a TCPServer's
    turned_away: Callable[[str], None] = staticmethod(lambda peer: None)

    def _handle_request_noblock(self) -> None:
        """Every connection waiting (up to ACCEPT_BATCH), not one per wakeup: a flood turned
        away empties the backlog fast, so the connection of a run behind it waits little."""
        self.socket.setblocking(False)
        for _ in range(ACCEPT_BATCH):
            try:
                request, client_address = self.get_request()
            except OSError:
                return  # none left (the socket is non-blocking), or a failed accept
            if not self.verify_request(request, client_address):
                self.shutdown_request(request)
                continue
            try:
                self.process_request(request, client_address)
            except Exception:
                self.handle_error(request, client_address)
                self.shutdown_request(request)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        if not hasattr(self, "admission"):
            self.admission = Admission()
        peer = peer_of(client_address)
        if self.admission.enter(peer):
            return True
        _busy(request)
        self.turned_away(peer)
        return False

    def process_request(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request(request, client_address)
        except RuntimeError:  # no thread could be started: answered as over a cap
            self.admission.leave(peer_of(client_address))
            _busy(request)
            self.shutdown_request(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.admission.leave(peer_of(client_address))


def _busy(sock: socket.socket) -> None:
    """The 503 line, if the socket takes it at once; never waits for a client."""
    with contextlib.suppress(OSError):
        sock.setblocking(False)
        sock.send(_BUSY)
