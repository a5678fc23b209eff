"""The egress proxy: the agent's only way to the network, served by the gateway process on a
unix socket (`/run/flowerbox/proxy.sock`; the relay inside makes it 127.0.0.1:3128).

    proxy = EgressProxy(path, policy=Policy.parse(["pypi.org"]), log=EgressLog(jsonl_path))
    threading.Thread(target=proxy.serve_forever, daemon=True).start()

Two request forms, filtered alike by `flowerbox.egress.Policy`:
- `CONNECT host:port` (HTTPS and anything else): 200, then bytes both ways, half-closes
  passed on, until both directions have ended.
- an absolute URI, `GET http://host[:port]/path` (plain HTTP): the request goes on in origin
  form with `Connection: close`, its body framed by its own Content-Length or chunking (so
  nothing after it is forwarded unchecked), and the response comes back as it is; then the
  connection closes. `Expect: 100-continue` is answered here (by http.server, on reading the
  head) and not passed on.

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
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from flowerbox.egress import Host, IPAddress, Policy, parse_host, show

__all__ = [
    "Connector",
    "EgressLog",
    "EgressProxy",
    "PrivateUnixServer",
    "Resolver",
    "system_resolver",
]

Resolver = Callable[[str, int], list[IPAddress]]
Connector = Callable[[tuple[str, int], float], socket.socket]
CHUNK = 64 * 1024
HEAD_TIMEOUT = 30.0  # for the request head; a tunnel has no idle limit
CONNECT_TIMEOUT = 10.0
LINGER = 1.0
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


class EgressLog:
    """One JSON line per decision, appended with a single write (0600; None: no file)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._fd = None if path is None else os.open(path, _APPEND, 0o600)

    def record(self, **fields: Any) -> None:
        if self._fd is None:
            return
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        line = json.dumps({"time": now, **fields}, ensure_ascii=False) + "\n"
        os.write(self._fd, line.encode())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC


class PrivateUnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A threaded server on a unix socket that is 0600 from its first moment, appears under
    its name only once it accepts connections, and is removed when the server closes: the
    socket's permissions are the access control, and whoever waits for the file to exist
    (flowerbox.inside, the tests) can connect at once, never into a refusal."""

    daemon_threads = True
    block_on_close = False

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
        super().server_close()
        for path in (self.socket_path, self._binding):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


class EgressProxy(PrivateUnixServer):
    """The proxy server. `resolver` and `connector` are the seams tests use to see every
    lookup and connection attempt (and to make sure none leaves the machine)."""

    def __init__(
        self,
        socket_path: Path,
        *,
        policy: Policy,
        log: EgressLog,
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


class _Refused(Exception):
    """The request was answered by the proxy itself (and logged)."""


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.1"  # so even a garbled request line gets a status line
    rbufsize = 0  # never read past the request head: the bytes after it belong to the tunnel
    timeout = HEAD_TIMEOUT
    server: EgressProxy

    def log_message(self, format: str, *args: Any) -> None:
        """Silenced: the egress log has one line per request."""

    def finish(self) -> None:
        """A lingering close: closing with unread input (a body not read, a pipelined
        request) would reset the connection and could destroy the answer already sent."""
        super().finish()
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(LINGER)
            for _ in range(16):
                if not self.connection.recv(CHUNK):
                    break

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a garbled request line, an unknown method) and ours."""
        reason = f"bad request: {message or HTTPStatus(code).phrase}"
        self.server.log.record(
            method=self.command or "", host="", port=None, decision="deny", reason=reason
        )
        self._answer(code, f"flowerbox egress: {reason}")

    def do_CONNECT(self) -> None:
        try:
            host, port = _authority(self.path, default_port=None)
        except ValueError as exc:
            self.send_error(400, f"{exc}; send CONNECT host:port")
            return
        try:
            upstream = self._open(host, port)
        except _Refused:
            return
        with upstream:
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.close_connection = True
            self.connection.settimeout(None)
            upstream.settimeout(None)
            _tunnel(self.connection, upstream)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.scheme.lower() != "http" or not url.netloc:
            why = (
                "an https:// URL in plain form; send CONNECT host:443 (clients do when "
                "HTTPS_PROXY is set)"
                if url.scheme.lower() == "https"
                else "not a proxy request; send an absolute URL (http://host/path) or "
                "CONNECT host:port"
            )
            self.send_error(400, why)
            return
        authority = url.netloc.rpartition("@")[2]  # credentials in the URL are not passed on
        try:
            host, port = _authority(authority, default_port=80)
            framing = self._framing()
        except ValueError as exc:
            self.send_error(400, str(exc))
            return
        try:
            upstream = self._open(host, port)
        except _Refused:
            return
        self.close_connection = True
        with upstream:
            upstream.settimeout(None)
            target = (url.path or "/") + (f"?{url.query}" if url.query else "")
            upstream.sendall(self._head(target, authority))
            self.connection.settimeout(None)
            try:
                self._copy_body(framing, upstream)
            except (OSError, ValueError):
                return  # the client broke off or mis-framed its body: drop both sides
            _pump(upstream, self.connection)

    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    def _open(self, host: Host, port: int) -> socket.socket:
        """Decide, resolve, check and connect; or answer and log the refusal and raise."""
        proxy, where = self.server, f"{show(host)}:{port}"
        fields: dict[str, Any] = {"method": self.command, "host": str(host), "port": port}
        decision = proxy.policy.check_target(host)
        if not decision.allowed:
            self._deny(where, decision.reason, fields)
        if isinstance(host, str):
            try:
                addresses = proxy.resolver(host, port)
            except (OSError, UnicodeError) as exc:
                self._unreachable(where, f"cannot resolve {host}: {exc}", decision.reason, fields)
            resolved = proxy.policy.check_addresses(addresses)
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
            proxy.log.record(
                **fields, decision="allow", reason=decision.reason, address=str(address)
            )
            return upstream
        self._unreachable(where, "; ".join(errors), decision.reason, fields)

    def _deny(self, where: str, reason: str, fields: dict[str, Any]) -> NoReturn:
        self.server.log.record(**fields, decision="deny", reason=reason)
        body = f"flowerbox egress: denied {where}: {reason}"
        self._answer(403, body, {"X-Proxy-Error": "blocked-by-allowlist"})
        raise _Refused

    def _unreachable(self, where: str, error: str, reason: str, fields: dict[str, Any]) -> NoReturn:
        self.server.log.record(**fields, decision="allow", reason=reason, error=error)
        self._answer(502, f"flowerbox egress: cannot reach {where}: {error}")
        raise _Refused

    def _answer(self, code: int, text: str, headers: dict[str, str] | None = None) -> None:
        body = (text + "\n").encode()
        self.close_connection = True  # a request body may be left unread
        self.send_response(code)
        for name, value in {
            "Content-Type": "text/plain; charset=utf-8",
            "Content-Length": str(len(body)),
            "Connection": "close",
            **(headers or {}),
        }.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _framing(self) -> int | None:
        """The body's length, or None when it is chunked; refuses ambiguous framing."""
        chunked = "transfer-encoding" in self.headers
        length = self.headers.get("content-length")
        if chunked and length is not None:
            raise ValueError("both Transfer-Encoding and Content-Length")
        if chunked:
            if (self.headers["transfer-encoding"] or "").strip().lower() != "chunked":
                raise ValueError("a Transfer-Encoding other than chunked")
            return None
        if length is None:
            return 0
        if not length.strip().isdigit():
            raise ValueError(f"Content-Length {length!r}")
        return int(length)

    def _head(self, target: str, authority: str) -> bytes:
        listed = {n.strip().lower() for n in (self.headers.get("connection") or "").split(",")}
        lines = [f"{self.command} {target} HTTP/1.1", f"Host: {authority}"]
        lines += [
            f"{name}: {value}"
            for name, value in self.headers.items()
            if name.lower() not in _DROPPED and name.lower() not in listed
        ]
        lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _copy_body(self, length: int | None, upstream: socket.socket) -> None:
        if length is not None:
            self._copy(length, upstream)
            return
        while True:  # chunked: size line, data, CRLF ... 0, trailers, blank line
            line = self.rfile.readline(1024)
            upstream.sendall(line)
            size = int(line.split(b";")[0].strip() or b"x", 16)
            if size == 0:
                break
            self._copy(size + 2, upstream)
        while (line := self.rfile.readline(8192)) not in (b"\r\n", b"\n", b""):
            upstream.sendall(line)
        upstream.sendall(b"\r\n")

    def _copy(self, count: int, upstream: socket.socket) -> None:
        while count:
            data = self.rfile.read(min(count, CHUNK))
            if not data:
                raise ValueError("the request body ended early")
            upstream.sendall(data)
            count -= len(data)


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
