"""FakeAPI: a real HTTP server on 127.0.0.1 that speaks enough of the Messages API for the
Claude Code CLI to run offline.

    with FakeAPI(script) as api:
        options = ClaudeAgentOptions(cwd=ws, env=api.env(home=tmp_home))
        ...
        assert api.requests[-1].last_tool_results()[0].text == "hi"

It answers `POST /v1/messages` streaming (the SSE sequence the CLI expects: every event with
both an `event:` and a `data:` line) and non-streaming (the CLI's fallback after a stream dies
before any content), and `POST /v1/messages/count_tokens`. Every request is recorded; a script
failure is answered with a visible 400 (the CLI does not retry it) and kept in `errors`, so a
broken script never hangs a test. `tls=` (a server-side ssl.SSLContext) serves https, for
testing clients of a real, TLS-only upstream (the flowerbox gateway).
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from flower.core.lang import text
from flower.core.pricing import PriceTable
from flower.testing.replies import Fault, Reply, Text, Thinking, ToolUse
from flower.testing.request import Request, credential_of, fingerprint, redact
from flower.testing.script import Script, ScriptError

PLACEHOLDER_KEY = "sk-ant-fake-0000"
OFFLINE_ENV = {
    # No traffic but /v1/messages: without this the CLI also dials api.anthropic.com directly.
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    # The CLI sends even 127.0.0.1 traffic through HTTP(S)_PROXY unless excluded.
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


def _no_script(request: Request) -> Reply:
    raise ScriptError(text("script.none_set"))


class FakeAPI:
    """The scripted fake Messages API. Thread-safe; start/stop can be repeated on one port."""

    def __init__(
        self,
        script: Script | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        log_path: str | Path | None = None,
        tls: ssl.SSLContext | None = None,
        hold: Callable[[Request], None] | None = None,
    ) -> None:
        self.script: Script = script or _no_script
        # Called in each Messages request's own thread once the script has chosen its reply,
        # before the reply's delay, outside every lock: a benchmark holds answers until a
        # condition of its own (every run waiting at once), which a fixed delay cannot say.
        self.hold = hold
        self.tls = tls
        self.host = host
        self.port = port
        self.api_key = api_key
        self.log_path = Path(log_path) if log_path else None
        self._requests: list[Request] = []
        self._errors: list[str] = []
        self._lock = threading.Lock()
        self._script_lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeAPI:
        """Listen (again) on the same port; port 0 picks a free one the first time."""
        if self._server is not None:
            return self
        server = ThreadingHTTPServer((self.host, self.port), _handler_for(self))
        server.daemon_threads = True
        if self.tls is not None:
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening: new connections are refused until start() is called again."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def env(self, home: str | Path | None = None, *, retries: int | None = 0) -> dict[str, str]:
        """Environment for the CLI: this server as the API, a placeholder key, no other traffic.

        home: the CLI's HOME, and its temp folder (CLAUDE_CODE_TMPDIR, `home`/.tmp) instead of
        the machine's shared /tmp/claude-<uid>. A CLI with a fresh HOME has no `.last-cleanup`
        stamp, so each session sweeps its temp folder about 5 s in; over the shared folder (a
        busy machine's holds thousands of leftovers: 18,000 here) that cost ~0.35 s of CPU a
        session, and it touched what other sessions of the same user keep there.
        retries: CLAUDE_CODE_MAX_RETRIES for the CLI (0 keeps fault tests fast; None leaves
        the CLI's default of 10).
        """
        env = {
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": self.api_key or PLACEHOLDER_KEY,
            **OFFLINE_ENV,
        }
        if home is not None:
            env["HOME"] = str(home)
            env["CLAUDE_CODE_TMPDIR"] = str(Path(home) / ".tmp")
        if retries is not None:
            env["CLAUDE_CODE_MAX_RETRIES"] = str(retries)
        return env

    # --- what was received -----------------------------------------------------------------

    @property
    def requests(self) -> list[Request]:
        """Every request so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def errors(self) -> list[str]:
        """Script errors, each answered to the CLI as a 400."""
        with self._lock:
            return list(self._errors)

    def messages_requests(self) -> list[Request]:
        """Model turns only (count_tokens excluded)."""
        return [r for r in self.requests if r.kind != "count_tokens"]

    def main_requests(self) -> list[Request]:
        return [r for r in self.requests if r.kind == "main"]

    def subagent_requests(self, agent_id: str | None = None) -> list[Request]:
        return [
            r
            for r in self.requests
            if r.kind == "subagent" and (agent_id is None or r.agent_id == agent_id)
        ]

    def agent_ids(self) -> list[str]:
        """Distinct subagent ids, in order of first appearance."""
        return list(dict.fromkeys(r.agent_id for r in self.subagent_requests() if r.agent_id))

    def cost(self, prices: PriceTable | None = None) -> float:
        """What every answer so far cost, priced from the usage that reached the client (each
        `Request.usage`) with `prices` (flower's table by default): the figure flower's
        accounts and the flowerbox gateway's meter must both come to."""
        table = prices or PriceTable()
        return sum(
            table.lookup(r.answer_model or r.model)[0].cost(r.usage)
            for r in self.requests
            if r.usage is not None
        )

    def total_bytes(self) -> int:
        return sum(r.size for r in self.requests)

    def total_messages(self) -> int:
        return sum(len(r.messages) for r in self.requests)

    def saw_key(self, key: str) -> bool:
        """Whether any request carried this credential (compared by fingerprint)."""
        wanted = fingerprint(key)
        return any(r.key_fingerprint == wanted for r in self.requests)

    def wait_for(self, predicate: Callable[[list[Request]], bool], timeout: float = 30.0) -> bool:
        """Poll until predicate(requests) holds; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.requests):
                return True
            time.sleep(0.02)
        return predicate(self.requests)

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._errors.clear()

    # --- answering (called from handler threads) --------------------------------------------

    def _record(
        self,
        path: str,
        headers: dict[str, str],
        body: dict[str, Any],
        size: int,
        *,
        method: str = "POST",
    ) -> Request:
        credential = credential_of(headers)
        with self._lock:
            request = Request(
                index=len(self._requests),
                path=path,
                headers=redact(headers),
                body=body,
                size=size,
                key_fingerprint=fingerprint(credential) if credential else None,
                received_at=time.time(),
                method=method,
            )
            self._requests.append(request)
        return request

    def _decide(self, request: Request) -> Reply | str:
        """The scripted reply, or the text of a script error."""
        try:
            with self._script_lock:
                return self.script(request)
        except Exception as exc:  # any script failure must become a visible answer, not a hang
            message = f"fake API script error on request #{request.index}: {exc}"
            with self._lock:
                self._errors.append(message)
            return message

    def _finish(self, request: Request, answered: str) -> None:
        request.answered = answered
        if self.log_path is not None:
            line = json.dumps(request.to_json(), ensure_ascii=False)
            with self._lock, self.log_path.open("a", encoding="utf-8") as log:
                log.write(line + "\n")

    def _authorized(self, headers: dict[str, str]) -> bool:
        return self.api_key is None or credential_of(headers) == self.api_key


def _handler_for(api: FakeAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        pass

    Handler.api = api
    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: FakeAPI

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default per-request stderr line."""

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, _error_body("invalid_request_error", "body is not JSON"))
            return
        path = self.path
        request = self.api._record(path, dict(self.headers.items()), body, len(raw))
        if not self.api._authorized(dict(self.headers.items())):
            self._json(401, _error_body("authentication_error", "invalid x-api-key"))
            self.api._finish(request, "http 401 (wrong key)")
            return
        if path.startswith("/v1/messages/count_tokens"):
            self._json(200, {"input_tokens": max(1, len(raw) // 4)})
            self.api._finish(request, "count_tokens")
            return
        if not path.startswith("/v1/messages"):
            self._json(404, _error_body("not_found_error", f"no route {path}"))
            self.api._finish(request, "http 404")
            return
        decided = self.api._decide(request)
        if isinstance(decided, str):
            self._json(400, _error_body("invalid_request_error", decided))
            self.api._finish(request, "script error")
            return
        if self.api.hold is not None:
            self.api.hold(request)
        if decided.delay:
            time.sleep(decided.delay)
            if self._client_gone():
                self.api._finish(request, "client went away before the answer")
                return
        self.api._finish(request, self._answer(request, decided))

    def _client_gone(self) -> bool:
        """Whether the client hung up while the answer was held. Nothing is sent, or billed,
        then: a server that sees the hang-up drops the request, and a first write into the
        closed connection would still "succeed" and count as served."""
        with socket.fromfd(self.connection.fileno(), socket.AF_INET, socket.SOCK_STREAM) as raw:
            readable, _, _ = select.select([raw], [], [], 0)
            try:
                return bool(readable) and raw.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

    def do_GET(self) -> None:
        """Any other method: recorded (a test can see everything a client sent), then 404."""
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        request = self.api._record(
            self.path, dict(self.headers.items()), {}, len(raw), method=self.command
        )
        self._json(404, _error_body("not_found_error", f"no route {self.command} {self.path}"))
        self.api._finish(request, "http 404")

    do_HEAD = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    # --- answers ---------------------------------------------------------------------------

    def _answer(self, request: Request, reply: Reply) -> str:
        fault = reply.fault
        if fault is not None and fault.kind == "http":
            headers = {"retry-after": str(fault.retry_after)} if fault.retry_after else {}
            self._json(fault.status, _error_body(fault.error_type, fault.message), headers)
            return f"http {fault.status}"
        if fault is not None and (fault.kind == "reset" or not request.stream):
            return self._cut(Fault("reset"))  # no SSE to cut on a non-streaming request
        message = _message(request, reply)
        request.answer_model = message["model"]
        if not request.stream:
            self._json(200, message)
            request.usage = dict(message["usage"])
            return _summary(reply)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for event, data in _sse_events(message):
                if fault is not None and _is_cut_point(fault, event, data):
                    return self._cut(fault)
                self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                _deliver(request, event, data)
                if event == "message_start" and reply.think:
                    time.sleep(reply.think)
        except (BrokenPipeError, ConnectionResetError):
            return "client went away"
        return _summary(reply)

    def _cut(self, fault: Fault) -> str:
        if fault.kind == "stream_error":
            error = _error_body(fault.error_type, fault.message)
            self.wfile.write(f"event: error\ndata: {json.dumps(error)}\n\n".encode())
            self.wfile.flush()
            return f"stream error after {fault.after_blocks} blocks"
        # A reset, not a clean close: linger 0 makes the kernel send RST.
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        return "reset" if fault.kind == "reset" else f"dropped after {fault.after_blocks} blocks"

    def _json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        if status >= 400:
            self.send_header("request-id", "req_fake")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def _block_json(block: Text | Thinking | ToolUse) -> dict[str, Any]:
    match block:
        case Text(text=t):
            return {"type": "text", "text": t}
        case Thinking(thinking=t, signature=s):
            return {"type": "thinking", "thinking": t, "signature": s}
        case ToolUse(name=n, input=i, id=tool_id):
            return {"type": "tool_use", "id": tool_id, "name": n, "input": i}
    raise TypeError(f"unknown block {block!r}")


def _message(request: Request, reply: Reply) -> dict[str, Any]:
    content = [_block_json(b) for b in reply.blocks]
    usage = reply.usage
    return {
        "id": f"msg_fake{request.index:06d}",
        "type": "message",
        "role": "assistant",
        "model": reply.model or request.model or "claude-opus-5-5",
        "content": content,
        "stop_reason": reply.effective_stop_reason,
        "stop_sequence": None,
        "usage": {
            # Estimated from the request size unless the script says otherwise.
            "input_tokens": usage.input_tokens
            if usage.input_tokens is not None
            else max(1, request.size // 4),
            "output_tokens": usage.output_tokens
            if usage.output_tokens is not None
            else max(1, len(json.dumps(content)) // 4),
            "cache_read_input_tokens": usage.cache_read_input_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        },
    }


def _sse_events(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    usage = message["usage"]
    start_usage = {**usage, "output_tokens": 1}
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {**message, "content": [], "stop_reason": None, "usage": start_usage},
        },
    )
    for index, block in enumerate(message["content"]):
        yield from _block_events(index, block)
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _deliver(request: Request, event: str, data: dict[str, Any]) -> None:
    """Record the usage an SSE event just told the client (as the gateway's meter reads it)."""
    if event == "message_start":
        request.usage = dict(data["message"]["usage"])
    elif event == "message_delta" and request.usage is not None:
        request.usage.update(data["usage"])


def _block_events(index: int, block: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    start: dict[str, Any]
    deltas: list[dict[str, Any]]
    match block["type"]:
        case "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}]
        case "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        case _:
            start = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
    opening = {"type": "content_block_start", "index": index, "content_block": start}
    yield "content_block_start", opening
    for delta in deltas:
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def _is_cut_point(fault: Fault, event: str, data: dict[str, Any]) -> bool:
    """A drop/stream_error cuts the stream just before block `after_blocks` would start
    (or before message_delta when the reply has no more blocks than that)."""
    if event == "content_block_start":
        return bool(data["index"] == fault.after_blocks)
    return event == "message_delta"


def _summary(reply: Reply) -> str:
    parts = [f"tool_use:{b.name}" for b in reply.blocks if isinstance(b, ToolUse)]
    if reply.text:
        parts.insert(0, "text")
    return "+".join(parts) or "empty"
