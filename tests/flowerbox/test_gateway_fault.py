"""A fault of the gateway's own is answered 500 with one sentence and written down with where
it happened: never a dropped connection, which the CLI retries for minutes as a network outage
(a tool schema's property named "type" once did so to every box run, and CI timed out)."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flower.testing import Always, FakeAPI, text
from flowerbox.sidecar import gateway as gateway_module
from flowerbox.sidecar.gateway import Gateway, load_credentials
from flowerbox.sidecar.meter import Meter
from flowerbox.sidecar.pricing import PriceTable
from tests.flowerbox.conftest import PLACEHOLDER, REAL_KEY, UnixHTTPConnection

ASK = {
    "model": "claude-opus-5-5",
    "max_tokens": 10,
    "messages": [{"role": "user", "content": "hi"}],
}


@pytest.fixture
def gateway(
    upstream: FakeAPI, sockdir: Path, tmp_path: Path
) -> Iterator[tuple[Gateway, io.StringIO]]:
    creds = tmp_path / "creds.env"
    creds.touch(mode=0o600)
    creds.write_text(f"ANTHROPIC_API_KEY={REAL_KEY}\nANTHROPIC_BASE_URL={upstream.url}\n")
    log = io.StringIO()
    meter = Meter(tmp_path / "usage.json", PriceTable())
    server = Gateway(api_socket(sockdir), credentials=load_credentials(creds), meter=meter, log=log)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server, log
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def api_socket(sockdir: Path) -> Path:
    return sockdir / "api.sock"


def post(sockdir: Path) -> tuple[int, dict[str, Any]]:
    conn = UnixHTTPConnection(api_socket(sockdir), 10)
    try:
        headers = {"x-api-key": PLACEHOLDER, "content-type": "application/json"}
        conn.request("POST", "/v1/messages?beta=true", json.dumps(ASK).encode(), headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_a_bug_of_the_gateway_is_a_500_that_says_so_not_a_reset(
    gateway: tuple[Gateway, io.StringIO],
    upstream: FakeAPI,
    sockdir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, log = gateway
    upstream.script = Always(text("hello"))

    def broken(request: object) -> object:
        raise TypeError("unhashable type: 'dict'")

    monkeypatch.setattr(gateway_module, "inspect", broken)
    status, body = post(sockdir)
    assert status == 500 and body["error"]["type"] == "api_error"
    assert (
        "处理这个请求时出现内部错误" in body["error"]["message"]
        and "flowerbox logs RUN" in body["error"]["message"]
    )
    written = log.getvalue()
    assert "internal error: TypeError: unhashable type: 'dict'" in written
    assert "test_gateway_fault.py" in written and "gateway.py" in written  # where it happened
    assert upstream.requests == []  # nothing went out
    assert REAL_KEY not in written

    monkeypatch.undo()  # the next request, with the bug gone, is served as ever
    status, body = post(sockdir)
    assert status == 200 and body["content"][0]["text"] == "hello"
