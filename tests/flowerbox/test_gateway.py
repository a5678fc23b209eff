"""The gateway as a real process between a client on its unix socket and a FakeAPI upstream
that accepts only the real key: credential swap, streaming, metering, budget, health, errors.
Ends with the real Claude Code CLI going through relay -> gateway -> FakeAPI."""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import stat
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trustme

from flower.testing import FakeAPI, Usage, drop, sequence, text, tool
from flowerbox.errors import PriceError
from flowerbox.sidecar.pricing import PriceTable, load_prices
from tests.driver import drive
from tests.flowerbox.conftest import PLACEHOLDER, REAL_KEY, GatewayProcess, spawn_gateway

Start = Callable[..., GatewayProcess]
TLSUpstream = tuple[ssl.SSLContext, Path]
MESSAGES = "/v1/messages?beta=true"


@pytest.fixture
def tls_upstream(tmp_path: Path) -> TLSUpstream:
    """A server context for 127.0.0.1 signed by a throwaway CA, and that CA's bundle file."""
    authority = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    bundle = tmp_path / "test-ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    return context, bundle


def ask(model: str = "claude-opus-5-5", *, stream: bool = False) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 100,
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    }


def events(body: bytes) -> list[str]:
    return [
        line.removeprefix("event: ")
        for line in body.decode().splitlines()
        if line.startswith("event: ")
    ]


# --- the price table ------------------------------------------------------------------------


def test_prices_match_whole_ids_with_their_decorations() -> None:
    table = PriceTable()
    for name in (
        "claude-opus-4-1-20250805",
        "us.anthropic.claude-opus-4-1-v1:0",
        "claude-opus-4-1@20250805",
    ):
        price, known = table.lookup(name)
        assert known and price.input == 15, name
    assert table.lookup("claude-opus-5-5[1m]")[0].output == 20
    assert table.lookup("claude-sonnet-4-5-20250929")[0].input == 3
    unknown, known = table.lookup("claude-opus-5-7")  # not a prefix match on claude-opus-5
    assert not known and unknown.output == 75  # the most expensive entry


def test_cost_counts_every_token_kind_and_the_long_prompt_tier() -> None:
    opus = PriceTable().lookup("claude-opus-5-5")[0]
    usage = {
        "input_tokens": 1_000_000,
        "output_tokens": 1_000_000,
        "cache_read_input_tokens": 1_000_000,
        "cache_creation_input_tokens": 2_000_000,
        "cache_creation": {"ephemeral_1h_input_tokens": 1_000_000},
    }
    assert opus.cost(usage) == pytest.approx(4 + 20 + 0.2 + 5 + 8)
    haiku = PriceTable().lookup("claude-haiku-5-5")[0]
    assert haiku.cost({"input_tokens": 100_000}) == pytest.approx(0.01)
    assert haiku.cost({"input_tokens": 100_001}) == pytest.approx(100_001 * 0.5 / 1e6)


def test_a_prices_file_overrides_and_sets_the_unknown_price(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps({"claude-opus-5-5": {"input": 1, "output": 2}, "*": {"input": 9, "output": 9}})
    )
    table = load_prices(path)
    price, _ = table.lookup("claude-opus-5-5")
    assert (price.input, price.output, price.cache_read, price.cache_write_5m) == (1, 2, 0.1, 1.25)
    assert table.lookup("claude-sonnet-5")[0].input == 2  # shipped entries stay
    assert table.lookup("mystery")[0].input == 9
    path.write_text(json.dumps({"claude-x": {"input": "cheap"}}))
    with pytest.raises(PriceError, match="'claude-x' 的 'input' 必须是 >= 0 的数"):
        load_prices(path)


# --- credentials ------------------------------------------------------------------------------


def test_the_real_key_replaces_the_placeholder_and_is_never_shown(
    upstream: FakeAPI, start_gateway: Start
) -> None:
    upstream.script = sequence(text("hello"))
    gateway = start_gateway(upstream.url)
    status, _, body = gateway.request("POST", MESSAGES, ask())
    assert status == 200, body
    assert json.loads(body)["content"][0]["text"] == "hello"
    assert upstream.saw_key(REAL_KEY)
    assert not upstream.saw_key(PLACEHOLDER)
    gateway.settled(1)
    pid = gateway.process.pid
    exposed = [
        gateway.log(),
        gateway.usage_path.read_text(),
        Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"),
        Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace"),
    ]
    assert not any(REAL_KEY in text for text in exposed)
    assert "POST /v1/messages?beta=true 200 claude-opus-5-5" in gateway.log()


def test_the_usage_file_counts_the_kind_of_key_each_request_carried(
    upstream: FakeAPI, start_gateway: Start
) -> None:
    upstream.script = sequence(text("one"), text("two"), text("three"))
    gateway = start_gateway(upstream.url)
    leaked = "sk-ant-leaked-into-the-box"
    for key in (PLACEHOLDER, leaked, ""):
        status, _, body = gateway.request("POST", MESSAGES, ask(), **{"x-api-key": key})
        assert status == 200, body
    gateway.settled(3)
    assert gateway.usage()["client_credentials"] == {"none": 1, "other": 1, "placeholder": 1}
    assert leaked not in gateway.usage_path.read_text() + gateway.log()


def test_a_tls_upstream_is_verified_and_gets_the_real_key(
    start_gateway: Start, tls_upstream: TLSUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    context, bundle = tls_upstream
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))  # the gateway trusts the test's CA
    with FakeAPI(sequence(text("over tls")), api_key=REAL_KEY, tls=context) as api:
        assert api.url.startswith("https://127.0.0.1:")
        gateway = start_gateway(api.url)
        status, _, body = gateway.request("POST", MESSAGES, ask())
        assert status == 200, body
        assert json.loads(body)["content"][0]["text"] == "over tls"
        assert api.saw_key(REAL_KEY) and not api.saw_key(PLACEHOLDER)
        assert gateway.request("GET", "/health")[0] == 200


def test_an_untrusted_tls_upstream_is_a_502_and_never_sees_the_request(
    start_gateway: Start, tls_upstream: TLSUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    context, _ = tls_upstream
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # the system CAs do not know this one
    with FakeAPI(sequence(text("never")), api_key=REAL_KEY, tls=context) as api:
        gateway = start_gateway(api.url)
        status, _, body = gateway.request("POST", MESSAGES, ask())
        assert status == 502
        assert "CERTIFICATE_VERIFY_FAILED" in json.loads(body)["error"]["message"]
        assert api.requests == []


def test_a_bearer_token_is_forwarded_as_authorization(
    start_gateway: Start,
) -> None:
    with FakeAPI(sequence(text("ok")), api_key="tok-real-bearer") as api:
        gateway = start_gateway(api.url, credentials="ANTHROPIC_AUTH_TOKEN=tok-real-bearer\n")
        status, _, _ = gateway.request(
            "POST", MESSAGES, ask(), authorization=f"Bearer {PLACEHOLDER}"
        )
        assert status == 200
        assert api.saw_key("tok-real-bearer")
        assert "x-api-key" not in api.requests[0].headers
        assert "tok-real-bearer" not in gateway.settled(1).log()


def test_a_file_without_credentials_stops_the_gateway(
    upstream: FakeAPI, start_gateway: Start
) -> None:
    gateway = start_gateway(upstream.url, credentials="ANTHROPIC_MODEL=claude-opus-5-5\n")
    assert gateway.process.wait(timeout=10) == 2
    assert "neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN" in gateway.log()


# --- streaming and metering -------------------------------------------------------------------


def test_a_stream_passes_chunked_and_complete_and_is_metered(
    upstream: FakeAPI, start_gateway: Start
) -> None:
    usage = Usage(
        input_tokens=1000,
        output_tokens=500,
        cache_read_input_tokens=2000,
        cache_creation_input_tokens=300,
    )
    upstream.script = sequence(text("streamed", usage=usage))
    gateway = start_gateway(upstream.url)
    status, headers, body = gateway.request("POST", MESSAGES, ask(stream=True))
    assert status == 200
    assert headers["transfer-encoding"] == "chunked"
    assert headers["content-type"] == "text/event-stream"
    assert events(body)[0] == "message_start" and events(body)[-1] == "message_stop"
    entry = gateway.settled(1).usage()["models"]["claude-opus-5-5"]
    assert entry["input_tokens"] == 1000 and entry["output_tokens"] == 500
    assert entry["cache_read_input_tokens"] == 2000
    assert entry["cache_creation_input_tokens"] == 300
    expected = (1000 * 4 + 500 * 20 + 2000 * 0.2 + 300 * 5) / 1e6
    assert entry["cost_usd"] == pytest.approx(expected)
    assert gateway.usage()["total_cost_usd"] == pytest.approx(expected)


def test_json_replies_are_metered_per_model_and_unknown_models_say_so(
    upstream: FakeAPI, start_gateway: Start
) -> None:
    upstream.script = sequence(*(text("x", usage=Usage(1_000_000, 0)) for _ in range(3)))
    gateway = start_gateway(upstream.url)
    for model in ("claude-sonnet-4-5", "claude-sonnet-4-5", "claude-nova-9"):
        assert gateway.request("POST", MESSAGES, ask(model))[0] == 200
    usage = gateway.settled(3).usage()
    assert usage["requests"] == 3
    assert usage["models"]["claude-sonnet-4-5"]["requests"] == 2
    assert usage["models"]["claude-sonnet-4-5"]["cost_usd"] == pytest.approx(6.0)
    assert usage["models"]["claude-nova-9"]["priced_as"].startswith("unknown model")
    assert usage["models"]["claude-nova-9"]["cost_usd"] == pytest.approx(15.0)
    assert usage["total_cost_usd"] == pytest.approx(21.0)


def test_each_request_is_a_json_line_in_the_requests_log(
    upstream: FakeAPI, start_gateway: Start, tmp_path: Path
) -> None:
    """What went only to stderr (and died with the container) is kept as data too."""
    upstream.script = sequence(*(text("x", usage=Usage(1_000, 20)) for _ in range(2)))
    log = tmp_path / "requests.jsonl"
    gateway = start_gateway(upstream.url, args=("--requests", str(log)))
    assert gateway.request("POST", MESSAGES, ask("claude-sonnet-4-5"))[0] == 200
    odd = "\x1b]0;pwned\x07" + "m" * 500  # the model is the client's to name
    assert gateway.request("POST", MESSAGES, ask(odd))[0] == 200
    assert gateway.request("GET", "/v1/models")[0] == 403
    gateway.settled(3)  # each line is written once the client has its answer: in any order
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    first, second, refused = sorted(lines, key=lambda line: (line["status"], len(line["model"])))
    assert first["method"] == "POST" and first["path"] == MESSAGES and first["status"] == 200
    assert first["model"] == "claude-sonnet-4-5" and first["ms"] >= 0 and first["time"]
    assert first["tokens"]["input_tokens"] == 1_000 and first["tokens"]["output_tokens"] == 20
    assert first["cost_usd"] == pytest.approx(0.0033)
    assert second["model"] == "m" * 90 + "..."  # cut at 100 as sent, its title sequence gone
    assert refused["status"] == 403 and refused["note"].startswith("refused")
    assert refused["cost_usd"] is None and REAL_KEY not in log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_one_connection_carries_several_requests(upstream: FakeAPI, start_gateway: Start) -> None:
    upstream.script = sequence(text("one"), text("two"), text("three"))
    gateway = start_gateway(upstream.url)
    conn = gateway.connect()
    try:
        for stream in (True, False, True):
            conn.request("POST", MESSAGES, body=json.dumps(ask(stream=stream)))
            response = conn.getresponse()
            assert response.status == 200
            response.read()
    finally:
        conn.close()
    assert len(upstream.requests) == 3


def test_a_cut_upstream_stream_ends_where_the_upstream_ended(
    upstream: FakeAPI, start_gateway: Start
) -> None:
    # FakeAPI's stream has no length and no chunks, so its cut is an EOF: the client gets
    # the same events and no message_stop, which the CLI treats as a cut stream. (A chunked
    # upstream that dies mid-body makes the gateway drop the client without a final chunk.)
    upstream.script = sequence(text("unfinished", usage=Usage(10, 5), fault=drop(after_blocks=1)))
    gateway = start_gateway(upstream.url)
    status, _, body = gateway.request("POST", MESSAGES, ask(stream=True))
    assert status == 200
    assert events(body) == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    ]
    # What arrived before the cut (message_start) is still counted, and the text that got
    # through at a token a byte (its final usage never came): "unfinished", 10 tokens.
    entry = gateway.settled(1).usage()["models"]["claude-opus-5-5"]
    assert (entry["input_tokens"], entry["output_tokens"]) == (10, len("unfinished"))


class _SlowStream(BaseHTTPRequestHandler):
    """A chunked event stream: message_start, then (after the test's go) the rest; or, when
    `cut`, the connection closed right after message_start without the final chunk."""

    protocol_version = "HTTP/1.1"
    go: threading.Event
    cut: bool

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        start = {
            "type": "message_start",
            "message": {"model": "claude-haiku-4-5", "usage": {"input_tokens": 7}},
        }
        self._event("message_start", start)
        if self.cut:
            self.close_connection = True
            return
        self.go.wait(timeout=5)
        delta = {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 3}}
        self._event("message_delta", delta)
        self._event("message_stop", {"type": "message_stop"})
        self.wfile.write(b"0\r\n\r\n")

    def _event(self, name: str, data: dict[str, Any]) -> None:
        event = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.flush()


@pytest.fixture
def slow_upstream() -> Iterator[Callable[..., tuple[str, threading.Event]]]:
    """Start a _SlowStream server; returns its URL and the go event."""
    servers: list[tuple[ThreadingHTTPServer, threading.Thread, threading.Event]] = []

    def start(*, cut: bool = False) -> tuple[str, threading.Event]:
        go = threading.Event()
        handler = type("Handler", (_SlowStream,), {"go": go, "cut": cut})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        servers.append((server, thread, go))
        return f"http://127.0.0.1:{server.server_address[1]}", go

    try:
        yield start
    finally:
        for server, thread, go in servers:
            go.set()
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)


def test_the_first_event_arrives_before_the_second_is_sent(
    slow_upstream: Callable[..., tuple[str, threading.Event]], start_gateway: Start
) -> None:
    url, go = slow_upstream()
    gateway = start_gateway(url)
    conn = gateway.connect(timeout=4)
    try:
        conn.request("POST", MESSAGES, body=json.dumps(ask(stream=True)))
        response = conn.getresponse()
        first = response.read1(65536)
        assert b"event: message_start" in first
        assert not go.is_set()  # the upstream is still holding the second event back
        go.set()
        rest = response.read()
    finally:
        conn.close()
    assert events(first + rest) == ["message_start", "message_delta", "message_stop"]
    entry = gateway.settled(1).usage()["models"]["claude-haiku-4-5"]
    assert (entry["input_tokens"], entry["output_tokens"]) == (7, 3)


def test_a_chunked_upstream_cut_mid_body_cuts_the_client(
    slow_upstream: Callable[..., tuple[str, threading.Event]], start_gateway: Start
) -> None:
    url, _ = slow_upstream(cut=True)
    gateway = start_gateway(url)
    conn = gateway.connect()
    try:
        conn.request("POST", MESSAGES, body=json.dumps(ask(stream=True)))
        response = conn.getresponse()
        with pytest.raises(http.client.IncompleteRead):
            response.read()
    finally:
        conn.close()
    assert gateway.settled(1).usage()["models"]["claude-haiku-4-5"]["input_tokens"] == 7


# --- budget -------------------------------------------------------------------------------


def test_a_spent_budget_refuses_with_a_403_that_names_it(
    upstream: FakeAPI, start_gateway: Start
) -> None:
    # 10k input tokens of claude-opus-5-5 cost $0.04, more than the whole budget.
    upstream.script = sequence(text("first", usage=Usage(10_000, 0)), text("second"))
    gateway = start_gateway(upstream.url, args=("--budget", "0.01"))
    assert gateway.request("POST", MESSAGES, ask(stream=True))[0] == 200
    gateway.settled(1)
    status, _, body = gateway.request("POST", MESSAGES, ask(stream=True))
    assert status == 403
    error = json.loads(body)["error"]
    assert error["type"] == "permission_error"
    assert error["message"] == (
        "flowerbox gateway: the run's budget of $0.01 is spent ($0.04 used); raise it with --budget"
    )
    assert len(upstream.messages_requests()) == 1
    # count_tokens is free and still passes.
    assert gateway.request("POST", "/v1/messages/count_tokens?beta=true", ask())[0] == 200
    usage = gateway.settled(3).usage()
    assert (usage["refused"], usage["budget_usd"], usage["requests"]) == (1, 0.01, 2)


# --- health and upstream errors ---------------------------------------------------------------


def test_health_reports_whether_the_upstream_is_reachable(
    upstream: FakeAPI, start_gateway: Start
) -> None:
    gateway = start_gateway(upstream.url)
    status, _, body = gateway.request("GET", "/health", x_api_key="")
    assert (status, json.loads(body)) == (200, {"upstream": "reachable"})
    upstream.stop()
    status, _, body = gateway.request("GET", "/health")
    assert status == 503 and json.loads(body)["upstream"] == "unreachable"
    assert upstream.requests == []  # the probe is never forwarded


def test_an_unreachable_upstream_is_a_502_that_names_it(
    upstream: FakeAPI, start_gateway: Start
) -> None:
    gateway = start_gateway(upstream.url)
    upstream.stop()
    status, _, body = gateway.request("POST", MESSAGES, ask())
    assert status == 502
    error = json.loads(body)["error"]
    assert error["type"] == "api_error"
    assert f"cannot reach {upstream.url}" in error["message"]


def test_paths_outside_the_allowlist_are_refused_in_the_error_shape_the_cli_shows(
    upstream: FakeAPI, start_gateway: Start
) -> None:
    gateway = start_gateway(upstream.url)
    status, _, body = gateway.request("GET", "/admin")
    assert status == 403 and upstream.requests == []
    assert json.loads(body) == {
        "type": "error",
        "error": {
            "type": "permission_error",
            "message": "flowerbox gateway: GET /admin is not an API endpoint the Claude Code CLI"
            " uses; it forwards only POST /v1/messages/count_tokens?beta=true and"
            " POST /v1/messages?beta=true (docs/gateway.md)",
        },
    }


# --- the process ------------------------------------------------------------------------------


def test_the_socket_is_private_and_sigterm_removes_it(
    upstream: FakeAPI, start_gateway: Start
) -> None:
    gateway = start_gateway(upstream.url)
    assert stat.S_IMODE(os.stat(gateway.socket).st_mode) == 0o600
    assert gateway.stop() == 0
    assert not gateway.socket.exists()


def test_a_sigterm_that_comes_while_it_starts_is_taken_once_it_can_be(
    upstream: FakeAPI, sockdir: Path, tmp_path: Path
) -> None:
    """A SIGTERM sent the moment the socket exists, before the handler was set, killed the
    gateway with its socket left behind (exit -15 in a busy `make check`). Here the signal
    is pending from the start (sent while blocked, as the gateway now holds it until its
    handler is set): the gateway still starts, then stops as a SIGTERM asks."""
    creds = tmp_path / "creds.env"
    creds.touch(mode=0o600)
    creds.write_text(f"ANTHROPIC_API_KEY={REAL_KEY}\nANTHROPIC_BASE_URL={upstream.url}\n")
    sock, log = sockdir / "api.sock", tmp_path / "g.log"
    process = spawn_gateway(
        sock,
        creds,
        tmp_path / "usage.json",
        log,
        preexec=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}),
    )
    try:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert "listening on" in log.read_text() and not sock.exists()


# --- end to end: the real CLI through relay and gateway --------------------------------------


@pytest.mark.anyio
async def test_the_cli_runs_a_tool_through_relay_and_gateway(
    upstream: FakeAPI,
    start_gateway: Start,
    start_relay: Callable[..., Any],
    claude_home: Path,
    workspace: Path,
) -> None:
    target = workspace / "boxed.txt"
    upstream.script = sequence(
        tool("Write", {"file_path": str(target), "content": "from the box\n"}), text("done")
    )
    gateway = start_gateway(upstream.url)
    relay = start_relay(gateway.socket)
    env = upstream.env(home=claude_home)
    env |= {
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{relay.ports[0]}",
        "ANTHROPIC_API_KEY": PLACEHOLDER,
    }
    out = await drive("write it", cwd=workspace, env=env, permission_mode="acceptEdits")
    assert out.error is None, out.texts
    assert target.read_text() == "from the box\n"
    assert len(upstream.messages_requests()) == 2
    assert upstream.saw_key(REAL_KEY) and not upstream.saw_key(PLACEHOLDER)
    assert gateway.settled(2).usage()["requests"] == 2
    assert REAL_KEY not in gateway.log()
