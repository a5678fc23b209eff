"""The credential-injecting gateway: the only process of a box that holds the real API key.

    python -m flowerbox.gateway --socket DIR/api.sock --credentials creds.env \\
        --usage usage.json [--budget USD] [--prices prices.json] \\
        [--proxy-socket DIR/proxy.sock --egress-log egress.jsonl --allow DOMAIN ...]

It listens on a unix socket (mode 0600) that the agent's container reaches through
`flowerbox.relay`, and forwards every `/v1/...` request to the real upstream (the credentials
file's ANTHROPIC_BASE_URL, default https://api.anthropic.com; TLS checked against the system
CA bundle, so SSL_CERT_FILE applies). On the way out the client's credential headers (a
placeholder) are dropped and the real ones put in: ANTHROPIC_API_KEY as `x-api-key`,
ANTHROPIC_AUTH_TOKEN as `Authorization: Bearer`. Responses stream back chunk by chunk as they
arrive (an event stream reaches the CLI event by event), and their usage is metered per model
into the usage file (`flowerbox.meter`).

Answers of its own, all with the Messages API's error shape:
- `GET /health`: 200 `{"upstream": "reachable"}` when a TCP connection to the upstream's
  host:port opens within 3 s, else 503. Never forwarded, no credentials needed: it is what
  flower's wait_online probes inside the box (FLOWER_HEALTH_URL).
- 403 `permission_error` for `/v1/messages` once `--budget` is spent, without contacting the
  upstream. The CLI does not retry a 403 and flower treats it as fatal; the message names
  the budget.
- 502 `api_error` naming the upstream when it cannot be reached (refused, reset, TLS failure).
- 404 for paths outside `/v1/`.

With `--proxy-socket` the same process also serves the egress proxy (`flowerbox.proxy`) on a
second unix socket, allowing what `--allow`/`--allow-preset` list and logging each decision
to `--egress-log` (docs/egress.md).

The credentials file is read once at start and its values are never logged, printed or
passed on in argv or an environment. One line per request goes to stderr: method, path,
status, model, tokens, cost, milliseconds. SIGTERM (or SIGINT) closes the socket, removes
the socket file and exits 0.

Errors: `GatewayError` (unusable credentials file; the message names the file, not values).
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import socket
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from flower.core.env import parse_dotenv
from flowerbox.egress import EgressError, Policy
from flowerbox.meter import Meter, UsageReader, json_object
from flowerbox.pricing import PriceError, PriceTable, load_prices
from flowerbox.proxy import HOP_BY_HOP, EgressLog, EgressProxy, PrivateUnixServer
from flowerbox.spec import PLACEHOLDER_KEY

__all__ = ["Credentials", "Gateway", "GatewayError", "Upstream", "load_credentials", "main"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
HEALTH_TIMEOUT = 3.0
# The CLI's own request timeout (X-Stainless-Timeout) is 600 s; a stream idle longer is dead.
UPSTREAM_TIMEOUT = 600.0
CHUNK = 64 * 1024
# The hop-by-hop headers, and the framing the gateway sets itself on each side.
_HOP_BY_HOP = HOP_BY_HOP | {"transfer-encoding", "content-length"}
# Dropped from requests: the client's placeholder credentials, and compression the meter
# would have to undo (the gateway asks for identity; the CLI accepts an uncompressed reply).
_REQUEST_DROPPED = _HOP_BY_HOP | {"x-api-key", "authorization", "accept-encoding"}


class GatewayError(Exception):
    """The gateway cannot start; the message says which file and what to fix."""


@dataclass(frozen=True)
class Credentials:
    """The real credentials and where they are valid. Values never appear in repr()."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    auth_token: str | None = field(default=None, repr=False)

    def headers(self) -> list[tuple[str, str]]:
        """The headers that replace the client's: both when both are set, as the SDK does."""
        out = []
        if self.api_key:
            out.append(("x-api-key", self.api_key))
        if self.auth_token:
            out.append(("authorization", f"Bearer {self.auth_token}"))
        return out


def load_credentials(path: Path) -> Credentials:
    """Read ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN / ANTHROPIC_BASE_URL from a .env file."""
    try:
        values = parse_dotenv(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise GatewayError(f"cannot read the credentials file {path}: {exc}") from exc
    creds = Credentials(
        base_url=values.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL,
        api_key=values.get("ANTHROPIC_API_KEY") or None,
        auth_token=values.get("ANTHROPIC_AUTH_TOKEN") or None,
    )
    if not creds.api_key and not creds.auth_token:
        raise GatewayError(
            f"{path} holds neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN; "
            "run `flower setup` on the host or put one of them in the file"
        )
    if urlsplit(creds.base_url).scheme not in ("http", "https"):
        raise GatewayError(f"{path}: ANTHROPIC_BASE_URL must be an http(s) URL")
    return creds


class Upstream:
    """The real API's origin, with a small pool of kept-alive connections to it."""

    def __init__(self, base_url: str, *, pool_size: int = 8) -> None:
        url = urlsplit(base_url)
        self.tls = url.scheme == "https"
        self.host = url.hostname or ""
        self.port = url.port or (443 if self.tls else 80)
        self.prefix = url.path.rstrip("/")
        self.name = f"{url.scheme}://{url.netloc}"
        self._context = ssl.create_default_context() if self.tls else None
        self._pool_size = pool_size
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def reachable(self) -> tuple[bool, str]:
        """Whether a TCP connection opens within HEALTH_TIMEOUT, and the reason if not."""
        try:
            socket.create_connection((self.host, self.port), timeout=HEALTH_TIMEOUT).close()
        except OSError as exc:
            return False, str(exc) or type(exc).__name__
        return True, ""

    def send(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes | None
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send one request; the caller reads the response, then calls `release`."""
        with self._lock:
            pooled = self._idle.pop() if self._idle else None
        if pooled is not None:
            try:
                return pooled, self._send(pooled, method, path, headers, body)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                pooled.close()  # closed by the server while idle: the request never arrived
        conn = self._connect()
        try:
            return conn, self._send(conn, method, path, headers, body)
        except BaseException:
            conn.close()
            raise

    def release(
        self,
        conn: http.client.HTTPConnection,
        response: http.client.HTTPResponse,
        *,
        reusable: bool,
    ) -> None:
        """Keep the connection for the next request if its response was read to the end."""
        if reusable and response.isclosed() and not response.will_close and conn.sock:
            with self._lock:
                if len(self._idle) < self._pool_size:
                    self._idle.append(conn)
                    return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _connect(self) -> http.client.HTTPConnection:
        if self._context is not None:
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=UPSTREAM_TIMEOUT, context=self._context
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=UPSTREAM_TIMEOUT)

    def _send(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        path: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
    ) -> http.client.HTTPResponse:
        conn.putrequest(method, self.prefix + path, skip_accept_encoding=True)
        for name, value in headers:
            conn.putheader(name, value)
        conn.putheader("accept-encoding", "identity")
        if body is not None:
            conn.putheader("content-length", str(len(body)))
        conn.endheaders(body)
        return conn.getresponse()


class Gateway(PrivateUnixServer):
    """The HTTP server on the unix socket; one thread per client connection."""

    def __init__(
        self,
        socket_path: Path,
        *,
        credentials: Credentials,
        meter: Meter,
        log: TextIO = sys.stderr,
    ) -> None:
        self.credentials = credentials
        self.upstream = Upstream(credentials.base_url)
        self.meter = meter
        self.log = log
        self._log_lock = threading.Lock()
        super().__init__(socket_path, _Handler)

    def server_close(self) -> None:
        super().server_close()
        self.upstream.close()

    def line(self, text: str) -> None:
        with self._log_lock:
            print(f"flowerbox-gateway: {text}", file=self.log, flush=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Gateway

    def log_message(self, format: str, *args: Any) -> None:
        """Silenced: the gateway writes its own line, which never holds headers."""

    def do_GET(self) -> None:
        if self.path == "/health":
            self._health()
        else:
            self._forward()

    def do_POST(self) -> None:
        self._forward()

    do_PUT = do_PATCH = do_DELETE = do_HEAD = do_POST

    def _health(self) -> None:
        ok, reason = self.server.upstream.reachable()
        body: dict[str, str] = {"upstream": "reachable" if ok else "unreachable"}
        if not ok:
            body |= {"url": self.server.upstream.name, "error": reason}
        self._json(200 if ok else 503, body)

    def _forward(self) -> None:
        started = time.perf_counter()
        gateway = self.server
        route = self.path.partition("?")[0]
        if not route.startswith("/v1/"):
            message = f"flowerbox gateway: no route {route}; it forwards /v1/ only"
            self._json(404, _error("not_found_error", message))
            self._done(started, 404)
            return
        gateway.meter.saw_client_credential(self._client_credential())
        body = self._body()
        request = json_object(body) if body else {}
        model = request.get("model") if isinstance(request.get("model"), str) else None
        if route == "/v1/messages" and gateway.meter.spent():
            gateway.meter.refuse()
            self._json(403, _error("permission_error", _budget_message(gateway.meter)))
            self._done(started, 403, model, "refused: budget spent")
            return
        headers = [
            (name, value)
            for name, value in self.headers.items()
            if name.lower() not in _REQUEST_DROPPED and name.lower() not in self._connection()
        ]
        headers += gateway.credentials.headers()
        try:
            conn, response = gateway.upstream.send(self.command, self.path, headers, body)
        except (OSError, http.client.HTTPException) as exc:
            reason = str(exc) or type(exc).__name__
            message = f"flowerbox gateway: cannot reach {gateway.upstream.name}: {reason}"
            self._json(502, _error("api_error", message))
            self._done(started, 502, model, "upstream unreachable")
            return
        reader = UsageReader(
            streaming="text/event-stream" in (response.getheader("content-type") or ""),
            model=model,
        )
        complete = False
        try:
            complete = self._relay(response, reader)
        finally:
            gateway.upstream.release(conn, response, reusable=complete)
        reader.finish()
        if reader.seen:
            model = reader.model or model or "unknown"
            tokens, cost = gateway.meter.add(model, reader.usage)
            summary = " ".join(f"{k.removesuffix('_tokens')}={v}" for k, v in tokens.items())
            self._done(started, response.status, model, f"{summary} ${cost:.4f}")
        else:
            gateway.meter.count_unmetered()
            self._done(started, response.status, model)

    def _relay(self, response: http.client.HTTPResponse, reader: UsageReader) -> bool:
        """Send the upstream's response on as it arrives: content-length framing when the
        upstream gave a length, chunked otherwise. A cut upstream cuts the client too (no
        final chunk), so the CLI sees a dropped stream, as it would without the gateway.
        True when the whole body passed."""
        self.send_response(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        length = response.getheader("content-length")
        bodiless = self.command == "HEAD" or response.status in (204, 304)
        chunked = not bodiless and (length is None or response.chunked)
        if chunked:
            self.send_header("transfer-encoding", "chunked")
        elif length is not None:
            self.send_header("content-length", length)
        self.end_headers()
        if bodiless:
            return True
        sent = 0
        try:
            for chunk in _chunks(response):
                reader.feed(chunk)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                sent += len(chunk)
        except (OSError, http.client.HTTPException):
            self.close_connection = True  # either side went away mid-body
            return False
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        elif length is not None and sent != int(length):
            self.close_connection = True
            return False
        return True

    def _body(self) -> bytes | None:
        """The request body, de-chunked if the client sent it chunked."""
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        length = self.headers.get("content-length")
        return self.rfile.read(int(length)) if length else None

    def _client_credential(self) -> str:
        """What the client sent as its key: the box's placeholder, nothing, or something else
        (never the value itself: it could be a real key that leaked into the agent's side)."""
        bearer = (self.headers.get("authorization") or "").removeprefix("Bearer ").strip()
        sent = {self.headers.get("x-api-key") or "", bearer} - {""}
        if not sent:
            return "none"
        return "placeholder" if sent == {PLACEHOLDER_KEY} else "other"

    def _connection(self) -> set[str]:
        """Header names the client's Connection header marks as hop-by-hop."""
        value = self.headers.get("connection") or ""
        return {name.strip().lower() for name in value.split(",")}

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _done(self, started: float, status: int, model: str | None = None, note: str = "") -> None:
        ms = (time.perf_counter() - started) * 1000
        fields = [self.command, self.path, str(status), model or "-", note, f"{ms:.0f}ms"]
        self.server.line(" ".join(f for f in fields if f))


def _chunks(response: http.client.HTTPResponse) -> Iterator[bytes]:
    """The body as the upstream sends it: read1 returns whatever has arrived, never waits
    for a full buffer, so an event is passed on the moment it comes in."""
    while chunk := response.read1(CHUNK):
        yield chunk


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _usd(amount: float) -> str:
    """Dollars with cents, or with four decimals for amounts too small to show in cents."""
    return f"${amount:.2f}" if amount == 0 or amount >= 0.01 else f"${amount:.4f}"


def _budget_message(meter: Meter) -> str:
    budget = _usd(meter.budget or 0.0)
    return (
        f"flowerbox gateway: the run's budget of {budget} is spent ({_usd(meter.total)} used);"
        " raise it with --budget"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flowerbox.gateway",
        description="Forward /v1/ requests from a unix socket to the real API, credentials added.",
    )
    parser.add_argument("--socket", type=Path, required=True, help="unix socket to listen on")
    parser.add_argument("--credentials", type=Path, required=True, help=".env with the key")
    parser.add_argument("--usage", type=Path, required=True, help="usage JSON, rewritten live")
    parser.add_argument("--budget", type=float, help="USD; model requests are refused after it")
    parser.add_argument("--prices", type=Path, help="JSON prices laid over the shipped table")
    egress = parser.add_argument_group("egress proxy (docs/egress.md)")
    egress.add_argument("--proxy-socket", type=Path, help="serve the egress proxy here too")
    egress.add_argument("--egress-log", type=Path, help="JSON lines, one per proxy decision")
    egress.add_argument(
        "--allow", action="append", default=[], metavar="DOMAIN", help="repeatable, or a,b"
    )
    egress.add_argument("--allow-preset", action="append", default=[], metavar="NAME")
    args = parser.parse_args(argv)
    if args.budget is not None and args.budget <= 0:
        parser.error(f"--budget must be a positive number of dollars, got {args.budget}")
    try:
        credentials = load_credentials(args.credentials)
        prices = load_prices(args.prices) if args.prices else PriceTable()
        policy = Policy.parse(args.allow, args.allow_preset)
        egress_log = _egress_log(args.egress_log) if args.proxy_socket else None
    except (GatewayError, PriceError, EgressError) as exc:
        print(f"flowerbox-gateway: {exc}", file=sys.stderr)
        return 2
    meter = Meter(args.usage, prices, budget=args.budget)
    servers: list[PrivateUnixServer] = []
    if args.proxy_socket and egress_log is not None:
        # Bound before the API socket: whoever waits for api.sock finds the proxy up too.
        servers.append(EgressProxy(args.proxy_socket, policy=policy, log=egress_log))
    gateway = Gateway(args.socket, credentials=credentials, meter=meter)
    servers.append(gateway)

    def stop(signum: int, frame: object) -> None:
        # shutdown() waits for serve_forever to return, so it cannot run on this thread.
        threading.Thread(target=gateway.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    gateway.line(f"listening on {args.socket} -> {gateway.upstream.name}")
    if args.proxy_socket:
        allowed = ", ".join(policy.entries) or "nothing (no network)"
        gateway.line(f"egress proxy on {args.proxy_socket}, allowing {allowed}")
    threads = [threading.Thread(target=s.serve_forever, args=(0.2,)) for s in servers[:-1]]
    for thread in threads:
        thread.start()
    try:
        gateway.serve_forever(poll_interval=0.2)
    finally:
        for server in servers[:-1]:
            server.shutdown()
        for thread in threads:
            thread.join()
        for server in servers:
            server.server_close()
        if egress_log is not None:
            egress_log.close()
    gateway.line("stopped")
    return 0


def _egress_log(path: Path | None) -> EgressLog:
    if path is None:
        raise GatewayError("--proxy-socket needs --egress-log: every decision is logged")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return EgressLog(path)
    except OSError as exc:
        raise GatewayError(f"cannot open the egress log {path}: {exc}") from exc


if __name__ == "__main__":
    sys.exit(main())
