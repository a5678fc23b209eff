"""A client that hangs up before the answer (the CLI interrupted or stopped) is dropped at the
gateway too: the upstream connection closes, the API serves nothing, the meter bills nothing
(issue 36: a box stopped while the model had not answered yet was metered for a call the
box's own accounts could never see)."""

from __future__ import annotations

import io
import json
import socket
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from flower.testing import Always, FakeAPI, Usage, text
from flowerbox.sidecar.gateway import Gateway
from flowerbox.sidecar.hangup import ClientHungUp, await_answer
from tests.flowerbox.conftest import PLACEHOLDER, UnixHTTPConnection
from tests.flowerbox.test_gateway_fault import ASK, api_socket, gateway  # noqa: F401

HEADERS = {"x-api-key": PLACEHOLDER, "content-type": "application/json"}


def test_a_request_whose_client_hangs_up_before_the_answer_is_dropped_and_not_billed(
    gateway: tuple[Gateway, io.StringIO],  # noqa: F811
    upstream: FakeAPI,
    sockdir: Path,
    tmp_path: Path,
) -> None:
    _, log = gateway
    weighty = text("hello", usage=Usage(input_tokens=50_000, output_tokens=2_000))
    upstream.script = Always(replace(weighty, delay=2.0))
    conn = UnixHTTPConnection(api_socket(sockdir), 10)
    conn.request("POST", "/v1/messages?beta=true", json.dumps(ASK).encode(), HEADERS)
    assert upstream.wait_for(lambda requests: len(requests) == 1, 60)
    conn.close()  # what an interrupted CLI's connection does
    held = upstream.requests[0]
    assert upstream.wait_for(lambda _: bool(held.answered), 60)
    assert held.answered == "client went away before the answer"
    assert held.usage is None and upstream.cost() == 0
    usage = json.loads((tmp_path / "usage.json").read_text())
    assert usage["total_cost_usd"] == 0 and usage["reserved_usd"] == 0
    assert "hung up before the answer" in log.getvalue()


def test_the_wait_ends_when_the_upstream_answers() -> None:
    upstream, far = socket.socketpair()
    client, _caller = socket.socketpair()
    with upstream, far, client, _caller:
        threading.Timer(0.2, far.sendall, (b"HTTP/1.1 200 OK\r\n",)).start()
        await_answer(upstream, client, timeout=10)
        assert upstream.recv(4, socket.MSG_PEEK) == b"HTTP"


def test_the_wait_ends_in_a_hang_up_when_the_client_closes() -> None:
    upstream, far = socket.socketpair()
    client, caller = socket.socketpair()
    with upstream, far, client:
        threading.Timer(0.2, caller.close).start()
        with pytest.raises(ClientHungUp):
            await_answer(upstream, client, timeout=10)


def test_a_client_that_sends_more_is_not_taken_for_a_hang_up() -> None:
    upstream, far = socket.socketpair()
    client, caller = socket.socketpair()
    with upstream, far, client, caller:
        caller.sendall(b"GET /health HTTP/1.1\r\n")
        threading.Timer(0.3, far.sendall, (b"HTTP/1.1 200 OK\r\n",)).start()
        await_answer(upstream, client, timeout=10)
        assert client.recv(3, socket.MSG_PEEK) == b"GET"  # left for the next request
