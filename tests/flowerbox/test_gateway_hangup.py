"""A client that hangs up (the CLI interrupted or stopped) ends its request at the gateway
too: the upstream connection is shut at once, so the API stops and the meter bills only what
the API had sent (issue 36: a box stopped while the model had not answered, or was still
thinking, was metered for more than the box's own accounts could ever see)."""

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
from flowerbox.sidecar.hangup import HangUpWatch
from tests.flowerbox.conftest import PLACEHOLDER, UnixHTTPConnection
from tests.flowerbox.test_gateway_fault import ASK, api_socket, gateway  # noqa: F401

HEADERS = {"x-api-key": PLACEHOLDER, "content-type": "application/json"}
WEIGHTY = text("hello", usage=Usage(input_tokens=50_000, output_tokens=2_000))


@pytest.mark.parametrize("hold", ["delay", "think"])
def test_a_client_that_hangs_up_ends_its_request_upstream_and_is_billed_what_was_sent(
    hold: str,
    gateway: tuple[Gateway, io.StringIO],  # noqa: F811
    upstream: FakeAPI,
    sockdir: Path,
    tmp_path: Path,
) -> None:
    """`delay`: hung up before the API's first byte: nothing served, nothing billed.
    `think`: hung up while the stream is open and the model thinks: the API stops there,
    its input is billed (message_start's), and the meter says exactly what the API served."""
    _, log = gateway
    upstream.script = Always(replace(WEIGHTY, **{hold: 3.0}))
    conn = UnixHTTPConnection(api_socket(sockdir), 30)
    conn.request("POST", "/v1/messages?beta=true", json.dumps({**ASK, "stream": True}), HEADERS)
    if hold == "think":
        response = conn.getresponse()
        assert b"message_start" in response.read1(65536)  # the stream is open
    else:
        assert upstream.wait_for(lambda requests: len(requests) == 1, 60)
    conn.close()  # what an interrupted CLI's connection does
    held = upstream.requests[0]
    assert upstream.wait_for(lambda _: bool(held.answered), 60)
    usage = json.loads((tmp_path / "usage.json").read_text())
    assert usage["reserved_usd"] == 0
    if hold == "delay":
        assert held.answered == "client went away before the answer" and held.usage is None
        assert usage["total_cost_usd"] == 0
        assert "hung up before the answer" in log.getvalue()
    else:
        assert held.usage is not None and held.usage["output_tokens"] == 1  # stopped there
        assert upstream.cost() > 0
        assert usage["total_cost_usd"] == pytest.approx(upstream.cost(), abs=1e-6)


def test_the_watch_shuts_the_upstream_when_the_client_hangs_up() -> None:
    client, caller = socket.socketpair()
    upstream, far = socket.socketpair()
    with client, upstream, far, HangUpWatch(client) as watch:
        watch.guard(upstream)
        threading.Timer(0.2, caller.close).start()
        assert upstream.recv(1) == b""  # shut: the read that waited for the API ends
        assert watch.hung_up


def test_a_hang_up_before_the_guard_shuts_the_upstream_at_once() -> None:
    client, caller = socket.socketpair()
    upstream, far = socket.socketpair()
    caller.close()
    with client, upstream, far, HangUpWatch(client) as watch:
        threading.Event().wait(0.2)
        watch.guard(upstream)
        assert upstream.recv(1) == b""


def test_a_client_that_stays_or_sends_more_is_left_alone() -> None:
    client, caller = socket.socketpair()
    upstream, far = socket.socketpair()
    with client, caller, upstream, far:
        with HangUpWatch(client) as watch:
            watch.guard(upstream)
            caller.sendall(b"GET /health HTTP/1.1\r\n")
            far.sendall(b"answer")
            assert upstream.recv(6) == b"answer"
        assert not watch.hung_up
        assert client.recv(3, socket.MSG_PEEK) == b"GET"  # left for the next request
        far.sendall(b"more")
        assert upstream.recv(4) == b"more"  # the upstream connection still works
