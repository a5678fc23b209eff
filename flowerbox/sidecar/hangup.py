"""A client that hangs up while the gateway is still busy with its request upstream.

The CLI drops its request when it is interrupted or stopped (a user's Ctrl+C, `flowerbox
stop`). The gateway, blocked on the upstream (waiting for its first byte, or for the next
event of a model still thinking), would not notice until it next wrote to the client: the API
would go on producing, and billing, an answer nobody reads, and the gateway would meter it,
above what the box's own accounts (the CLI's) can know of. So while a request is with the
upstream a thread watches the client's socket and, on a hang-up, shuts the upstream
connection: the request ends there as it would on the CLI's own connection without a gateway.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from types import TracebackType

__all__ = ["HangUpWatch"]


class HangUpWatch:
    """While entered: shut the `guard`ed upstream socket the moment `client` hangs up.

    A client that sends more instead (it never does mid-request) stops being watched.
    """

    def __init__(self, client: socket.socket) -> None:
        self.hung_up = False
        self._client = client
        self._upstream: socket.socket | None = None
        self._lock = threading.Lock()
        self._wake, self._waker = socket.socketpair()
        self._thread = threading.Thread(target=self._watch, name="hang-up watch", daemon=True)

    def __enter__(self) -> HangUpWatch:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._waker.send(b"x")
        self._thread.join()
        self._wake.close()
        self._waker.close()

    def guard(self, upstream: socket.socket) -> None:
        """The connection to shut on a hang-up (at once, if it already came)."""
        with self._lock:
            self._upstream = upstream
            gone = self.hung_up
        if gone:
            _shut(upstream)

    def _watch(self) -> None:
        readable, _, _ = select.select([self._client, self._wake], [], [])
        if self._wake in readable or not _closed(self._client):
            return
        with self._lock:
            self.hung_up = True
            upstream = self._upstream
        if upstream is not None:
            _shut(upstream)


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
