"""A client that hangs up while the gateway waits for the upstream's answer.

The CLI drops its request when it is interrupted or stopped (a user's Ctrl+C, `flowerbox
stop`). Until the upstream's first byte the gateway is blocked on the upstream alone, so it
would go on waiting, and the API would answer, and bill, a request nobody reads: the box's
own accounts (flower's, from the CLI) would then never agree with the gateway's. Watching the
client's socket while waiting lets the gateway drop the upstream request at the hang-up, as
the CLI's own connection would have without a gateway between them.
"""

from __future__ import annotations

import select
import socket
import ssl
import time

__all__ = ["ClientHungUp", "await_answer"]


class ClientHungUp(Exception):
    """The client closed its connection before the upstream answered."""


def await_answer(upstream: socket.socket, client: socket.socket, timeout: float) -> None:
    """Return once the upstream has something to read (or `timeout` passed: the read that
    follows then times out on its own); raise ClientHungUp if the client hangs up first.
    A client that sends more instead (it never does mid-request) stops being watched."""
    deadline = time.monotonic() + timeout
    watched = [upstream, client]
    while (left := deadline - time.monotonic()) > 0:
        if isinstance(upstream, ssl.SSLSocket) and upstream.pending():
            return
        readable, _, _ = select.select(watched, [], [], left)
        if upstream in readable:
            return
        if client in readable:
            if _closed(client):
                raise ClientHungUp
            watched = [upstream]


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
