"""Resilience as plain functions: backoff, classification, probes (against local sockets)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from flower.core.resilience import Resilience, classify, probe_target

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("attempt", "low", "high"),
    [(1, 3.0, 5.0), (2, 6.0, 10.0), (3, 12.0, 20.0), (6, 90.0, 150.0), (30, 90.0, 150.0)],
)
def test_backoff_follows_the_seeds_numbers(attempt: int, low: float, high: float) -> None:
    delays = [Resilience().delay_for(attempt) for _ in range(200)]
    assert low <= min(delays) and max(delays) <= high
    assert max(delays) - min(delays) > (high - low) / 4  # the jitter is really there


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Invalid API key · Fix external API key", "fatal"),
        ("API Error: 401 connection to the gateway refused the key", "fatal"),  # fatal first
        ("Failed to authenticate. API Error: 403 Your API key does not have permission", "fatal"),
        ("Your credit balance is too low", "fatal"),
        ("Reached maximum budget ($0.50)", "fatal"),
        ("Reached maximum number of turns (12)", "fatal"),
        ("API Error: 400 invalid request", "fatal"),
        ("API Error: 529 Overloaded. This is a server-side issue", "retry"),
        ("API Error: 500 Internal server error.", "retry"),
        ("API Error: Request rejected (429) · rate limited", "retry"),
        ("API Error: Connection refused — a firewall may be blocking it (ECONNREFUSED)", "retry"),
        ("API Error: Connection dropped (ECONNRESET).", "retry"),
        ("API Error: Connection lost mid-response.", "retry"),
        ("getaddrinfo ENOTFOUND api.example.test", "retry"),
        ("Request timed out", "retry"),
        ("ProcessError: Command failed with exit code 1", "other"),
        ("", "other"),
        # the SDK could not start the CLI: local and permanent (issue 21), never a wait
        (
            "CLIConnectionError: Failed to start Claude Code: 'utf-8' codec can't encode "
            "character '\\udcff' in position 14: surrogates not allowed",
            "fatal",
        ),
        ("CLIConnectionError: Working directory does not exist: /gone", "fatal"),
        ("CLINotFoundError: Claude Code not found at: /opt/claude", "fatal"),
    ],
)
def test_classify(text: str, kind: str) -> None:
    assert classify(text) == kind


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({"status": 401}, "fatal"),
        ({"status": 400}, "fatal"),
        ({"status": 429}, "retry"),
        ({"status": 408}, "retry"),
        ({"status": 503}, "retry"),
        ({"status": 529}, "retry"),
        ({"kind": "authentication_failed"}, "fatal"),
        ({"kind": "billing_error"}, "fatal"),
        ({"kind": "rate_limit"}, "retry"),
        ({"kind": "server_error"}, "retry"),
        ({"reason": "max_turns"}, "fatal"),
        ({"reason": "budget_exhausted"}, "fatal"),
    ],
)
def test_classify_reads_the_sdks_data_before_the_text(data: dict[str, Any], kind: str) -> None:
    """The text says the opposite of the data each time: the data wins."""
    misleading = "Invalid API key" if kind == "retry" else "Connection refused (ECONNREFUSED)"
    assert classify(misleading, **data) == kind


def test_classify_falls_back_to_the_text_without_data() -> None:
    """A dropped connection has no status, and the kind "unknown" says nothing."""
    connection = "API Error: Connection refused (ECONNREFUSED)"
    assert classify(connection, status=None, kind="unknown", reason="api_error") == "retry"


def test_the_cli_is_told_a_low_retry_count_only_when_flower_retries() -> None:
    assert Resilience(cli_retries=2).env() == {"CLAUDE_CODE_MAX_RETRIES": "2"}
    assert Resilience(enabled=False).env() == {}


def test_probe_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOWER_HEALTH_URL", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:8123/v1")
    assert probe_target() == ("127.0.0.1", 8123)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://gw.example.test")
    assert probe_target() == ("gw.example.test", 443)
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    assert probe_target() == ("api.anthropic.com", 443)
    monkeypatch.setenv("FLOWER_HEALTH_URL", "http://127.0.0.1:9/health")
    assert probe_target() == "http://127.0.0.1:9/health"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def fast() -> Resilience:
    return Resilience(probe_interval=0.05, probe_timeout=0.5, max_offline_wait=5.0)


async def test_wait_online_returns_at_once_when_up(
    fast: Resilience, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{server.getsockname()[1]}")
        monkeypatch.delenv("FLOWER_HEALTH_URL", raising=False)
        lines: list[str] = []
        assert await fast.wait_online(lines.append)
        assert lines == []


async def test_wait_online_waits_for_the_endpoint_to_come_back(
    fast: Resilience, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("FLOWER_HEALTH_URL", raising=False)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def come_back() -> None:
        time.sleep(0.4)
        server.bind(("127.0.0.1", port))
        server.listen()

    thread = threading.Thread(target=come_back)
    thread.start()
    lines: list[str] = []
    try:
        assert await fast.wait_online(lines.append)
    finally:
        thread.join()
        server.close()
    assert len(lines) == 2
    assert lines[0].startswith(f"127.0.0.1:{port} 不可达") and lines[1].endswith("恢复,继续")


async def test_wait_online_gives_up_after_the_offline_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.delenv("FLOWER_HEALTH_URL", raising=False)
    policy = Resilience(probe_interval=0.05, probe_timeout=0.2, max_offline_wait=0.3)
    started = time.monotonic()
    assert not await policy.wait_online()
    assert time.monotonic() - started < 3


@pytest.fixture
def health_server() -> Iterator[tuple[HTTPServer, list[int]]]:
    status = [503]

    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status[0])
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, status
    server.shutdown()
    server.server_close()


async def test_a_health_url_is_probed_by_http_status(
    health_server: tuple[HTTPServer, list[int]], fast: Resilience, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside flowerbox the relay is always up; the gateway's health says if upstream is."""
    server, status = health_server
    url = f"http://127.0.0.1:{server.server_address[1]}/health"
    assert not await fast.probe(url)
    status[0] = 200
    assert await fast.probe(url)


async def test_the_outage_line_names_the_health_urls_host_and_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """003:251: the line is `<host>:<port> 不可达…`, also when FLOWER_HEALTH_URL (set in every
    flowerbox box) is what is probed (it named "h", the URL's first character)."""
    port = free_port()
    monkeypatch.setenv("FLOWER_HEALTH_URL", f"http://127.0.0.1:{port}/health")
    policy = Resilience(probe_interval=0.05, probe_timeout=0.2, max_offline_wait=0.2)
    lines: list[str] = []
    assert not await policy.wait_online(lines.append)
    assert lines and lines[0].startswith(f"127.0.0.1:{port} 不可达")
