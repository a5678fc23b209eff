"""Attacks on the API wall (issue 37, A1/A2), as a hostile agent in the box would send them to
a real gateway process: bodies that try to make the API reach a URL without
`--allow-api-fetch`, judged by what the stand-in upstream on loopback received; and requests
that try to take the budget past itself, judged by the usage file. What got through on main
is refused here; what held is kept as a regression (docs/decisions.md, "Attacks on the API
wall")."""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import socket
import threading
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from flower.testing import FakeAPI
from flowerbox.sidecar.reach import CONTEXT_WINDOW, inspect
from tests.flowerbox.conftest import PLACEHOLDER, REAL_KEY, GatewayProcess
from tests.flowerbox.test_api_fetch import MESSAGES, api, asking, post, url_source

__all__ = ["api"]  # the stand-in upstream fixture, shared with test_api_fetch

Start = Callable[..., GatewayProcess]
StandIn = Callable[[type[BaseHTTPRequestHandler]], str]
EVIL = "https://evil.test/leak?d=secret"


# --- got through on main: forwarded with the real key ------------------------------------

GOT_THROUGH = {
    # Python keeps a lone surrogate; a parser that drops it reads "url".
    "a lone surrogate in a source type": (
        json.dumps(asking(url_source("document", EVIL)))
        .replace('"url"', '"ur\\ud800l"', 1)
        .encode(),
        "lone surrogate",
    ),
    # Not JSON: a lenient parser reads it, a strict one refuses; the gateway guesses neither.
    "NaN": (b'{"model": "claude-sonnet-4-5", "max_tokens": NaN, "messages": []}', "NaN"),
    # A source type the gateway did not know passed: "URL", "url ", a string, a new kind.
    **{
        f"an image source {source!r}": (
            json.dumps(asking({"type": "image", "source": source})).encode(),
            "image source of a kind it does not know",
        )
        for source in (
            {"type": "URL", "url": EVIL},
            {"type": "url ", "url": EVIL},
            EVIL,
            {"type": "remote", "href": EVIL},
        )
    },
    # A file_id was looked for only in blocks without a source.
    "a file_id beside a source": (
        json.dumps(
            asking({"type": "container_upload", "file_id": "file_011", "source": {"type": "text"}})
        ).encode(),
        "container_upload of a file_id",
    ),
    "a block of type file": (
        json.dumps(asking({"type": "file", "file_id": "file_011"})).encode(),
        "file of a file_id",
    ),
    # tools as one object (or a list in a list): iterated as keys, no server tool seen.
    "tools as an object": (
        json.dumps(asking(tools={"type": "web_fetch_20250910", "name": "web_fetch"})).encode(),
        "tools that are not a list of objects",
    ),
    "tools in a list in a list": (
        json.dumps(asking(tools=[[{"type": "web_fetch_20250910", "name": "web_fetch"}]])).encode(),
        "tools that are not a list of objects",
    ),
    # A turn the API would continue with its own call: only a server tool makes one.
    "a server_tool_use block": (
        json.dumps(
            {
                "model": "claude-sonnet-4-5",
                "max_tokens": 10,
                "messages": [
                    {"role": "user", "content": "go on"},
                    {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "server_tool_use",
                                "id": "srvtoolu_1",
                                "name": "web_fetch",
                                "input": {"url": EVIL},
                            }
                        ],
                    },
                ],
            }
        ).encode(),
        "a server_tool_use block",
    ),
}


@pytest.mark.parametrize("name", sorted(GOT_THROUGH))
def test_what_got_through_is_refused_and_never_forwarded(
    name: str, api: FakeAPI, start_gateway: Start
) -> None:
    body, why = GOT_THROUGH[name]
    gateway = start_gateway(api.url)
    status, message = post(gateway, body)
    assert status in (400, 403) and why in message, (status, message)
    assert api.requests == []


def test_a_url_source_in_a_client_tools_arguments_is_text_and_passes(
    api: FakeAPI, start_gateway: Start
) -> None:
    """The model may call a client tool with an API-shaped argument; the API never fetches
    it, and refusing it ended the run (a tool_result with the same shape is refused:
    test_api_fetch.py)."""
    blocks = [url_source("image", EVIL), {"type": "image", "source": EVIL}]
    call = {"type": "tool_use", "id": "toolu_1", "name": "attach", "input": {"blocks": blocks}}
    body = asking()
    body["messages"] += [
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
    ]
    gateway = start_gateway(api.url)
    assert post(gateway, json.dumps(body).encode())[0] == 200
    assert len(api.requests) == 1


# --- the budget against what the API bills ----------------------------------------------


def test_an_unbounded_request_that_compacts_is_reserved_for_both_samplings() -> None:
    """A fetched document with a compaction edit: the API reads the context to compact it,
    then again to answer. Main reserved one window for both, so the request that goes in
    alone could bill twice its worst case."""
    compacting = {"context_management": {"edits": [{"type": "compact_20260112"}]}}
    found = inspect(asking(url_source("document", EVIL), **compacting))
    assert found.input_bound(200) is None
    assert found.unbounded_input() == 2 * CONTEXT_WINDOW  # main: 1,000,000


OPUS_46 = "claude-opus-4-6"  # $5 per million input tokens, $25 output
BILLED_IN, BILLED_OUT = 50_000, 1_000  # what the stand-in bills a 100 KB question


class _Billing(BaseHTTPRequestHandler):
    """A stand-in API that bills as the real one does: fast mode (`speed: "fast"`) and
    US-only inference (`inference_geo: "us"`) when the request asks for them, reported in
    the usage under the same names."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        asked = json.loads(self.rfile.read(int(self.headers["content-length"])))
        usage = {
            "input_tokens": BILLED_IN,
            "output_tokens": BILLED_OUT,
            "speed": asked.get("speed", "standard"),
            "inference_geo": asked.get("inference_geo", "global"),
        }
        if "context_management" in asked:  # compacted first: a sampling of its own
            compaction = {"type": "compaction", "input_tokens": 150_000, "output_tokens": 5_000}
            usage["iterations"] = [compaction, {"type": "message", **usage}]
        message = {"type": "message", "model": OPUS_46, "content": [], "usage": usage}
        data = json.dumps(message).encode()
        self.send_response(200 if self.headers["x-api-key"] == REAL_KEY else 401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def stand_in() -> Iterator[Callable[[type[BaseHTTPRequestHandler]], str]]:
    """Start a stand-in API on loopback with the given handler; returns its URL."""
    servers: list[tuple[ThreadingHTTPServer, threading.Thread]] = []

    def start(handler: type[BaseHTTPRequestHandler]) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.server_address[1]}"

    try:
        yield start
    finally:
        for server, thread in servers:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)


@pytest.mark.parametrize(
    ("asked", "real_bill"),
    [
        # fast mode bills $30/$150 per million: 6x the $0.275 main metered
        ({"speed": "fast"}, (BILLED_IN * 30 + BILLED_OUT * 150) / 1e6),
        ({"inference_geo": "us"}, (BILLED_IN * 5 + BILLED_OUT * 25) / 1e6 * 1.1),
        # server-side compaction: its sampling is in usage.iterations, not the top level
        (
            {"context_management": {"edits": [{"type": "compact_20260112"}]}},
            ((150_000 + BILLED_IN) * 5 + (5_000 + BILLED_OUT) * 25) / 1e6,
        ),
    ],
)
def test_fast_mode_us_only_inference_and_compaction_are_metered_as_billed(
    asked: dict[str, Any], real_bill: float, stand_in: StandIn, start_gateway: Start
) -> None:
    """Main priced every response at the model's standard prices and its top-level counts:
    20 fast questions billed $33.00 against a $20 budget, metered $5.50; 20 compacting ones
    billed $23.00, metered $5.50."""
    budget = 20.0
    gateway = start_gateway(stand_in(_Billing), args=("--budget", str(budget)))
    question = {"model": OPUS_46, "max_tokens": BILLED_OUT, **asked}
    question["messages"] = [{"role": "user", "content": "x" * 100_000}]
    statuses = [post(gateway, json.dumps(question).encode())[0] for _ in range(20)]
    answered = statuses.count(200)
    total = float(gateway.settled(20).usage()["total_cost_usd"])
    assert answered >= 1 and statuses.count(403) == 20 - answered
    assert total == pytest.approx(answered * real_bill)
    assert total <= budget


DELTAS, DELTA_TEXT, DELTA_TOKENS = 50, "word " * 80, 100  # 400 bytes, billed 100 tokens


class _LongStream(BaseHTTPRequestHandler):
    """A stream of DELTAS text deltas, then (after the test's go) one more and the final
    usage: what the API bills for all of it."""

    protocol_version = "HTTP/1.1"
    go: threading.Event

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        start = {"model": OPUS_46, "usage": {"input_tokens": 10, "output_tokens": 1}}
        self._event("message_start", {"type": "message_start", "message": start})
        delta = {"type": "content_block_delta", "index": 0}
        delta["delta"] = {"type": "text_delta", "text": DELTA_TEXT}
        for _ in range(DELTAS):
            self._event("content_block_delta", delta)
        self.go.wait(timeout=10)
        with contextlib.suppress(OSError):  # the gateway hung up: the bill stands anyway
            self._event("content_block_delta", delta)
            usage = {"output_tokens": (DELTAS + 1) * DELTA_TOKENS}
            self._event("message_delta", {"type": "message_delta", "delta": {}, "usage": usage})
            self.wfile.write(b"0\r\n\r\n")

    def _event(self, name: str, data: dict[str, Any]) -> None:
        event = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.flush()


def test_a_stream_the_client_cuts_before_its_usage_is_charged_for_the_text_it_got(
    stand_in: StandIn, start_gateway: Start
) -> None:
    """The agent reads every delta and hangs up just before message_delta: main charged one
    token a delta (51 output tokens for 5,000 billed), so the budget ran far behind the bill."""
    go = threading.Event()
    gateway = start_gateway(stand_in(type("Stream", (_LongStream,), {"go": go})))
    question = {"model": OPUS_46, "max_tokens": 8000, "stream": True, "messages": []}
    try:
        with raw_client(gateway) as client:
            client.sendall(raw_request(json.dumps(question).encode()))
            got = b""
            while got.count(b"event: content_block_delta") < DELTAS:
                got += client.recv(65536)
    finally:
        go.set()
    output = gateway.settled(1).usage()["models"][OPUS_46]["output_tokens"]
    assert output >= DELTAS * DELTA_TOKENS, output  # main: 51


STATUS = re.compile(rb"HTTP/1\.1 (\d{3}) ")
FINAL = re.compile(rb"HTTP/1\.1 [2-5]\d\d ")  # an answer's status line, not a 100 Continue


def raw_client(gateway: GatewayProcess) -> socket.socket:
    client = socket.socket(socket.AF_UNIX)
    client.settimeout(10)
    client.connect(str(gateway.socket))
    return client


def raw_request(body: bytes, target: str = MESSAGES, *, headers: str = "") -> bytes:
    """One request as the agent can write it: any target, any extra header lines."""
    head = f"POST {target} HTTP/1.1\r\nhost: x\r\nx-api-key: {PLACEHOLDER}\r\n{headers}"
    if "transfer-encoding" not in headers:
        head += f"content-length: {len(body)}\r\n"
    return head.encode() + b"content-type: application/json\r\n\r\n" + body


# --- held: kept as regressions -----------------------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    """A stand-in API that answers every POST and records its target and body."""

    protocol_version = "HTTP/1.1"
    received: list[tuple[str, bytes]]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.received.append((self.path, self.rfile.read(int(self.headers["content-length"]))))
        usage = {"input_tokens": 10, "output_tokens": 1}
        data = json.dumps({"type": "message", "model": OPUS_46, "usage": usage}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


LEAK = json.dumps(asking(url_source("document", EVIL))).encode()
PLAIN = json.dumps(asking()).encode()


def chunked(body: bytes, extension: bytes = b"", trailer: bytes = b"") -> bytes:
    return b"%x%s\r\n%s\r\n0\r\n%s\r\n" % (len(body), extension, body, trailer)


HELD = {
    # Escapes decode before the check: "\u0074ype": "\u0075rl" is "type": "url".
    "unicode escapes": raw_request(LEAK.replace(b'"type": "url"', b'"\\u0074ype": "\\u0075rl"')),
    # One key twice, spelled apart: a first-wins parser would see the URL source.
    "a key twice, once escaped": raw_request(
        LEAK.replace(b'"type": "url"', b'"type": "url", "typ\\u0065": "text"')
    ),
    # A compressed body is not read past: it is not UTF-8 JSON.
    "gzip": raw_request(gzip.compress(LEAK), headers="content-encoding: gzip\r\n"),
    "deflate": raw_request(zlib.compress(LEAK), headers="content-encoding: deflate\r\n"),
    "a BOM": raw_request(b"\xef\xbb\xbf" + LEAK),
    "UTF-16": raw_request(LEAK.decode().encode("utf-16")),
    "expect 100-continue": raw_request(LEAK, headers="expect: 100-continue\r\n"),
    # A URL source deep in a document's content blocks; an MCP toolset instead of servers.
    "a URL in a document's content": raw_request(
        json.dumps(
            asking(
                {
                    "type": "document",
                    "source": {"type": "content", "content": [url_source("image", EVIL)]},
                }
            )
        ).encode()
    ),
    "an mcp_toolset": raw_request(
        json.dumps(asking(tools=[{"type": "mcp_toolset", "mcp_server_name": EVIL}])).encode()
    ),
    # Chunked framing is undone before the check; the trailer and extension go nowhere.
    "chunked, trailer and extension": raw_request(
        chunked(
            LEAK, b";x=" + EVIL.encode().replace(b"?", b""), b"x-url: " + EVIL.encode() + b"\r\n"
        ),
        headers="transfer-encoding: chunked\r\n",
    ),
    # A second request on the same connection is read and checked like the first.
    "pipelined after a plain request": raw_request(PLAIN) + raw_request(LEAK),
    # Only the two exact targets the CLI uses are forwarded.
    **{
        f"target {target}": raw_request(LEAK, target)
        for target in (
            "//v1/messages?beta=true",
            "/v1/messages/batches?beta=true",
            "/v1/messages/../files?beta=true",
            "/v1/%6Dessages?beta=true",
            "/v1/messages?beta=true&beta=true",
            "/v1/complete",
            "/v1/files?beta=true",
            "http://api.anthropic.com/v1/messages?beta=true",
        )
    },
}


@pytest.mark.parametrize("name", sorted(HELD))
def test_what_held_never_reaches_the_upstream(
    name: str, stand_in: StandIn, start_gateway: Start
) -> None:
    received: list[tuple[str, bytes]] = []
    gateway = start_gateway(stand_in(type("Rec", (_Recorder,), {"received": received})))
    sent = HELD[name]
    with raw_client(gateway) as client:
        client.sendall(sent)
        # The connection stays open, as the CLI's does (a client that closes its side has
        # hung up): read until every request sent has its answer, or the gateway closes.
        answer = b""
        while len(FINAL.findall(answer)) < sent.count(b" HTTP/1.1\r\n"):
            if not (data := client.recv(65536)):
                break
            answer += data
    statuses = STATUS.findall(answer)
    assert statuses and statuses[-1] in (b"400", b"403"), answer[:300]
    assert not any(b"evil.test" in body for _, body in received), received
