"""The credential-injecting gateway: the only process of a box that holds the real API key.

    python -m flowerbox.sidecar.gateway --socket DIR/api.sock --credentials creds.env \\
        --usage usage.json [--requests requests.jsonl] [--budget USD] [--prices prices.json] \\
        [--proxy-socket DIR/proxy.sock --egress-log egress.jsonl --allow DOMAIN ...]
        [--allow-api-fetch]

It listens on a unix socket (mode 0600) that the agent's container reaches through
`inside.relay`, reads each request strictly (`sidecar.http`: h11, plus no bare CR/LF,
obs-fold or Transfer-Encoding with Content-Length), and forwards exactly the requests the
Claude Code CLI sends (`ENDPOINTS`, matched on the raw method and request target) to the real
upstream (the credentials file's ANTHROPIC_BASE_URL, default https://api.anthropic.com; TLS
checked against the system CA bundle, so SSL_CERT_FILE applies). Only `FORWARDED_HEADERS`
pass; the real credentials are put in: ANTHROPIC_API_KEY as `x-api-key`, ANTHROPIC_AUTH_TOKEN
as `Authorization: Bearer`. Responses stream back chunk by chunk as they arrive (an event
stream reaches the CLI event by event), and their usage is metered per model into the usage
file (`flowerbox.sidecar.meter`), which also holds the budget's reservations.

Answers of its own, all with the Messages API's error shape (docs/gateway.md has the bodies):
- `GET /health`: 200 `{"upstream": "reachable"}` when a TCP connection to the upstream's
  host:port opens within 3 s, else 503. Never forwarded, no credentials needed: it is what
  flower's wait_online probes inside the box (FLOWER_HEALTH_URL).
- 403 `permission_error` for any other method and target, never forwarded.
- 403 `permission_error` for a body that makes the API reach beyond the box (a URL or file
  source, `mcp_servers`, a container, a server tool: `flowerbox.sidecar.reach`) unless
  `--allow-api-fetch` (or, for a URL source, the egress allowlist) allows it; 400 for a body
  it cannot read as one JSON object. Never forwarded.
- 403 `permission_error` for a Messages call whose worst case does not fit what is left of
  `--budget` (`Meter.admit`), without contacting the upstream. The CLI does not retry a 403
  and flower treats it as fatal; the message names the budget.
- 400 `invalid_request_error` (413, 431) for a request that cannot be read; the connection
  closes.
- 502 `api_error` naming the upstream when it cannot be reached (refused, reset, TLS failure).
- 503 `api_error` for every request once the run's keeper is gone (`--lease`: the socket its
  keeper holds a connection to, flowerbox.sidecar.lease), never forwarded: the box is being
  killed, and nothing it asks after its keeper's death reaches the API.

Each request is charged to, and recorded for, its `Tenant` (`Gateway.tenant`): here the one
run's meter and requests file; in the broker (flowerbox.broker) the run whose token and
socket it came with, and the team.

Nothing the box can read holds a secret of the credentials file: answers and log lines are
scrubbed of the key, the token and the base URL's userinfo and query values.

With `--proxy-socket` the same process also serves the egress proxy (`flowerbox.sidecar.proxy`) on a
second unix socket, allowing what `--allow`/`--allow-preset` list and logging each decision
to `--egress-log` (docs/egress.md).

The credentials file is read once at start and its values are never logged, printed or
passed on in argv or an environment. One line per request goes to stderr: method, path,
status, model, tokens, cost, milliseconds; with `--requests` the same, as a JSON line, to that
file (the run's host-only gateway folder: `flowerbox logs --requests` shows it after the
container is gone). SIGTERM (or SIGINT) closes the socket, removes the socket file and exits 0.

Errors: `GatewayError` (unusable credentials file; the message names the file, not values).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import signal
import socket
import socketserver
import ssl
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, Protocol, TextIO
from urllib.parse import parse_qsl, unquote, urlsplit

import h11

from flower import parse_dotenv, text
from flowerbox.errors import BadRequest, FlowerboxError, GatewayError
from flowerbox.sidecar.admission import peer_of
from flowerbox.sidecar.egress import Policy
from flowerbox.sidecar.hangup import HangUpWatch
from flowerbox.sidecar.http import Incoming, RequestReader, linger_close
from flowerbox.sidecar.lease import Lease
from flowerbox.sidecar.meter import Meter, Reservation, UsageReader, past_reservation
from flowerbox.sidecar.pricing import Billing, PriceTable, load_prices
from flowerbox.sidecar.proxy import HOP_BY_HOP, EgressProxy, JsonLines, PrivateUnixServer
from flowerbox.sidecar.reach import FetchRule, Found, RequestRefused, inspect, request_object
from flowerbox.sidecar.redact import NOTE_LIMIT, Redactor
from flowerbox.wire import PLACEHOLDER_KEY

__all__ = [
    "ENDPOINTS",
    "FORWARDED_HEADERS",
    "Account",
    "Credentials",
    "Gateway",
    "GatewayError",
    "Refusal",
    "Tenant",
    "Upstream",
    "client_keys",
    "credentials_file",
    "credentials_from",
    "load_credentials",
    "main",
]

# What the Claude Code CLI sends in every mode flower uses, recorded from the real CLI
# (tests/flowerbox/test_allowlist.py), matched exactly on the raw request target: no other
# spelling, method or path ever leaves the gateway.
ENDPOINTS = frozenset(
    {
        ("POST", "/v1/messages?beta=true"),
        ("POST", "/v1/messages/count_tokens?beta=true"),  # /context, get_context_usage()
    }
)
BUDGETED = ("POST", "/v1/messages?beta=true")  # model calls: admitted against --budget
HEALTH = ("GET", "/health")
# The request headers passed on (recorded with ENDPOINTS); everything else is dropped, the
# client's forwarding headers included. The credentials, Host, the framing and
# Accept-Encoding (identity, so the meter can read the body) are the gateway's own.
FORWARDED_HEADERS = frozenset(
    {
        "accept",
        "anthropic-beta",
        "anthropic-dangerous-direct-browser-access",
        "anthropic-version",
        "content-type",
        "user-agent",
        "x-app",
        "x-claude-code-agent-id",
        "x-claude-code-session-id",
        "x-stainless-arch",
        "x-stainless-lang",
        "x-stainless-os",
        "x-stainless-package-version",
        "x-stainless-retry-count",
        "x-stainless-runtime",
        "x-stainless-runtime-version",
        "x-stainless-timeout",
    }
)
BODY_LIMIT = 32 * 1024 * 1024  # the Messages API's own request limit
BODY_WITHIN = 300.0  # seconds for a whole body (32 MiB at 110 kB/s): no trickle for ever
DEFAULT_MAX_TOKENS = 128_000  # reserved for a request without a usable max_tokens
# How long a request waits for in-flight requests' reservations to settle before it is
# refused; below the CLI's 600 s request timeout.
ADMISSION_WAIT = 300.0
DEFAULT_BASE_URL = "https://api.anthropic.com"
HEALTH_TIMEOUT = 3.0
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})  # each closes and removes the socket
# The CLI's own request timeout (X-Stainless-Timeout) is 600 s; a stream idle longer is dead.
UPSTREAM_TIMEOUT = 600.0
KEEPER_GONE_NOTE = "refused: the run's keeper is gone"
HUNG_UP_NOTE = "the client hung up before the answer: dropped upstream, nothing billed"
CHUNK = 64 * 1024
OVERBILLED_NOTE = "billed past its worst case: every request now reserved unbounded"
MODEL_SHOWN = 100  # a model name is the client's to choose: logged cut short
# The hop-by-hop headers, and the framing the gateway sets itself on each side.
_HOP_BY_HOP = HOP_BY_HOP | {"transfer-encoding", "content-length"}


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

    def secrets(self) -> list[str]:
        """Every value that must never reach the box: the key, the token, and the base URL's
        userinfo and query values (a URL like https://user:pass@host/?key=... carries some)."""
        url = urlsplit(self.base_url)
        found = [self.api_key, self.auth_token, url.username, url.password]
        found += [value for _, value in parse_qsl(url.query)]
        if "@" in url.netloc:
            found.append(url.netloc.rpartition("@")[0])
        found += [unquote(value) for value in found if value]
        # Longest first, so a secret containing another is replaced whole.
        return sorted(
            {value for value in found if value and len(value) >= 3}, key=len, reverse=True
        )


def load_credentials(path: Path) -> Credentials:
    """Read ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN / ANTHROPIC_BASE_URL from a .env file."""
    return credentials_from(credentials_file(path), str(path))


def credentials_file(path: Path) -> dict[str, str]:
    """Every value of a credentials file (a broker's holds its git credential too)."""
    try:
        return parse_dotenv(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise GatewayError(text("gateway.credentials_unread", path=path, problem=exc)) from exc


def credentials_from(values: Mapping[str, str], source: str) -> Credentials:
    """The credentials among `values` (a .env file's, or the environment: named `source` in
    errors), checked: a key or token, and an http(s) base URL."""
    creds = Credentials(
        base_url=values.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL,
        api_key=values.get("ANTHROPIC_API_KEY") or None,
        auth_token=values.get("ANTHROPIC_AUTH_TOKEN") or None,
    )
    if not creds.api_key and not creds.auth_token:
        raise GatewayError(text("gateway.no_key", source=source))
    if urlsplit(creds.base_url).scheme not in ("http", "https"):
        raise GatewayError(text("gateway.base_url", source=source))
    return creds


class Upstream:
    """The real API's origin, with a small pool of kept-alive connections to it."""

    def __init__(self, base_url: str, *, pool_size: int = 8) -> None:
        url = urlsplit(base_url)
        self.tls = url.scheme == "https"
        self.host = url.hostname or ""
        self.port = url.port or (443 if self.tls else 80)
        self.prefix = url.path.rstrip("/")
        # Never the userinfo: the name appears in answers the box reads.
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.name = f"{url.scheme}://{host}" + (f":{url.port}" if url.port else "")
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
        self,
        method: str,
        path: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
        *,
        watch: HangUpWatch | None = None,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send one request; the caller reads the response, then calls `release`. The
        connection is put under `watch` once the request is sent."""
        with self._lock:
            pooled = self._idle.pop() if self._idle else None
        if pooled is not None:
            try:
                return pooled, self._send(pooled, method, path, headers, body, watch)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                pooled.close()  # closed by the server while idle: the request never arrived
                if watch is not None and watch.hung_up:
                    raise  # closed by us: the client is gone, nobody to send it again for
        conn = self._connect()
        try:
            return conn, self._send(conn, method, path, headers, body, watch)
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
        watch: HangUpWatch | None,
    ) -> http.client.HTTPResponse:
        conn.putrequest(method, self.prefix + path, skip_accept_encoding=True)
        for name, value in headers:
            conn.putheader(name, value)
        conn.putheader("accept-encoding", "identity")
        if body is not None:
            conn.putheader("content-length", str(len(body)))
        conn.endheaders(body)
        if watch is not None and conn.sock is not None:
            watch.guard(conn.sock)
        return conn.getresponse()


class Account(Protocol):
    """What a request is charged to: `Meter` for one run; a broker's run and team together
    (flowerbox.broker)."""

    def worst_case(
        self, model: str | None, *, max_tokens: int, input_tokens: int, billing: Billing
    ) -> float: ...
    def admit(self, amount: float, *, wait: float, alone: bool = False) -> Reservation | str: ...
    def overbilled(self) -> bool: ...
    def release(self, reservation: Reservation) -> None: ...
    def add(
        self, model: str, usage: dict[str, Any], *, reservation: Reservation | None = None
    ) -> tuple[dict[str, int], float]: ...
    def keep(self, reservation: Reservation, model: str) -> float: ...
    def refuse(self) -> None: ...
    def count_unmetered(self) -> None: ...
    def saw_client_credential(self, kind: str) -> None: ...


@dataclass(frozen=True)
class Refusal:
    """An answer of the gateway's own instead of forwarding: status, error type, message,
    and the note of its request line."""

    status: int
    kind: str
    message: str
    note: str


@dataclass(frozen=True)
class Tenant:
    """Whom one request belongs to: what it is charged to, where its line is recorded,
    whether it is refused before anything else (a broker's unknown or revoked token), and
    what the API may reach for it (`--allow-api-fetch`, the egress allowlist)."""

    account: Account
    record: Callable[..., None]
    refusal: Refusal | None = None
    fetch: FetchRule = FetchRule()
    lease: Lease | None = None  # held by whoever keeps the run: lost, nothing is forwarded


class Gateway(PrivateUnixServer):
    """The HTTP server on the unix socket; one thread per client connection."""

    # Whether a forwarded request is settled before the client has the end of its answer.
    # Not for one run's gateway: its usage file is rewritten with two fsyncs, kept off the
    # way to the client (docs/gateway.md, "Overhead"), and its death ends the run anyway.
    settle_before_end = False

    def __init__(
        self,
        socket_path: Path,
        *,
        credentials: Credentials,
        meter: Meter,
        log: TextIO = sys.stderr,
        requests: JsonLines | None = None,
        admission_wait: float = ADMISSION_WAIT,
        fetch: FetchRule | None = None,
        lease: Lease | None = None,
    ) -> None:
        """`fetch`: what the API may reach for the run (default: nothing, reach.py);
        `lease`: the run's keeper's (flowerbox.sidecar.lease), None: no keeper to outlive."""
        self.credentials = credentials
        self.lease = lease
        self.fetch = fetch or FetchRule()
        self.upstream = Upstream(credentials.base_url)
        self.meter = meter
        self.log = log
        self.requests = requests or JsonLines(None)
        self.admission_wait = admission_wait
        self.secrets = credentials.secrets()
        self.redactor = Redactor(self.secrets)  # what is written down; `scrub`: what is shown
        self._log_lock = threading.Lock()
        super().__init__(socket_path, _Connection)

    def server_close(self) -> None:
        super().server_close()
        self.upstream.close()
        if self.lease is not None:
            self.lease.close()

    def tenant(self, incoming: Incoming) -> Tenant:
        """The one run this gateway serves: its meter, its requests file, its fetch rule,
        its keeper's lease."""
        return Tenant(self.meter, self.requests.record, fetch=self.fetch, lease=self.lease)

    def credential_kind(self, sent: set[str]) -> str:
        """What the client sent as its key (`sent`: the non-empty values): the box's
        placeholder or something else (never the value: it could be a leaked real key)."""
        return "placeholder" if sent == {PLACEHOLDER_KEY} else "other"

    def line(self, text: str) -> None:
        with self._log_lock:
            shown = self.redactor.note(text, 2 * NOTE_LIMIT)
            print(f"flowerbox-gateway: {shown}", file=self.log, flush=True)

    def record(self, tenant: Tenant, **fields: Any) -> None:
        """One request's line in its tenant's record, its texts redacted like a log line."""
        clean = self.redactor.note
        tenant.record(**{k: clean(v) if isinstance(v, str) else v for k, v in fields.items()})

    def malformed(self, **fields: Any) -> None:
        """Record a request that could not be read (so has no tenant of its own)."""
        self.requests.record(**fields)

    def upstream_answered(self, seconds: float) -> None:
        """Hook: the upstream answered a forwarded request's head after `seconds` (the
        broker's latency histogram, flowerbox.broker.metrics). Nothing here."""

    def scrub(self, text: str) -> str:
        """`text` with every secret of the credentials file (the key, the token, the base
        URL's userinfo and query values) replaced: nothing the box can read holds them."""
        for secret in self.secrets:
            text = text.replace(secret, "<redacted>")
        return text


class _Connection(socketserver.BaseRequestHandler):
    """One client connection: requests read strictly (flowerbox.sidecar.http), one after another."""

    server: Gateway
    request: socket.socket

    def handle(self) -> None:
        self.request.settimeout(UPSTREAM_TIMEOUT)
        reader = RequestReader(self.request)
        try:
            while (incoming := reader.next_request()) is not None:
                # Whose it is, from the head alone: a refused request's body is never read
                # (nor held), and its connection closes after the answer.
                tenant = self.server.tenant(incoming)
                if tenant.refusal is not None and (incoming.method, incoming.target) != HEALTH:
                    _Exchange(self.server, reader, incoming, b"", tenant).run()
                    break
                body = reader.body(limit=BODY_LIMIT, within=BODY_WITHIN)
                _Exchange(self.server, reader, incoming, body, tenant).run()
                if not reader.reusable:
                    break
        except BadRequest as exc:
            self._malformed(exc)
        except (OSError, h11.LocalProtocolError):
            pass  # the client went away, or broke off mid-response: nothing left to say
        except Exception:  # noqa: BLE001 - a bug of ours is answered and written down, not a reset
            self._failed(reader)
        linger_close(self.request)

    def _failed(self, reader: RequestReader) -> None:
        """A fault of the gateway's own: its traceback in the log and, if nothing of the answer
        went out yet, a 500 that says so. A dropped connection would read to the CLI as a
        network outage, retried for minutes with no word of the cause."""
        self.server.line(f"internal error: {_fault()}")
        if reader.conn.our_state is not h11.SEND_RESPONSE:
            return
        message = f"flowerbox gateway: {text('gateway.internal_error')}"
        data = json.dumps(_error("api_error", message)).encode()
        headers = [
            ("content-type", "application/json"),
            ("content-length", str(len(data))),
            ("connection", "close"),
        ]
        with contextlib.suppress(OSError, h11.LocalProtocolError):
            reader.send(h11.Response(status_code=500, headers=headers))
            reader.send(h11.Data(data=data))
            reader.send(h11.EndOfMessage())

    def _malformed(self, exc: BadRequest) -> None:
        """A request that cannot be read is answered 400 (413, 431) and the connection closed;
        written by hand, because the h11 state of a broken request has no response to give."""
        kind = "request_too_large" if exc.status == 413 else "invalid_request_error"
        message = f"flowerbox gateway: malformed HTTP request: {exc}"
        data = json.dumps(_error(kind, message)).encode()
        head = (
            f"HTTP/1.1 {exc.status} {HTTPStatus(exc.status).phrase}\r\n"
            "content-type: application/json\r\n"
            f"content-length: {len(data)}\r\nconnection: close\r\n\r\n"
        )
        with contextlib.suppress(OSError):
            self.request.sendall(head.encode() + data)
        self.server.line(f"- - {exc.status} refused: {exc}")
        self.server.malformed(
            status=exc.status, note=f"refused: {exc}", peer=peer_of(self.client_address)
        )


class _Exchange:
    """One request and its answer: routed, admitted, forwarded, relayed, settled."""

    def __init__(
        self,
        gateway: Gateway,
        reader: RequestReader,
        incoming: Incoming,
        body: bytes,
        tenant: Tenant,
    ) -> None:
        self.gateway = gateway
        self.reader = reader
        self.incoming = incoming
        self.body = body
        self.started = time.perf_counter()
        self.settled = False
        self.tenant = tenant
        self.account = self.tenant.account

    def run(self) -> None:
        method, target = self.incoming.method, self.incoming.target
        if (method, target) == HEALTH:
            self._health()
            return
        if self.tenant.refusal is not None:
            self._refuse(self.tenant.refusal)
            return
        if (method, target) not in ENDPOINTS:
            message = _endpoint_message(method, target)
            note = "refused: not an API endpoint the CLI uses"
            self._refuse(Refusal(403, "permission_error", message, note))
            return
        self.account.saw_client_credential(self._client_credential())
        try:
            request = request_object(self.body)
        except RequestRefused as exc:
            self._refuse(Refusal(exc.status, "invalid_request_error", str(exc), "refused: body"))
            return
        model = request.get("model") if isinstance(request.get("model"), str) else None
        found = inspect(request)
        if (fetching := self.tenant.fetch.refusal(found)) is not None:
            self._refuse(Refusal(403, "permission_error", fetching, "refused: API fetch"), model)
            return
        reservation = None
        if (method, target) == BUDGETED:
            worst, alone = self._worst_case(model, request, found)
            admitted = self.account.admit(worst, wait=self.gateway.admission_wait, alone=alone)
            if isinstance(admitted, str):
                self.account.refuse()
                self._refuse(Refusal(403, "permission_error", admitted, "refused: budget"), model)
                return
            reservation = admitted
        try:
            self._forward(model, reservation)
        finally:
            if reservation is not None and not self.settled:
                self.account.release(reservation)

    def _refuse(self, refusal: Refusal, model: str | None = None) -> None:
        """Recorded first, then answered: a refusal the client saw is never missing from the
        record (a broker killed in between loses nothing)."""
        self._done(refusal.status, model, refusal.note)
        self._answer(refusal.status, _error(refusal.kind, refusal.message))

    def _worst_case(
        self, model: str | None, request: dict[str, Any], found: Found
    ) -> tuple[float, bool]:
        """The most the request can bill, and whether it goes in only alone: max_tokens at
        the output price plus the input its body bounds (a token is at least one byte of
        text), or, when nothing bounds it (or the upstream once billed past a bound), a
        whole context window per sampling: docs/gateway.md, "The budget"."""
        max_tokens = request.get("max_tokens")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            max_tokens = DEFAULT_MAX_TOKENS
        bound = found.input_bound(len(self.body))
        alone = bound is None or self.account.overbilled()
        input_tokens = found.unbounded_input() if alone or bound is None else bound
        worst = self.account.worst_case(
            model, max_tokens=max_tokens, input_tokens=input_tokens, billing=Billing.of(request)
        )
        return worst, alone

    def _forward(self, model: str | None, reservation: Reservation | None) -> None:
        """Send the request upstream and relay its answer, the upstream connection shut the
        moment the client hangs up (the answer is then dropped there, not billed on). Not
        once the run's keeper is gone: its box is being killed, and nothing it asks from now
        on reaches the API (a 503 the CLI retries a few times at most, never billed)."""
        if self.tenant.lease is not None and self.tenant.lease.lost():
            message = f"flowerbox gateway: {text('gateway.keeper_gone')}"
            self._refuse(Refusal(503, "api_error", message, KEEPER_GONE_NOTE), model)
            return
        with HangUpWatch(self.reader.sock) as watch:
            self._exchange(model, reservation, watch)

    def _exchange(
        self, model: str | None, reservation: Reservation | None, watch: HangUpWatch
    ) -> None:
        gateway = self.gateway
        headers = [(n, v) for n, v in self.incoming.headers if n in FORWARDED_HEADERS]
        headers += gateway.credentials.headers()
        sent = time.perf_counter()
        try:
            conn, response = gateway.upstream.send(
                self.incoming.method, self.incoming.target, headers, self.body, watch=watch
            )
        except (OSError, http.client.HTTPException) as exc:
            if watch.hung_up:
                self._done(499, model, HUNG_UP_NOTE)
                raise OSError(HUNG_UP_NOTE) from None  # the connection is over: nobody to answer
            reason = str(exc) or type(exc).__name__
            said = text("gateway.unreachable", upstream=gateway.upstream.name, reason=reason)
            message = f"flowerbox gateway: {said}"
            self._refuse(Refusal(502, "api_error", message, "upstream unreachable"), model)
            return
        gateway.upstream_answered(time.perf_counter() - sent)
        reader = UsageReader(
            streaming="text/event-stream" in (response.getheader("content-type") or ""),
            model=model,
        )

        def settle() -> None:
            if not self.settled:
                reader.finish()
                self._settle(response.status, model, reader, reservation)

        complete = False
        try:
            complete = self._relay(response, reader, settle)
        finally:
            gateway.upstream.release(conn, response, reusable=complete)
            settle()

    def _settle(
        self,
        status: int,
        model: str | None,
        reader: UsageReader,
        reservation: Reservation | None,
    ) -> None:
        meter = self.account
        self.settled = True
        if reader.seen:
            usage = dict(reader.usage)
            usage["output_tokens"] = reader.output_tokens()
            model = reader.model or model or "unknown"
            tokens, cost = meter.add(model, usage, reservation=reservation)
            over = reservation is not None and past_reservation(cost, reservation)
            note = OVERBILLED_NOTE if over else ""
            self._done(status, model, note, tokens=tokens, cost=cost)
        elif reservation is not None and 200 <= status < 300:
            cost = meter.keep(reservation, model or "unknown")
            self._done(status, model, "no usage arrived: charged its worst case", cost=cost)
        else:
            if reservation is not None:
                meter.release(reservation)
            meter.count_unmetered()
            self._done(status, model)

    def _relay(
        self, response: http.client.HTTPResponse, reader: UsageReader, settle: Callable[[], None]
    ) -> bool:
        """Send the upstream's response on as it arrives: content-length framing when the
        upstream gave a length, chunked otherwise (h11 decides). A cut upstream cuts the
        client too (no final chunk), so the CLI sees a dropped stream, as it would without
        the gateway. True when the whole body passed. With `settle_before_end` the request
        is settled (and recorded) before the client has the end of the answer: the last
        bytes of a body of known length, or the last chunk of a stream."""
        headers = [
            (name, value)
            for name, value in response.getheaders()
            if name.lower() not in _HOP_BY_HOP
        ]
        length = response.getheader("content-length")
        if length is not None and not response.chunked:
            headers.append(("content-length", length))
        self.reader.send(h11.Response(status_code=response.status, headers=headers))
        sent, first = 0, self.gateway.settle_before_end
        known = int(length) if length is not None and not response.chunked else None
        try:
            for chunk in _chunks(response):
                reader.feed(chunk)
                sent += len(chunk)
                if first and sent == known:
                    settle()
                self.reader.send(h11.Data(data=chunk))
        except (OSError, http.client.HTTPException, h11.LocalProtocolError):
            return False  # either side went away mid-body (or sent more than it said)
        if known is not None and sent != known:
            return False
        if first:
            settle()
        self.reader.send(h11.EndOfMessage())
        return True

    def _health(self) -> None:
        ok, reason = self.gateway.upstream.reachable()
        body: dict[str, str] = {"upstream": "reachable" if ok else "unreachable"}
        if not ok:
            body |= {"url": self.gateway.upstream.name, "error": reason}
        self._answer(200 if ok else 503, body)

    def _client_credential(self) -> str:
        """What kind of key the client sent: none, or as the gateway names it."""
        sent = client_keys(self.incoming)
        return self.gateway.credential_kind(sent) if sent else "none"

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        data = self.gateway.scrub(json.dumps(payload)).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(data)))]
        if self.reader.conn.their_state is not h11.DONE:  # its body unread: it closes
            headers.append(("connection", "close"))
        self.reader.send(h11.Response(status_code=status, headers=headers))
        if self.incoming.method != "HEAD":
            self.reader.send(h11.Data(data=data))
        self.reader.send(h11.EndOfMessage())

    def _done(
        self,
        status: int,
        model: str | None = None,
        note: str = "",
        *,
        tokens: dict[str, int] | None = None,
        cost: float | None = None,
    ) -> None:
        """The request's line on stderr and in the requests file."""
        ms = round((time.perf_counter() - self.started) * 1000)
        target, model = _shown(self.incoming.target), _shown(model or "-", MODEL_SHOWN)
        counted = " ".join(f"{k.removesuffix('_tokens')}={v}" for k, v in (tokens or {}).items())
        spent = "" if cost is None else f"${cost:.4f}"
        fields = [self.incoming.method, target, str(status), model, counted, note, spent]
        self.gateway.line(" ".join(f for f in [*fields, f"{ms}ms"] if f))
        self.gateway.record(
            self.tenant,
            method=self.incoming.method,
            path=target,
            status=status,
            model=model,
            tokens=tokens or {},
            cost_usd=None if cost is None else round(cost, 6),
            ms=ms,
            note=note,
        )


def client_keys(incoming: Incoming) -> set[str]:
    """The keys a request carries: its x-api-key and its bearer token, the empty ones left out."""
    bearer = (incoming.header("authorization") or "").removeprefix("Bearer ").strip()
    return {incoming.header("x-api-key") or "", bearer} - {""}


def _chunks(response: http.client.HTTPResponse) -> Iterator[bytes]:
    """The body as the upstream sends it: read1 returns whatever has arrived, never waits
    for a full buffer, so an event is passed on the moment it comes in."""
    while chunk := response.read1(CHUNK):
        yield chunk


def _fault() -> str:
    """The exception being handled, on one line: what it is, and its innermost frames."""
    kind, exc, trace = sys.exc_info()
    frames = traceback.extract_tb(trace)[-3:]
    where = " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames))
    return f"{getattr(kind, '__name__', kind)}: {exc} (at {where})"


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _shown(text: str, limit: int = 200) -> str:
    """A request target (or model) for a message or a log line: what the client sent, cut
    short."""
    return text if len(text) <= limit else text[:limit] + "..."


def _endpoint_message(method: str, target: str) -> str:
    allowed = text("gateway.endpoints_and").join(f"{m} {t}" for m, t in sorted(ENDPOINTS))
    said = text("gateway.not_endpoint", method=method, target=_shown(target), allowed=allowed)
    return f"flowerbox gateway: {said}"


@contextlib.contextmanager
def stop_signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT wait, blocked, and come once the block ends. A stop signal that
    came once the socket existed but before its handler was set killed the process without
    removing the socket (exit -15: a busy machine's test saw it)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flowerbox.sidecar.gateway",
        description="Forward the CLI's API calls from a unix socket to the real API, with the key.",
    )
    parser.add_argument("--socket", type=Path, required=True, help="unix socket to listen on")
    parser.add_argument("--credentials", type=Path, required=True, help=".env with the key")
    parser.add_argument("--usage", type=Path, required=True, help="usage JSON, rewritten live")
    parser.add_argument("--requests", type=Path, help="JSON lines, one per request")
    parser.add_argument("--budget", type=float, help="USD; model requests are refused after it")
    parser.add_argument("--prices", type=Path, help="JSON prices laid over the shipped table")
    parser.add_argument(
        "--lease", type=Path, help="socket whose holder keeps the run (flowerbox.sidecar.lease)"
    )
    egress = parser.add_argument_group("egress proxy (docs/egress.md)")
    egress.add_argument("--proxy-socket", type=Path, help="serve the egress proxy here too")
    egress.add_argument("--egress-log", type=Path, help="JSON lines, one per proxy decision")
    egress.add_argument(
        "--allow", action="append", default=[], metavar="DOMAIN", help="repeatable, or a,b"
    )
    egress.add_argument("--allow-preset", action="append", default=[], metavar="NAME")
    parser.add_argument(
        "--allow-api-fetch",
        nargs="?",
        const="yes",
        default="no",
        choices=["yes", "no", ""],  # "" (compose's unset variable): no
        help="let request bodies make the API fetch or call out (docs/gateway.md)",
    )
    args = parser.parse_args(argv)
    if args.budget is not None and args.budget <= 0:
        parser.error(f"--budget must be a positive number of dollars, got {args.budget}")
    try:
        credentials = load_credentials(args.credentials)
        prices = load_prices(args.prices) if args.prices else PriceTable()
        policy = Policy.parse(args.allow, args.allow_preset)
        egress_log = _egress_log(args.egress_log) if args.proxy_socket else None
        requests = _json_lines(args.requests, text("gateway.requests_log"))
    except FlowerboxError as exc:  # this process's own entry: its one place for them
        print(f"flowerbox-gateway: {exc}", file=sys.stderr)
        return 2
    meter = Meter(args.usage, prices, budget=args.budget)
    with stop_signals_held():  # from before the first bind until their handler is set
        try:  # bound before the API socket: whoever waits for api.sock can take the lease at once
            lease = Lease.listen(args.lease) if args.lease else None
        except OSError as exc:
            said = text("gateway.lease_unbound", path=args.lease, problem=exc)
            print(f"flowerbox-gateway: {said}", file=sys.stderr)
            return 2
        servers: list[PrivateUnixServer] = []
        if args.proxy_socket and egress_log is not None:
            # Bound before the API socket: whoever waits for api.sock finds the proxy up too.
            servers.append(EgressProxy(args.proxy_socket, policy=policy, log=egress_log))
        # Under --net open (no proxy) there is no allowlist: URL sources need --allow-api-fetch.
        fetch = FetchRule(args.allow_api_fetch == "yes", policy if args.proxy_socket else None)
        gateway = Gateway(
            args.socket,
            credentials=credentials,
            meter=meter,
            requests=requests,
            fetch=fetch,
            lease=lease,
        )
        servers.append(gateway)

        def stop(signum: int, frame: object) -> None:
            # shutdown() waits for serve_forever to return, so it cannot run on this thread.
            threading.Thread(target=gateway.shutdown, daemon=True).start()

        for signum in STOP_SIGNALS:
            signal.signal(signum, stop)
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
        requests.close()
    gateway.line("stopped")
    return 0


def _egress_log(path: Path | None) -> JsonLines:
    if path is None:
        raise GatewayError(text("gateway.egress_log_needed"))
    return _json_lines(path, text("gateway.egress_log"))


def _json_lines(path: Path | None, name: str) -> JsonLines:
    """A JSON lines file opened for appending (None: no file)."""
    try:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        return JsonLines(path)
    except OSError as exc:
        raise GatewayError(text("gateway.log_unopened", name=name, path=path, problem=exc)) from exc


if __name__ == "__main__":
    sys.exit(main())
