"""Strict HTTP/1.1 reading for the two servers the agent talks to (the gateway and the egress
proxy), with h11 doing the parsing and a few rules on top of it.

    reader = RequestReader(sock)
    while (request := reader.next_request()) is not None:
        body = reader.body(limit=32 << 20)      # or: for data in reader.body_chunks(): ...
        reader.send(h11.Response(status_code=200, headers=[...]))
        ...

h11 parses request lines, header fields, Content-Length and chunked framing; these are refused
on top of it, because h11 tolerates them and a second parser on the way (the upstream, a proxy
of the user's) might read them differently:
- a line ending in a bare LF, or a bare CR anywhere in the head (h11 takes LF as a line end);
- an obs-fold continuation line (h11 unfolds it);
- Transfer-Encoding together with Content-Length.
h11 itself refuses unknown transfer codings, conflicting Content-Lengths, a missing Host in an
HTTP/1.1 request, and malformed chunks. Every refusal is a `BadRequest` whose message says what
was wrong; the server answers 400 and closes the connection (`linger_close`).

Time is bounded per request, not per read: a head must arrive whole within `head_within`
seconds of its first byte (of the connection, for the first request), a body within what
`body(within=...)` gives; a client trickling a byte at a time is cut off there (a 408).

Each request is parsed by a fresh h11 connection, and the bytes after it (a pipelined request,
the first bytes of a CONNECT tunnel) are carried over: `leftover()` hands them out, and the next
request's head is checked like the first.
"""

from __future__ import annotations

import contextlib
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import h11

from flower import text
from flowerbox.errors import BadRequest

__all__ = ["BadRequest", "Incoming", "RequestReader", "linger_close"]

HEAD_LIMIT = 64 * 1024
HEAD_WITHIN = 10.0  # seconds for a whole head, from its first byte (the connection's, first)
CHUNK = 64 * 1024
LINGER = 1.0  # seconds, in all, to drain a closed request's unread bytes
LINGER_BYTES = 1 << 20
_HEAD_END = re.compile(rb"\n\r?\n")


@dataclass(frozen=True)
class Incoming:
    """One request's head. `target` is the request target exactly as sent; header names are
    lower-case, values as sent, in order."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    http_version: str
    peer: str = "local"  # the client's address (a unix socket's clients are all local)

    def header(self, name: str) -> str | None:
        """The first value of header `name` (lower-case), or None."""
        return next((value for key, value in self.headers if key == name), None)


class RequestReader:
    """Reads requests off one client socket; sends responses through the same h11 state."""

    def __init__(
        self,
        sock: socket.socket,
        *,
        head_limit: int = HEAD_LIMIT,
        head_within: float = HEAD_WITHIN,
    ) -> None:
        self.sock = sock
        self.head_limit = head_limit
        self.head_within = head_within
        self.conn = h11.Connection(h11.SERVER)
        self._pending = b""
        self._eof = False
        self._requests = 0
        self._deadline: float | None = None
        self.peer = _peer(sock)

    def next_request(self) -> Incoming | None:
        """The next request's head, or None when the client closed between requests. The
        first request's head must be whole within `head_within` of the connection; a later
        one's within `head_within` of its first byte (until then the socket's timeout is the
        connection's idle limit).

        Raises:
            BadRequest: the head breaks a rule (see the module docstring), or is late (408).
            OSError: the socket failed or timed out.
        """
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.head_limit)
        self._requests += 1
        self._deadline = None
        if self._requests == 1 or self._pending:
            self._deadline = time.monotonic() + self.head_within
        while not (found := _HEAD_END.search(self._pending)):
            if len(self._pending) > self.head_limit:
                raise BadRequest(text("gateway.head_too_large"), 431)
            if self._eof:
                if self._pending.strip():
                    raise BadRequest(text("gateway.closed_in_head"))
                return None
            self._read()
            if self._deadline is None:
                self._deadline = time.monotonic() + self.head_within
        end = found.end()
        if end > self.head_limit:
            raise BadRequest(text("gateway.head_too_large"), 431)
        head, self._pending = self._pending[:end], self._pending[end:]
        self._deadline = None
        _check_head(head)
        self.conn.receive_data(head)
        event = self._event()
        if not isinstance(event, h11.Request):
            raise BadRequest(text("gateway.not_request"))
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers]
        names = {name for name, _ in headers}
        if {"transfer-encoding", "content-length"} <= names:
            raise BadRequest(text("gateway.both_lengths"))
        return Incoming(
            method=event.method.decode("ascii"),
            target=event.target.decode("latin-1"),
            headers=headers,
            http_version=event.http_version.decode("ascii"),
            peer=self.peer,
        )

    def body_chunks(self, *, within: float | None = None) -> Iterator[bytes]:
        """The request's body as it arrives, de-framed; ends at the end of the message.
        With `within`, the whole body must have arrived that many seconds from now."""
        self._deadline = None if within is None else time.monotonic() + within
        if self.conn.they_are_waiting_for_100_continue:
            self.send(h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue"))
        if self._pending:  # (an empty receive_data would tell h11 the client closed)
            self.conn.receive_data(self._pending)
        self._pending = b""
        while True:
            event = self._event()
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._pending, closed = self.conn.trailing_data
                self._eof = self._eof or closed
                return
            elif event is h11.NEED_DATA:
                if self._eof:
                    raise BadRequest(text("gateway.body_ended"))
                data = self._recv()
                self._eof = not data
                self.conn.receive_data(data)
            else:
                raise BadRequest(text("gateway.unexpected_event", event=type(event).__name__))

    def body(self, *, limit: int, within: float | None = None) -> bytes:
        """The whole body; BadRequest (413) past `limit` bytes, (408) not whole `within`
        seconds from now."""
        parts, size = [], 0
        for data in self.body_chunks(within=within):
            size += len(data)
            if size > limit:
                raise BadRequest(text("gateway.body_too_large", limit=limit), 413)
            parts.append(data)
        return b"".join(parts)

    def leftover(self) -> bytes:
        """The bytes received after the current request's head (and body, if read)."""
        data, self._pending = self._pending, b""
        return data

    def send(self, event: h11.Event) -> None:
        """Serialize `event` with this request's h11 state and write it."""
        data = self.conn.send(event)
        if data:
            self.sock.sendall(data)

    @property
    def reusable(self) -> bool:
        """Whether another request may follow on this connection."""
        return (
            not self._eof and self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE
        )

    def _read(self) -> None:
        data = self._recv()
        self._eof = not data
        self._pending += data

    def _recv(self) -> bytes:
        """One read, within what is left of the deadline (the socket's own timeout is put
        back after: it governs the answer's writes too)."""
        if self._deadline is None:
            return self.sock.recv(CHUNK)
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise BadRequest(text("gateway.too_slow"), 408)
        before = self.sock.gettimeout()
        self.sock.settimeout(left if before is None else min(left, before))
        try:
            return self.sock.recv(CHUNK)
        except TimeoutError:
            raise BadRequest(text("gateway.too_slow"), 408) from None
        finally:
            self.sock.settimeout(before)

    def _event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        try:
            return self.conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise BadRequest(str(exc)) from exc


def _peer(sock: socket.socket) -> str:
    """The client's IP address; `local` for a unix socket's (or one already gone)."""
    try:
        address = sock.getpeername()
    except OSError:
        return "local"
    return str(address[0]) if isinstance(address, tuple) else "local"


def _check_head(head: bytes) -> None:
    """What h11 lets pass: bare CR or LF line ends, obs-fold lines, empty lines before it."""
    lines = head[:-4].split(b"\r\n") if head.endswith(b"\r\n\r\n") else None
    if lines is None or any(b"\r" in line or b"\n" in line for line in lines):
        raise BadRequest(text("gateway.bare_line_end"))
    if not lines[0]:
        raise BadRequest(text("gateway.empty_line"))
    if any(line[:1] in (b" ", b"\t") for line in lines[1:]):
        raise BadRequest(text("gateway.obs_fold"))


def linger_close(sock: socket.socket) -> None:
    """Close after our answer without destroying it: closing with unread input would reset
    the connection, so half-close, drain briefly (LINGER seconds, LINGER_BYTES, in all:
    a client sending on cannot hold the thread), then close."""
    deadline, drained = time.monotonic() + LINGER, 0
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        while drained < LINGER_BYTES and (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            data = sock.recv(CHUNK)
            if not data:
                break
            drained += len(data)
