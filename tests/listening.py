"""Stopping a test's own loopback listener that a thread of the test accepts on.

`close()` alone does not wake a thread blocked in `accept()`: it stays in the kernel on the
old descriptor number, and a thread about to call `accept()` reads that number first. The
next socket the process makes may get the number (a later test's server), and the stale
thread then takes its connections: seen in CI, a git relay's clients answered by test_proxy's
echo server, and a relay test's teardown waiting for ever. `shutdown()` wakes the accept
(EINVAL on Linux) while the number is still this listener's; the thread returns, then the
socket is closed.
"""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["stop_listening"]


def stop_listening(sock: socket.socket, thread: threading.Thread) -> None:
    """Wake `thread`'s accept on `sock`, wait for it to end, then close `sock`."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    thread.join(timeout=30)
    sock.close()
