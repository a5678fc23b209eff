"""The egress proxy: the agent's only way to the network, served by the gateway process on a
unix socket (`/run/flowerbox/proxy.sock`; the relay inside makes it 127.0.0.1:3128).

    proxy = EgressProxy(path, policy=Policy.parse(["pypi.org"]), log=JsonLines(jsonl_path))
    threading.Thread(target=proxy.serve_forever, daemon=True).start()

Two request forms, filtered alike by `flowerbox.sidecar.egress.Policy`:
- `CONNECT host:port` (HTTPS and anything else): 200, then bytes both ways, half-closes
  passed on, until both directions have ended.
- an absolute URI, `GET http://host[:port]/path` (plain HTTP): the request goes on in origin
  form with `Connection: close`, its body framed by its own Content-Length or chunking (so
  nothing after it is forwarded unchecked), and the response comes back as it is; then the
  connection closes. `Expect: 100-continue` is answered here (before the body is read) and
  not passed on.

Requests are read strictly (`flowerbox.sidecar.http`, h11 underneath): obs-fold, a bare CR or LF,
an unknown transfer coding, conflicting or doubled framing are a 400, never forwarded.

Order, for both: the policy decides on the name alone; a denied name is answered 403 and
never resolved. An allowed name is resolved once, its addresses checked (no DNS rebinding
into loopback, metadata or private ranges), and the proxy connects to the checked address
itself, never to the name again.

Answers of its own, plain text, one line, then the connection closes:
- 403 `flowerbox egress: denied HOST:PORT: REASON` (header `X-Proxy-Error:
  blocked-by-allowlist`);
- 502 `flowerbox egress: cannot reach HOST:PORT: ERROR` (no address, refused, timed out);
- 400 `flowerbox egress: bad request: WHAT` (a request line, target or framing it cannot use).

Each request leaves one JSON line in the egress log: time, method, host, port, decision
(allow / deny), reason, and `address` (connected to), `resolved` or `error` where they apply.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
import socketserver
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from typing import Any, NoReturn, Protocol
from urllib.parse import urlsplit

import h11

from flower import text
from flowerbox.errors import BadRequest
from flowerbox.sidecar.admission import peer_of
from flowerbox.sidecar.egress import Host, IPAddress, Policy, parse_host, show
from flowerbox.sidecar.http import Incoming, RequestReader, linger_close
from flowerbox.sidecar.redact import Redactor

__all__ = [
    "Connector",
    "JsonLines",
    "EgressProxy",
    "Log",
    "PrivateUnixServer",
    "Resolver",
    "Rules",
    "system_resolver",
]

Resolver = Callable[[str, int], list[IPAddress]]
Connector = Callable[[tuple[str, int], float], socket.socket]
CHUNK = 64 * 1024
HEAD_TIMEOUT = 30.0  # for the request head; a tunnel has no idle limit
CONNECT_TIMEOUT = 10.0
# RFC 9110 7.6.1 hop-by-hop headers (the gateway drops these too), and `host`, which each
# side sets for its own connection.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "host",
    }
)
# The proxy's own: framing headers stay (the body is forwarded with its own framing), and
# `expect` is answered here, not passed on.
_DROPPED = HOP_BY_HOP | {"expect"}


def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The addresses getaddrinfo gives for a TCP connection, in its order, without repeats."""
    found: list[IPAddress] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        if address not in found:
            found.append(address)
    return found


class Log(Protocol):
    """Where a decision is recorded: a JSON lines file, or a broker's refusal counts."""

    def record(self, **fields: Any) -> None: ...


class JsonLines:
    """One JSON line per record (an egress decision, a gateway request), appended with a
    single write, stamped with the time (0600; None: no file). Every text in it passes
    `redactor` (a fresh one knows the credential formats alone): redacted and bounded."""

    def __init__(self, path: Path | None, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        self._fd = None if path is None else os.open(path, _APPEND, 0o600)

    def record(self, **fields: Any) -> None:
        if self._fd is None:
            return
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        line = json.dumps({"time": now, **self._clean(fields)}, ensure_ascii=False) + "\n"
        os.write(self._fd, line.encode())

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redactor.note(value)
        if isinstance(value, dict):
            return {key: self._clean(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._clean(item) for item in value]
        return value

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC


class PrivateUnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A threaded server on a unix socket that is 0600 from its first moment, appears under
    its name only once it accepts connections, and is removed when the server closes: the
    socket's permissions are the access control, and whoever waits for the file to exist
    (flowerbox.inside.entry, the tests) can connect at once, never into a refusal."""

    daemon_threads = True
    block_on_close = False
    # Parallel subagents open many connections at once; socketserver's default backlog of 5
    # makes a unix-socket connect fail with EAGAIN beyond it.
    request_queue_size = 128

    def __init__(self, socket_path: Path, handler: type[socketserver.BaseRequestHandler]) -> None:
        self.socket_path = socket_path
        self._binding = socket_path.with_name(f".{socket_path.name}.new")
        super().__init__(str(socket_path), handler)

    def server_bind(self) -> None:
        for stale in (self.socket_path, self._binding):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        self.server_address = str(self._binding)
        old = os.umask(0o177)  # not chmod afterwards: no moment with a looser mode
        try:
            super().server_bind()
        finally:
            os.umask(old)

    def server_activate(self) -> None:
        super().server_activate()
        os.replace(self._binding, self.socket_path)  # listening now: the name may appear

    def server_close(self) -> None:
        """Close, and remove the socket at its names; anything else there (the folder may be
        a box's: a link, a folder, a FIFO in its place) is left as it is, never followed."""
        super().server_close()
        for path in (self.socket_path, self._binding):
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(path.lstat().st_mode):
                    path.unlink()


@dataclass(frozen=True)
class Rules:
    """What one proxy request is held to: its run's policy and log, and `refusal`, why it is
    refused before anything else (a broker's request without a token it serves: 407)."""

    policy: Policy
    log: Log
    refusal: str | None = None


class EgressProxy(PrivateUnixServer):
    """The proxy server. `resolver` and `connector` are the seams tests use to see every
    lookup and connection attempt (and to make sure none leaves the machine)."""

    def __init__(
        self,
        socket_path: Path,
        *,
        policy: Policy,
        log: Log,
        resolver: Resolver = system_resolver,
        connector: Connector = socket.create_connection,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.policy = policy
        self.log = log
        self.resolver = resolver
        self.connector = connector
        self.connect_timeout = connect_timeout
        super().__init__(socket_path, _ProxyHandler)

    def rules(self, incoming: Incoming) -> Rules:
        """The rules of the one run this proxy serves; a broker's proxy for many runs tells
        each request's run by its credentials (flowerbox.broker.listener)."""
        return Rules(self.policy, self.log)


class _Refused(Exception):
    """The request was answered by the proxy itself (and logged)."""


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})


class _ProxyHandler(socketserver.BaseRequestHandler):
    """One client connection, one request: read strictly (flowerbox.sidecar.http), then a tunnel or
    one forwarded request, then the connection closes."""

    server: EgressProxy
    request: socket.socket

    def handle(self) -> None:
        self.command = ""
        self.log: Log = self.server.log
        self.request.settimeout(HEAD_TIMEOUT)
        self.reader = RequestReader(self.request)
        try:
            incoming = self.reader.next_request()
            if incoming is None:
                return
            self.command = incoming.method
            rules = self.server.rules(incoming)
            self.policy, self.log = rules.policy, rules.log
            if rules.refusal is not None:
                self._unauthorized(rules.refusal)
            elif incoming.method == "CONNECT":
                self._connect(incoming)
            elif incoming.method in _METHODS:
                self._plain(incoming)
            else:
                self._bad(text("egress.unsupported_method", method=repr(incoming.method)), 501)
        except BadRequest as exc:
            self._bad(str(exc), exc.status)
        except _Refused:
            pass
        except OSError:
            return  # the client went away
        linger_close(self.request)

    def _bad(self, reason: str, status: int = 400) -> None:
        """Answer a request the proxy cannot use (and log it)."""
        why = f"bad request: {reason}"
        peer = peer_of(self.client_address)
        self.log.record(
            method=self.command, host="", port=None, decision="deny", reason=why, peer=peer
        )
        self._answer(status, f"flowerbox egress: {why}")

    def _unauthorized(self, reason: str) -> None:
        """Answer 407 a request whose credentials name no run served (and log it)."""
        peer = peer_of(self.client_address)
        self.log.record(
            method=self.command, host="", port=None, decision="deny", reason=reason, peer=peer
        )
        challenge = {"Proxy-Authenticate": 'Basic realm="flowerbox"'}
        self._answer(407, f"flowerbox egress: {reason}", challenge)

    def _connect(self, incoming: Incoming) -> None:
        try:
            host, port = _authority(incoming.target, default_port=None)
        except ValueError as exc:
            self._bad(text("egress.send_connect", problem=exc))
            return
        list(self.reader.body_chunks())  # a CONNECT has no body; this ends its message
        upstream = self._open(host, port)
        with upstream:
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.request.settimeout(None)
            upstream.settimeout(None)
            if early := self.reader.leftover():  # sent right behind the CONNECT head
                upstream.sendall(early)
            _tunnel(self.request, upstream)

    def _plain(self, incoming: Incoming) -> None:
        url = urlsplit(incoming.target)
        if url.scheme.lower() != "http" or not url.netloc:
            https = url.scheme.lower() == "https"
            self._bad(text("egress.https_plain" if https else "egress.not_proxy_request"))
            return
        authority = url.netloc.rpartition("@")[2]  # credentials in the URL are not passed on
        try:
            host, port = _authority(authority, default_port=80)
        except ValueError as exc:
            self._bad(str(exc))
            return
        upstream = self._open(host, port)
        with upstream:
            upstream.settimeout(None)
            target = (url.path or "/") + (f"?{url.query}" if url.query else "")
            # Re-serialized by h11 as a client: the head from validated parts, the body
            # re-framed by the request's own Content-Length or chunking, nothing after it.
            client = h11.Connection(h11.CLIENT)
            upstream.sendall(client.send(self._head(incoming, target, authority)))
            self.request.settimeout(None)
            try:
                for data in self.reader.body_chunks():
                    upstream.sendall(client.send(h11.Data(data=data)))
                upstream.sendall(client.send(h11.EndOfMessage()))
            except (OSError, BadRequest):
                return  # the client broke off or mis-framed its body: drop both sides
            _pump(upstream, self.request)

    def _head(self, incoming: Incoming, target: str, authority: str) -> h11.Request:
        listed = {n.strip() for n in (incoming.header("connection") or "").lower().split(",")}
        headers = [("host", authority)]
        headers += [
            (name, value)
            for name, value in incoming.headers
            if name not in _DROPPED and name not in listed
        ]
        headers.append(("connection", "close"))
        return h11.Request(method=incoming.method, target=target, headers=headers)

    def _open(self, host: Host, port: int) -> socket.socket:
        """Decide, resolve, check and connect; or answer and log the refusal and raise."""
        proxy, where = self.server, f"{show(host)}:{port}"
        fields: dict[str, Any] = {"method": self.command, "host": str(host), "port": port}
        decision = self.policy.check_target(host)
        if not decision.allowed:
            self._deny(where, decision.reason, fields)
        if isinstance(host, str):
            try:
                addresses = proxy.resolver(host, port)
            except (OSError, UnicodeError) as exc:
                error = text("egress.cannot_resolve", host=host, problem=exc)
                self._unreachable(where, error, decision.reason, fields)
            resolved = self.policy.check_addresses(addresses)
            fields["resolved"] = [str(address) for address in addresses]
            if not resolved.allowed:
                self._deny(where, resolved.reason, fields)
        else:
            addresses = [host]
        errors = []
        for address in addresses:
            try:
                upstream = proxy.connector((str(address), port), proxy.connect_timeout)
            except OSError as exc:
                errors.append(f"{address}: {exc.strerror or exc}")
                continue
            self.log.record(
                **fields, decision="allow", reason=decision.reason, address=str(address)
            )
            return upstream
        self._unreachable(where, "; ".join(errors), decision.reason, fields)

    def _deny(self, where: str, reason: str, fields: dict[str, Any]) -> NoReturn:
        self.log.record(**fields, decision="deny", reason=reason)
        body = f"flowerbox egress: denied {where}: {reason}"
        self._answer(403, body, {"X-Proxy-Error": "blocked-by-allowlist"})
        raise _Refused

    def _unreachable(self, where: str, error: str, reason: str, fields: dict[str, Any]) -> NoReturn:
        self.log.record(**fields, decision="allow", reason=reason, error=error)
        self._answer(
            502, "flowerbox egress: " + text("egress.cannot_reach", where=where, error=error)
        )
        raise _Refused

    def _answer(self, code: int, text: str, headers: dict[str, str] | None = None) -> None:
        """The proxy's own answer, plain text, then the connection closes (a request body
        may be left unread). Written by hand: a request h11 refused has no state to answer
        from."""
        body = (text + "\n").encode()
        lines = [f"HTTP/1.1 {code} {HTTPStatus(code).phrase}"]
        for name, value in {
            "Content-Type": "text/plain; charset=utf-8",
            "Content-Length": str(len(body)),
            "Connection": "close",
            **(headers or {}),
        }.items():
            lines.append(f"{name}: {value}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        with contextlib.suppress(OSError):
            self.request.sendall(head if self.command == "HEAD" else head + body)


def _authority(text: str, *, default_port: int | None) -> tuple[Host, int]:
    """`host:port` (IPv6 in brackets) from a CONNECT line or a URL; the port may be left out
    only where there is a default."""
    if text.startswith("["):
        host, bracket, rest = text.partition("]")
        host += bracket
        if rest and not rest.startswith(":"):
            raise ValueError(f"bad target {text!r}")
        port_text = rest[1:] if rest else ""
    elif text.count(":") > 1:
        raise ValueError(f"bad target {text!r}: put an IPv6 address in brackets")
    else:
        host, _, port_text = text.partition(":")
    if not port_text and default_port is not None:
        port = default_port
    elif port_text.isdigit() and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        raise ValueError(f"bad port in {text!r}")
    return parse_host(host), port


def _tunnel(client: socket.socket, upstream: socket.socket) -> None:
    """Both directions at once, each on its own thread, until both have ended."""
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy until EOF, then half-close `dst`; an error ends both directions."""
    try:
        while data := src.recv(CHUNK):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
