"""The egress proxy in-process on a unix socket, in front of test servers on the host's
loopback. Every lookup goes through a recording resolver (names map to 127.0.0.1 or to
addresses that must never be contacted) and every connection attempt through a recording
connector that refuses anything but loopback, so no test can send a packet elsewhere."""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import socket
import socketserver
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from flowerbox.sidecar.egress import IPAddress, Policy
from flowerbox.sidecar.proxy import EgressProxy, JsonLines, PrivateUnixServer
from tests.flowerbox.conftest import GatewayProcess
from tests.listening import stop_listening

NAMES = {
    "web.test": "127.0.0.1",
    "echo.test": "127.0.0.1",
    "a.wild.test": "127.0.0.1",
    "rebind.test": "127.0.0.1",
    "intranet.test": "10.20.30.40",
    "metadata.test": "169.254.169.254",
}
POLICY = ["web.test", "echo.test", "*.wild.test", "rebind.test", "intranet.test"]
POLICY += ["metadata.test", "nowhere.test", "127.0.0.1"]


@dataclass
class Recorder:
    """The proxy's resolver and connector: records, and keeps everything on loopback."""

    names: dict[str, str]
    lookups: list[str] = field(default_factory=list)
    connects: list[tuple[str, int]] = field(default_factory=list)

    def resolve(self, host: str, port: int) -> list[IPAddress]:
        self.lookups.append(host)
        if host not in self.names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [ipaddress.ip_address(self.names[host])]

    def connect(self, address: tuple[str, int], timeout: float) -> socket.socket:
        self.connects.append(address)
        if not ipaddress.ip_address(address[0]).is_loopback:
            raise AssertionError(f"the proxy tried to connect to {address}")
        return socket.create_connection(address, timeout=timeout)


@dataclass
class Proxy:
    path: Path
    log_path: Path
    recorder: Recorder

    def send(self, raw: bytes, *, half_close: bool = True) -> bytes:
        """Send raw bytes on a fresh connection; everything the proxy sends back."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(str(self.path))
            sock.sendall(raw)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
            return read_all(sock)

    def log(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]


def read_all(sock: socket.socket) -> bytes:
    parts = []
    while data := sock.recv(65536):
        parts.append(data)
    return b"".join(parts)


def start_proxy(sockdir: Path, tmp_path: Path, allow: list[str]) -> Iterator[Proxy]:
    recorder = Recorder(dict(NAMES))
    log = JsonLines(tmp_path / "egress.jsonl")
    server = EgressProxy(
        sockdir / "proxy.sock",
        policy=Policy.parse(allow),
        log=log,
        resolver=recorder.resolve,
        connector=recorder.connect,
    )
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield Proxy(sockdir / "proxy.sock", tmp_path / "egress.jsonl", recorder)
    finally:
        server.shutdown()
        server.server_close()
        log.close()
        thread.join(timeout=5)


@pytest.fixture
def proxy(sockdir: Path, tmp_path: Path) -> Iterator[Proxy]:
    yield from start_proxy(sockdir, tmp_path, POLICY)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Web(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        super().__init__(("127.0.0.1", 0), _WebHandler)


class _WebHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Web

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if "chunked" in (self.headers.get("transfer-encoding") or ""):
            body = b""
            while size := int(self.rfile.readline().split(b";")[0], 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b""):
                pass  # trailers
        else:
            body = self.rfile.read(length)
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.seen.append(Seen(self.command, self.path, headers, body))
        reply = f"hello {self.command} {self.path} {len(body)}".encode()
        self.send_response(200)
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_POST = do_PUT = do_GET


@pytest.fixture
def web() -> Iterator[Web]:
    server = Web()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def echo() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server that reads until the client half-closes, then answers and closes: the
    answer proves the EOF crossed the proxy, and its arrival that the way back still works."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = read_all(conn)
                received.append(data)
                conn.sendall(b"got %d bytes: " % len(data) + data[::-1])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], received
    finally:
        stop_listening(listener, thread)


def head_and_body(raw: bytes) -> tuple[str, bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return head.decode(), body


# --- CONNECT --------------------------------------------------------------------------------


@pytest.mark.english
def test_connect_tunnels_bytes_both_ways_and_passes_the_half_close(
    proxy: Proxy, echo: tuple[int, list[bytes]]
) -> None:
    port, received = echo
    payload = bytes(range(256)) * 4096  # 1 MiB, more than any buffer on the way
    # The payload follows the CONNECT head in the same write: it belongs to the tunnel.
    raw = proxy.send(b"CONNECT echo.test:%d HTTP/1.1\r\nHost: echo.test\r\n\r\n" % port + payload)
    head, body = head_and_body(raw)
    assert head == "HTTP/1.1 200 Connection established"
    assert received == [payload]
    assert body == b"got %d bytes: " % len(payload) + payload[::-1]
    [line] = proxy.log()
    assert line["method"] == "CONNECT" and line["host"] == "echo.test" and line["port"] == port
    assert line["decision"] == "allow" and line["reason"] == "listed: echo.test"
    assert line["address"] == "127.0.0.1" and line["resolved"] == ["127.0.0.1"]
    assert set(line) >= {"time", "method", "host", "port", "decision", "reason"}


@pytest.mark.english
def test_https_clients_tunnel_through_it(proxy: Proxy, web: Web) -> None:
    """http.client's own tunnel (what urllib does for https through HTTPS_PROXY)."""

    class Through(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(str(proxy.path))
            self._tunnel()  # type: ignore[attr-defined]

    conn = Through("proxy", timeout=10)
    conn.set_tunnel("a.wild.test", web.server_address[1])
    conn.request("GET", "/one")
    first = conn.getresponse().read()
    conn.request("POST", "/two", body=b"xyz")  # the tunnel stays open for the next request
    second = conn.getresponse().read()
    conn.close()
    assert (first, second) == (b"hello GET /one 0", b"hello POST /two 3")
    assert [line["reason"] for line in proxy.log()] == ["listed: *.wild.test"]


# --- plain HTTP -----------------------------------------------------------------------------


def test_plain_http_is_forwarded_in_origin_form_without_proxy_headers(
    proxy: Proxy, web: Web
) -> None:
    port = web.server_address[1]
    raw = proxy.send(
        b"GET http://user:pw@Web.Test:%d/hello?x=1 HTTP/1.1\r\n" % port
        + b"Host: ignored.test\r\nProxy-Authorization: Basic c2VjcmV0\r\n"
        + b"Proxy-Connection: keep-alive\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\n"
        + b"Accept: */*\r\n\r\n"
    )
    head, body = head_and_body(raw)
    assert head.startswith("HTTP/1.1 200") and body == b"hello GET /hello?x=1 0"
    [seen] = web.seen
    assert seen.path == "/hello?x=1" and seen.headers["host"] == f"Web.Test:{port}"
    assert seen.headers["connection"] == "close" and seen.headers["accept"] == "*/*"
    assert not {"proxy-authorization", "proxy-connection", "x-drop"} & set(seen.headers)
    [line] = proxy.log()
    assert (line["method"], line["host"], line["port"]) == ("GET", "web.test", port)
    assert line["decision"] == "allow"


def test_a_request_body_is_forwarded_and_nothing_after_it(proxy: Proxy, web: Web) -> None:
    port = web.server_address[1]
    smuggled = b"GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n"
    sized = (
        b"POST http://web.test:%d/a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" % port
    )
    chunked = (
        b"PUT http://web.test:%d/b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" % port
        + b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    for request in (sized, chunked):
        head, _ = head_and_body(proxy.send(request + smuggled))
        assert head.startswith("HTTP/1.1 200")
    assert [(s.method, s.path, s.body) for s in web.seen] == [
        ("POST", "/a", b"hello"),
        ("PUT", "/b", b"abcde"),
    ]
    assert "denied.test" not in proxy.recorder.lookups
    assert [line["host"] for line in proxy.log()] == ["web.test", "web.test"]


def test_expect_100_continue_is_answered_by_the_proxy(proxy: Proxy, web: Web) -> None:
    port = web.server_address[1]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(proxy.path))
        sock.sendall(
            b"POST http://web.test:%d/up HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n" % port
            + b"Expect: 100-continue\r\n\r\n"
        )
        assert sock.recv(1024) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"ok")
        head, body = head_and_body(read_all(sock))
    assert head.startswith("HTTP/1.1 200") and body == b"hello POST /up 2"
    assert "expect" not in web.seen[0].headers


# --- denials --------------------------------------------------------------------------------

DENIED = [
    ("denied.test", "not in the allowlist (--allow denied.test to permit)"),
    ("wild.test", "not in the allowlist (--allow wild.test to permit)"),
    (
        "metadata.google.internal",
        "a cloud metadata name not in the allowlist; a wildcard never covers it "
        "(--allow metadata.google.internal to permit)",
    ),
    (
        "localhost",
        "a loopback name not in the allowlist; a wildcard never covers it "
        "(--allow localhost to permit)",
    ),
    ("127.0.0.2", "an IP address (loopback) not in the allowlist (--allow 127.0.0.2 to permit)"),
    (
        "169.254.169.254",
        "an IP address (cloud metadata) not in the allowlist (--allow 169.254.169.254 to permit)",
    ),
    ("10.0.0.1", "an IP address (private) not in the allowlist (--allow 10.0.0.1 to permit)"),
    (
        "[fd00:ec2::254]",
        "an IP address (cloud metadata) not in the allowlist (--allow fd00:ec2::254 to permit)",
    ),
]


@pytest.mark.parametrize(("host", "reason"), DENIED)
@pytest.mark.english
def test_denied_targets_get_403_with_the_reason_and_are_never_resolved(
    proxy: Proxy, host: str, reason: str
) -> None:
    connect = proxy.send(b"CONNECT %s:443 HTTP/1.1\r\nHost: x\r\n\r\n" % host.encode())
    plain = proxy.send(b"GET http://%s/ HTTP/1.1\r\nHost: x\r\n\r\n" % host.encode())
    for raw, port in ((connect, 443), (plain, 80)):
        head, body = head_and_body(raw)
        assert head.startswith("HTTP/1.1 403 ")
        assert "X-Proxy-Error: blocked-by-allowlist" in head
        assert body.decode() == f"flowerbox egress: denied {host}:{port}: {reason}\n"
    assert proxy.recorder.lookups == [] and proxy.recorder.connects == []
    log = proxy.log()
    assert [(line["method"], line["decision"]) for line in log] == [
        ("CONNECT", "deny"),
        ("GET", "deny"),
    ]
    assert all(reason in line["reason"] and "resolved" not in line for line in log)


@pytest.mark.english
def test_an_empty_list_denies_everything_unresolved(sockdir: Path, tmp_path: Path) -> None:
    for proxy in start_proxy(sockdir, tmp_path, []):
        for host in (b"web.test", b"127.0.0.1"):
            head, body = head_and_body(
                proxy.send(b"CONNECT %s:80 HTTP/1.1\r\nHost: x\r\n\r\n" % host)
            )
            assert head.startswith("HTTP/1.1 403") and b"which is empty: no network" in body
        assert proxy.recorder.lookups == [] and proxy.recorder.connects == []
        assert [line["decision"] for line in proxy.log()] == ["deny", "deny"]


@pytest.mark.parametrize(
    ("host", "address", "kind"),
    [
        ("rebind.test", "127.0.0.1", "loopback"),  # 127.0.0.1 is listed in POLICY, see below
        ("intranet.test", "10.20.30.40", "private"),
        ("metadata.test", "169.254.169.254", "cloud metadata"),
    ],
)
@pytest.mark.english
def test_an_allowed_name_resolving_into_a_refused_range_is_denied_before_any_connect(
    sockdir: Path, tmp_path: Path, host: str, address: str, kind: str
) -> None:
    allow = [entry for entry in POLICY if entry != "127.0.0.1"]
    for proxy in start_proxy(sockdir, tmp_path, allow):
        head, body = head_and_body(
            proxy.send(b"CONNECT %s:443 HTTP/1.1\r\nHost: x\r\n\r\n" % host.encode())
        )
        assert head.startswith("HTTP/1.1 403")
        assert body.decode() == (
            f"flowerbox egress: denied {host}:443: resolves to {address} ({kind}), which is "
            f"not in the allowlist (--allow {address} to permit)\n"
        )
        assert proxy.recorder.lookups == [host] and proxy.recorder.connects == []
        [line] = proxy.log()
        assert line["decision"] == "deny" and line["resolved"] == [address]


def test_a_listed_address_lets_a_name_resolving_to_it_through(proxy: Proxy, web: Web) -> None:
    port = web.server_address[1]
    head, _ = head_and_body(
        proxy.send(b"GET http://rebind.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n" % port)
    )
    assert head.startswith("HTTP/1.1 200") and proxy.recorder.connects == [("127.0.0.1", port)]


def test_a_listed_ip_literal_is_connected_without_a_lookup(proxy: Proxy, web: Web) -> None:
    port = web.server_address[1]
    head, _ = head_and_body(
        proxy.send(b"GET http://127.0.0.1:%d/ip HTTP/1.1\r\nHost: x\r\n\r\n" % port)
    )
    assert head.startswith("HTTP/1.1 200") and proxy.recorder.lookups == []
    assert web.seen[0].path == "/ip"


# --- what cannot be reached, and what cannot be read ----------------------------------------


@pytest.mark.english
def test_an_allowed_target_that_cannot_be_reached_gets_502(proxy: Proxy) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: refused
        refused = proxy.send(b"CONNECT web.test:%d HTTP/1.1\r\nHost: x\r\n\r\n" % port)
    unknown = proxy.send(b"CONNECT nowhere.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
    head, body = head_and_body(refused)
    assert head.startswith("HTTP/1.1 502")
    assert body.decode().startswith(f"flowerbox egress: cannot reach web.test:{port}: 127.0.0.1:")
    head, body = head_and_body(unknown)
    assert head.startswith("HTTP/1.1 502") and b"cannot resolve nowhere.test" in body
    log = proxy.log()
    assert [line["decision"] for line in log] == ["allow", "allow"]
    assert all("error" in line and "address" not in line for line in log)


@pytest.mark.english
@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"HELLO\r\n\r\n", "illegal request line"),
        (b"GET / HTTP/1.1\r\nHost: web.test\r\n\r\n", "not a proxy request"),
        (b"GET https://web.test/ HTTP/1.1\r\nHost: x\r\n\r\n", "send CONNECT host:443"),
        (b"CONNECT web.test HTTP/1.1\r\nHost: x\r\n\r\n", "bad port in 'web.test'"),
        (b"CONNECT web.test:0 HTTP/1.1\r\nHost: x\r\n\r\n", "bad port"),
        (b"CONNECT web.test:99999 HTTP/1.1\r\nHost: x\r\n\r\n", "bad port"),
        (b"CONNECT ::1:443 HTTP/1.1\r\nHost: x\r\n\r\n", "put an IPv6 address in brackets"),
        (b"CONNECT [web.test]:443 HTTP/1.1\r\nHost: x\r\n\r\n", "is not an IPv6 address"),
        (b"CONNECT web_test%00.x:443 HTTP/1.1\r\nHost: x\r\n\r\n", "is not a valid host name"),
        (
            b"POST http://web.test/ HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n",
            "both Transfer-Encoding and Content-Length",
        ),
        (
            b"POST http://web.test/ HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
            "Content-Length",
        ),
        (b"BREW http://web.test/ HTTP/1.1\r\nHost: x\r\n\r\n", "Unsupported method ('BREW')"),
        # Strict HTTP/1.1 (flowerbox.sidecar.http): what a lenient parser would pass on re-framed.
        (b"GET http://web.test/ HTTP/1.1\r\n\r\n", "Missing mandatory Host"),
        (b"GET http://web.test/ HTTP/1.1\r\nHost: x\r\nX-A: a\rX-Injected: yes\r\n\r\n", "CR"),
        (b"GET http://web.test/ HTTP/1.1\nHost: x\n\n", "a bare CR or LF"),
        (b"GET http://web.test/ HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", "obs-fold"),
        (
            b"POST http://web.test/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n",
            "Transfer-Encoding",
        ),
        (
            b"POST http://web.test/ HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
            b"Content-Length: 2\r\n\r\nab",
            "conflicting Content-Length",
        ),
    ],
)
def test_malformed_requests_get_400_and_a_log_line(proxy: Proxy, raw: bytes, why: str) -> None:
    head, body = head_and_body(proxy.send(raw))
    assert head.split(" ")[1] in ("400", "501"), head
    assert body.decode().startswith("flowerbox egress: bad request: ") and why in body.decode()
    assert proxy.recorder.lookups == [] and proxy.recorder.connects == []
    [line] = proxy.log()
    assert line["decision"] == "deny" and why in line["reason"]


def test_the_socket_is_private(proxy: Proxy) -> None:
    assert stat.S_IMODE(proxy.path.stat().st_mode) == 0o600


# --- inside the gateway process ---------------------------------------------------------


def test_the_gateway_process_serves_the_proxy_and_removes_its_socket_on_sigterm(
    start_gateway: Callable[..., GatewayProcess], sockdir: Path, tmp_path: Path, web: Web
) -> None:
    proxy_sock, log_path = sockdir / "proxy.sock", tmp_path / "box" / "egress.jsonl"
    args = ("--proxy-socket", str(proxy_sock), "--egress-log", str(log_path))
    gateway = start_gateway("http://127.0.0.1:9", args=(*args, "--allow", "127.0.0.1,x.test"))
    assert proxy_sock.exists() and stat.S_IMODE(proxy_sock.stat().st_mode) == 0o600
    proxy = Proxy(proxy_sock, log_path, Recorder({}))
    port = web.server_address[1]
    allowed = proxy.send(b"GET http://127.0.0.1:%d/in HTTP/1.1\r\nHost: x\r\n\r\n" % port)
    denied = proxy.send(b"CONNECT denied.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert allowed.startswith(b"HTTP/1.1 200") and allowed.endswith(b"hello GET /in 0")
    assert head_and_body(denied)[1].startswith(b"flowerbox egress: denied denied.test:443")
    assert [line["decision"] for line in proxy.log()] == ["allow", "deny"]
    assert "egress proxy on" in gateway.log() and "allowing 127.0.0.1, x.test" in gateway.log()
    assert gateway.stop() == 0
    assert not proxy_sock.exists() and not gateway.socket.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--egress-log", "{dir}/egress.jsonl", "--allow", "https://x.test"), "a bare host"),
        (("--egress-log", "{dir}/egress.jsonl", "--allow-preset", "pip"), "unknown --allow-pre"),
        ((), "--proxy-socket needs --egress-log"),
    ],
)
def test_the_gateway_refuses_unusable_egress_settings(
    start_gateway: Callable[..., GatewayProcess], sockdir: Path, args: tuple[str, ...], message: str
) -> None:
    proxy_sock = sockdir / "proxy.sock"
    filled = tuple(arg.format(dir=sockdir) for arg in args)
    gateway = start_gateway("http://127.0.0.1:9", args=("--proxy-socket", str(proxy_sock), *filled))
    assert gateway.process.wait(timeout=10) == 2
    assert message in gateway.log() and not proxy_sock.exists()


def test_a_private_socket_gets_its_name_only_once_it_listens(sockdir: Path) -> None:
    """Whoever waits for the file (the relay, the tests) must never connect into a refusal."""
    path = sockdir / "s.sock"
    seen_before_listen: list[bool] = []

    class Watched(PrivateUnixServer):
        def server_activate(self) -> None:
            seen_before_listen.append(path.exists())
            super().server_activate()

    server = Watched(path, socketserver.BaseRequestHandler)
    try:
        assert seen_before_listen == [False]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(path))  # accepted, not refused
    finally:
        server.server_close()
    assert not path.exists() and list(sockdir.iterdir()) == []


@pytest.mark.parametrize("planted", ["folder", "link", "fifo"])
def test_closing_leaves_what_a_box_put_in_the_sockets_place(
    sockdir: Path, tmp_path: Path, planted: str
) -> None:
    """The socket's folder may be a box's: whatever replaced the socket there is left as it
    is (a folder made unlink fail and a broker's revoke with it), and a link is never
    followed to what it names."""
    path = sockdir / "s.sock"
    target = tmp_path / "target"
    target.write_text("keep\n")
    server = PrivateUnixServer(path, socketserver.BaseRequestHandler)
    path.unlink()
    if planted == "folder":
        path.mkdir()
    elif planted == "link":
        path.symlink_to(target)
    else:
        os.mkfifo(path)
    server.server_close()
    assert os.path.lexists(path) and target.read_text() == "keep\n"
