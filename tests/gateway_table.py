"""The gateway as a wall, as one table (issue 16): every request spelling, method and header
trick of the attack review, each with what the gateway must answer before and after the budget
is spent, and whether it may reach the upstream at all. Used twice, through the same unix
socket the box uses: against a gateway process (tests/flowerbox/test_gateway_wall.py) and
against the gateway in a real container (tests/docker/test_gateway_wall.py). Each supplies a
`Launch`; the scenarios are here.

The upstream is `StandIn`, a loopback server that records every request and, like the one of
the attack review, echoes the request headers back on every path but the Messages API's: a
request that got through with the key would show the key in its answer.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

import h11

MESSAGES = "/v1/messages?beta=true"
COUNT = "/v1/messages/count_tokens?beta=true"
REAL_KEY = "sk-ant-real-" + "wall-0123456789abcdef"  # never a literal a probe could match
CANARY = "canary-" + "userinfo-4b1d"  # the base URL's password
BASE_USER = "wall-user"
MODEL = "claude-opus-5-5"  # $4 / $20 per million tokens in, out

# Request headers a client could use to steer or fool an upstream; none may pass the gateway.
FORWARDING = (
    "x-forwarded-host",
    "x-forwarded-for",
    "x-forwarded-proto",
    "forwarded",
    "x-real-ip",
    "via",
    "x-original-url",
    "x-rewrite-url",
    "x-http-method-override",
    "proxy-authorization",
)


def ask(max_tokens: int = 100) -> bytes:
    return json.dumps(
        {
            "model": MODEL,
            "max_tokens": max_tokens,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()


def request(
    target: str,
    *,
    method: str = "POST",
    headers: tuple[str, ...] = (),
    body: bytes | None = None,
    host: bool = True,
) -> bytes:
    """A request as raw bytes: the placeholder key, a JSON body with its Content-Length."""
    data = ask() if body is None and method == "POST" else (body or b"")
    lines = [f"{method} {target} HTTP/1.1"]
    lines += ["Host: localhost"] if host else []
    lines += ["x-api-key: sk-flowerbox-placeholder", "content-type: application/json"]
    lines += list(headers)
    if data and not any(
        h.lower().startswith(("content-length", "transfer-encoding")) for h in headers
    ):
        lines.append(f"content-length: {len(data)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


@dataclass(frozen=True)
class Row:
    """One request and what it gets: `status` before the budget is spent; `spent` after it
    (None: the same). `forwarded`: it reaches the upstream (as the allowlisted request)."""

    id: str
    raw: bytes
    status: int
    forwarded: bool = False
    spent: int | None = None
    error: str | None = None  # the error type of the gateway's own answer

    def status_when(self, spent: bool) -> int:
        return self.spent if spent and self.spent is not None else self.status


def allowed(id: str, target: str = MESSAGES, **kwargs: Any) -> Row:
    """A request the gateway forwards; a Messages call is refused once the budget is spent."""
    spent = 403 if target == MESSAGES else 200
    return Row(id, request(target, **kwargs), 200, forwarded=True, spent=spent)


def refused(id: str, target: str, **kwargs: Any) -> Row:
    return Row(id, request(target, **kwargs), 403, error="permission_error")


def malformed(id: str, raw: bytes) -> Row:
    return Row(id, raw, 400, error="invalid_request_error")


HEAD = b"POST " + MESSAGES.encode() + b" HTTP/1.1\r\nHost: localhost\r\n"
BODY = ask()

ROWS: list[Row] = [
    allowed("allowed"),
    allowed("count-tokens", COUNT),
    # --- path spellings: only the exact raw target the CLI sends passes -------------------
    *(
        refused(f"path {target}", target)
        for target in (
            "/v1/messages",
            "/v1/messages/",
            "/v1/messages/?beta=true",
            "/v1//messages?beta=true",
            "/v1/./messages?beta=true",
            "/v1/messages/../messages?beta=true",
            "/v1/x/../messages?beta=true",
            "/v1/Messages?beta=true",
            "/V1/messages?beta=true",
            "/v1/messages?beta=TRUE",
            "/v1/messages?beta=true&x=1",
            "/v1/messages?beta=true#x",
            "/v1/messages%3Fbeta=true",
            "/v1/%6Dessages?beta=true",
            "/v1%2Fmessages?beta=true",
            "/v1/messages;x?beta=true",
            "//v1/messages?beta=true",
            "/v1/messages/batches",
            "/v1/messages/batches?beta=true",
            "/v1/complete",
            "/v1/messages/count_tokens",
            "/v1/models",
            "/v1/files",
            "/v1/organizations/api_keys",
            "/v1/../../admin/echo",
            "/v1/%2e%2e/%2e%2e/x",
            "/v1//..//x",
            "/v1/http://evil.example/",
            "http://localhost/v1/messages?beta=true",
            "https://api.anthropic.com/v1/messages?beta=true",
            "/admin",
            "/health/",
        )
    ),
    # --- methods ------------------------------------------------------------------------------
    *(
        refused(f"method {method}", MESSAGES, method=method)
        for method in ("GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "post")
    ),
    refused("method GET /v1/models", "/v1/models", method="GET"),
    refused("method CONNECT", "api.anthropic.com:443", method="CONNECT"),
    refused("method OPTIONS *", "*", method="OPTIONS"),
    refused("method POST /health", "/health"),
    # --- header tricks: forwarded, but without them ------------------------------------------
    allowed("forwarding headers", headers=tuple(f"{name}: evil.example" for name in FORWARDING)),
    allowed("a Host of its own", headers=("X-Host: evil.example",)),
    allowed("a bearer token of its own", headers=("Authorization: Bearer sk-ant-mine",)),
    allowed("the key twice", headers=("x-api-key: sk-ant-second",)),
    allowed("Connection naming the key", headers=("Connection: keep-alive, x-api-key",)),
    allowed("compression asked for", headers=("Accept-Encoding: gzip, br",)),
    Row(
        "a chunked body, re-framed",
        HEAD
        + b"x-api-key: p\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY),
        200,
        forwarded=True,
        spent=403,
    ),
    # --- strict HTTP/1.1: refused before anything else ---------------------------------------
    malformed(
        "obs-fold", HEAD + b"X-A: a\r\n b\r\n" + b"content-length: %d\r\n\r\n" % len(BODY) + BODY
    ),
    malformed(
        "bare LF", HEAD.replace(b"\r\n", b"\n") + b"content-length: %d\n\n" % len(BODY) + BODY
    ),
    malformed("bare CR in a value", HEAD + b"X-A: a\rX-Injected: yes\r\n\r\n"),
    malformed(
        "Transfer-Encoding: xchunked", HEAD + b"Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n"
    ),
    malformed(
        "Transfer-Encoding and Content-Length",
        HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
    ),
    malformed(
        "two different Content-Lengths",
        HEAD + b"Content-Length: %d\r\nContent-Length: 2\r\n\r\n" % len(BODY) + BODY,
    ),
    malformed("a Content-Length that is no number", HEAD + b"Content-Length: 1x\r\n\r\n"),
    malformed(
        "a bad chunk size", HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n"
    ),
    malformed("space before the colon", HEAD + b"X-A : a\r\n\r\n"),
    malformed("no Host", request(MESSAGES, host=False)),
    malformed("a request line that is no request line", b"HELLO\r\n\r\n"),
    Row(
        "a head over 64 KiB",
        HEAD + b"X-A: " + b"a" * 70_000 + b"\r\n\r\n",
        431,
        error="invalid_request_error",
    ),
]


@dataclass
class Seen:
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes


@dataclass
class StandIn:
    """A loopback upstream: records every request; a Messages call gets an event stream whose
    usage is `output_tokens = max_tokens` (as dear as the request allows: honest, and the
    worst case the gateway reserved) and `input_tokens = 100`; every other path gets its request
    headers echoed back. `delay` holds each Messages answer back, so requests overlap."""

    delay: float = 0.0
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def base_url(self) -> str:
        """With a userinfo canary: it must never reach anything the box can read."""
        return f"http://{BASE_USER}:{CANARY}@127.0.0.1:{self.port}"

    def since(self, mark: int) -> list[Seen]:
        with self.lock:
            return self.seen[mark:]

    def count(self) -> int:
        with self.lock:
            return len(self.seen)


def start_standin(delay: float = 0.0) -> StandIn:
    standin = StandIn(delay=delay)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            with standin.lock:
                standin.seen.append(Seen(self.command, self.path, self.headers.items(), body))
            if self.path.endswith(MESSAGES):
                self._messages(body)
            elif self.path.endswith(COUNT):
                self._json({"input_tokens": 10})
            else:
                self._json({"echo": [f"{k}: {v}" for k, v in self.headers.items()]})

        do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_POST

        def _messages(self, body: bytes) -> None:
            max_tokens = int(json.loads(body).get("max_tokens", 1))
            time.sleep(standin.delay)
            usage = {"input_tokens": 100, "output_tokens": 1}
            start = {"type": "message_start", "message": {"model": MODEL, "usage": usage}}
            delta = {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": max_tokens},
            }
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            for name, data in (("message_start", start), ("message_delta", delta)):
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.write(b'event: message_stop\ndata: {"type": "message_stop"}\n\n')

        def _json(self, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    standin.server = server
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return standin


def stop_standin(standin: StandIn) -> None:
    if standin.server is not None:
        standin.server.shutdown()
        standin.server.server_close()


def credentials(path: Path, base_url: str) -> None:
    """The credentials file of a gateway in front of `base_url` (0600)."""
    path.touch(mode=0o600)
    path.write_text(f"ANTHROPIC_API_KEY={REAL_KEY}\nANTHROPIC_BASE_URL={base_url}\n")


def send(sock_path: Path, raw: bytes, *, timeout: float = 30.0) -> bytes:
    """`raw` on a fresh connection to the gateway's socket; the answer's bytes as they came,
    up to its end (or the gateway's close). The connection stays open meanwhile, as the
    CLI's does: a client that closes its side has hung up, and its request is dropped."""
    parser = h11.Connection(h11.CLIENT)  # frames the answer: its length, chunks or close
    method = raw.split(b" ", 1)[0].decode("ascii", "replace")
    try:  # HEAD's answer has no body; any other method's framing is the answer's own
        parser.send(h11.Request(method=method, target="/", headers=[("host", "x")]))
    except h11.LocalProtocolError:  # no method at all (a row of garbage): framed as a GET's
        parser = h11.Connection(h11.CLIENT)
        parser.send(h11.Request(method="GET", target="/", headers=[("host", "x")]))
    parser.send(h11.EndOfMessage())
    parts: list[bytes] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(sock_path))
        sock.sendall(raw)
        while not _ended(parser):
            data = sock.recv(65536)
            if not data:
                break
            parts.append(data)
            parser.receive_data(data)
    return b"".join(parts)


def _ended(parser: h11.Connection) -> bool:
    """Whether the answer fed to `parser` is whole (one it cannot frame: read to the close)."""
    try:
        while (event := parser.next_event()) is not h11.NEED_DATA:
            if isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                return True
    except h11.RemoteProtocolError:
        return False
    return False


def status_and_body(answer: bytes) -> tuple[int, bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        body = dechunk(body)
    return status, body


def dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2 :]
    return out


def check(row: Row, answer: bytes, reached: list[Seen], *, spent: bool) -> None:
    """What one row must show: its status, the error shape of the gateway's own answers,
    nothing but the allowlisted request upstream (with the real key, once, and no forwarding
    header), and neither the key nor the userinfo canary in what came back."""
    expected = row.status_when(spent)
    status, body = status_and_body(answer)
    assert status == expected, answer[:600]
    assert REAL_KEY.encode() not in answer and CANARY.encode() not in answer
    assert BASE_USER.encode() not in answer
    if status >= 400 and not body and row.id == "method HEAD":
        pass  # a HEAD answer has no body
    elif status >= 400:
        error = json.loads(body)
        assert error["type"] == "error" and error["error"]["message"].startswith(
            "flowerbox gateway: "
        ), error
        kind = "permission_error" if status == 403 else row.error
        assert error["error"]["type"] == kind, error
        if row.forwarded and spent:
            assert "budget" in error["error"]["message"]
    if not (row.forwarded and status == 200):
        assert reached == [], reached
        return
    [seen] = reached
    assert seen.method == "POST" and seen.path in (MESSAGES, COUNT)
    headers = [(k.lower(), v) for k, v in seen.headers]
    assert [v for k, v in headers if k == "x-api-key"] == [REAL_KEY]
    names = {k for k, _ in headers}
    assert not names & {*FORWARDING, "authorization", "x-host"}, names
    assert dict(headers)["host"].startswith("127.0.0.1:")  # never the client's Host
    assert dict(headers)["accept-encoding"] == "identity"
    assert json.loads(seen.body)["max_tokens"] == 100


def spend(sock_path: Path, budget: float) -> None:
    """Spend all but less than one row's worst case of `budget` with honest requests."""
    # Each row reserves 100 output tokens ($0.002) plus its body's bytes at $8/M: ~$0.003;
    # this leaves about $0.0006 (the spending request's own input is $0.0004 of the rest).
    output = int((budget - 0.0011) / 20 * 1_000_000)
    status, body = status_and_body(send(sock_path, request(MESSAGES, body=ask(output))))
    assert status == 200, body


# --- the budget under concurrency ---------------------------------------------------------

RACE_BUDGET = 1.0
RACE_TOKENS = 37_500  # $0.75 of output each: one fits in $1, two never do


def race(sock_path: Path, n: int = 30) -> list[int]:
    """`n` Messages requests at once (each worth $0.75 at the stand-in); their statuses."""
    raw = request(MESSAGES, body=ask(RACE_TOKENS))
    statuses: list[int] = [0] * n
    go = threading.Barrier(n)

    def one(i: int) -> None:
        go.wait()
        statuses[i] = status_and_body(send(sock_path, raw, timeout=120))[0]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


# --- the scenarios, for any way of starting a gateway ----------------------------------------


class Gateway(Protocol):
    """A running gateway, however it was started."""

    @property
    def socket(self) -> Path: ...

    def usage(self) -> dict[str, Any]: ...

    def log(self) -> bytes: ...

    def remove(self) -> None: ...


Launch = Callable[[str, "float | None"], Gateway]  # (base URL, budget) -> a listening gateway
Wall = tuple[StandIn, dict[bool, Gateway]]
BUDGET = 1.0


@contextmanager
def wall(launch: Launch) -> Iterator[Wall]:
    """A stand-in and two gateways in front of it with a $1 budget: one untouched, one whose
    budget is spent (`spend`)."""
    standin = start_standin()
    gateways: dict[bool, Gateway] = {}
    try:
        for spent in (False, True):
            gateways[spent] = launch(standin.base_url(), BUDGET)
        spend(gateways[True].socket, BUDGET)
        yield standin, gateways
    finally:
        for gateway in gateways.values():
            gateway.remove()
        stop_standin(standin)


def through_the_wall(wall: Wall, row: Row, *, spent: bool) -> None:
    standin, gateways = wall
    mark = standin.count()
    answer = send(gateways[spent].socket, row.raw)
    check(row, answer, standin.since(mark), spent=spent)


def counted(gateway: Gateway, refused: int) -> dict[str, Any]:
    """The gateway's usage once it counts `refused` refusals (one is counted in the file just
    after it is answered), or as it is after a deadline generous on a busy machine."""
    deadline = time.monotonic() + 60
    while gateway.usage()["refused"] < refused and time.monotonic() < deadline:
        time.sleep(0.05)
    return gateway.usage()


def race_within_the_budget(launch: Launch) -> None:
    """30 parallel requests worth $0.75 each against $1: one answered, 29 refused unsent."""
    standin = start_standin(delay=0.2)  # every answer overlaps every other request
    gateway = launch(standin.base_url(), RACE_BUDGET)
    try:
        statuses = race(gateway.socket)
        usage = counted(gateway, statuses.count(403))
    finally:
        gateway.remove()
        stop_standin(standin)
    assert sorted(statuses) == [200] + [403] * 29, statuses
    assert len(standin.seen) == 1  # the refused never reached the upstream
    assert 0.75 < usage["total_cost_usd"] <= RACE_BUDGET
    assert (usage["refused"], usage["reserved_usd"]) == (29, 0)


def nothing_secret(launch: Launch, wall: Wall) -> None:
    """The logs and usage files of the wall's gateways; and the health and 502 answers (which
    name the upstream) of a gateway whose upstream is gone, with the canary in the URL's
    userinfo and query: none holds the key or the canary."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: refused
        gone = launch(f"http://{BASE_USER}:{CANARY}@127.0.0.1:{port}/?key={CANARY}", None)
        try:
            health = send(gone.socket, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            unreachable = send(gone.socket, ROWS[0].raw)
            written = [health, unreachable, gone.log(), json.dumps(gone.usage()).encode()]
        finally:
            gone.remove()
    assert status_and_body(health)[0] == 503 and status_and_body(unreachable)[0] == 502
    assert f"http://127.0.0.1:{port}".encode() in health  # the upstream, without userinfo
    # A refusal of its own on the spent gateway: the wall's rows may run in another worker.
    turned_away = status_and_body(send(wall[1][True].socket, request(MESSAGES, body=ask(100))))
    usage = counted(wall[1][True], 1)
    for gateway in wall[1].values():
        written += [gateway.log(), json.dumps(gateway.usage()).encode()]
    for text in written:
        assert REAL_KEY.encode() not in text and CANARY.encode() not in text
        assert BASE_USER.encode() not in text
    assert turned_away[0] == 403, turned_away
    assert usage["total_cost_usd"] <= BUDGET and usage["refused"] > 0
