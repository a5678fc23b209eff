"""The lease a box's keeper holds on its gateway: no forward once the keeper is gone.

    lease = Lease.listen(gateway_dir / wire.LEASE_SOCKET)   # the gateway, before its api.sock
    held = hold(gateway_dir / wire.LEASE_SOCKET)             # the host: whoever keeps the box
    ...
    if lease.lost(): refuse                             # the gateway, before each forward

A detached run's keeper and its box die apart: a SIGKILLed keeper leaves the box running
until its guard (flowerbox.runs.guard) has killed it, tens to hundreds of milliseconds under
load, and a request of the box in that gap would still reach the API. The lease closes the
gap: the keeper holds one connection to a socket of the gateway's, and the kernel closes it
the moment the keeper dies, however it dies. Before each forward the gateway looks at that
connection (a non-blocking peek: no thread, no timeout, nothing to schedule first): at its
end the holder is gone and nothing more is forwarded.

A connection rather than a lock on a shared file: gVisor (`--runtime runsc`) keeps file locks
inside its sandbox, so a lock taken on the host is invisible there (measured: a runsc
container takes a lock the host holds, a runc one is refused it), and a connection's end needs
no shared lock table at all (docs/decisions.md, "The keeper's lease").

The lease is taken once: the first connection holds it, the socket is then removed and
closed (nobody else can take it, or hold it for a dead keeper). A lease nobody took yet is
not lost: a box started by a caller that never takes it (a self-test, an older host) is
served as before, never refused. The socket lives in the gateway's host-only folder: the
box never reaches it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["Lease", "hold"]

HOLD_WAIT_S = 5.0  # the gateway binds the lease before its api.sock: it is there already


class Lease:
    """The gateway's side: one listening socket until a holder comes, then its connection."""

    def __init__(
        self,
        listener: socket.socket | None,
        path: Path | None,
        holder: socket.socket | None = None,
    ) -> None:
        self._listener = listener
        self._path = path
        self._holder = holder
        self._lost = False
        self._lock = threading.Lock()

    @classmethod
    def taken(cls, holder: socket.socket) -> Lease:
        """A lease its holder took on a connection of its own (a broker's control socket)."""
        return cls(None, None, holder)

    @classmethod
    def listen(cls, path: Path) -> Lease:
        """Bind and listen at `path` (0600 from its first moment; a stale socket replaced)."""
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            with _short(path) as short:
                listener.bind(short)
            listener.listen(1)
        except OSError:
            listener.close()
            raise
        finally:
            os.umask(old)
        listener.setblocking(False)
        return cls(listener, path)

    def held(self) -> bool:
        """Whether a holder has taken the lease (taken now if one is waiting)."""
        with self._lock:
            self._take()
            return self._holder is not None

    def lost(self) -> bool:
        """True once the holder's connection has ended (its process is gone); False while it
        holds, and while nobody took the lease."""
        with self._lock:
            if self._lost:
                return True
            self._take()
            if self._holder is None:
                return False
            self._lost = _ended(self._holder)
            return self._lost

    def close(self) -> None:
        """Stop listening, or let the holder's connection go (a thread reading it wakes)."""
        with self._lock:
            if self._holder is not None:
                with contextlib.suppress(OSError):
                    self._holder.shutdown(socket.SHUT_RDWR)
                self._holder.close()
            if self._listener is not None:
                self._listener.close()
                _remove(self._path)
            self._listener = self._holder = None

    def _take(self) -> None:
        """Accept a waiting holder (the first connection alone), then stop listening."""
        if self._listener is None:
            return
        try:
            holder, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        self._listener.close()
        self._listener = None
        _remove(self._path)
        self._holder = holder


def hold(path: Path, wait: float = HOLD_WAIT_S) -> socket.socket:
    """The host's side: a connection to the lease at `path`, to keep open for as long as
    the box may forward (closed, or its process gone: the gateway forwards nothing more).

    Raises:
        OSError: no lease answered at `path` within `wait` seconds.
    """
    deadline = time.monotonic() + wait
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with _short(path) as short:
                sock.connect(short)
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
            continue
        return sock


def _ended(sock: socket.socket) -> bool:
    """Whether the peer's end of `sock` is closed (the holder sends nothing; if it did, what
    it sent is no end)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True  # reset: ended too


def _remove(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


@contextlib.contextmanager
def _short(path: Path) -> Iterator[str]:
    """`path` as a socket address short enough for AF_UNIX (108 bytes): through its
    folder's descriptor in /proc when the path itself is longer (a deep $HOME)."""
    if len(os.fsencode(path)) < 100:
        yield str(path)
        return
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{folder}/{path.name}"
    finally:
        os.close(folder)
