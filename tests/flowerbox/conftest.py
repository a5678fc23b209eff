"""Fixtures for the gateway and relay: real processes on unix sockets in short /tmp folders,
a FakeAPI that accepts only the real key as the upstream."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flower.testing import FakeAPI
from flowerbox.wire import PLACEHOLDER_KEY
from tests.flowerbox.gitclient import Relay, relayed

REAL_KEY = "sk-real-test-key"
PLACEHOLDER = PLACEHOLDER_KEY  # what the agent's side of a box sends


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a unix socket (the gateway's only way in)."""

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(str(self.path))


@dataclass
class GatewayProcess:
    process: subprocess.Popen[bytes]
    socket: Path
    usage_path: Path
    log_path: Path

    def usage(self) -> dict[str, Any]:
        return dict(json.loads(self.usage_path.read_text()))

    def log(self) -> str:
        return self.log_path.read_text()

    def settled(self, requests: int) -> GatewayProcess:
        """Wait for `requests` request lines: each is logged after its usage was written, and
        both happen after the client already has the whole response."""

        def count() -> int:
            return sum(line.endswith("ms") for line in self.log().splitlines())

        wait_for(lambda: count() >= requests)
        return self

    def connect(self, timeout: float = 10.0) -> UnixHTTPConnection:
        return UnixHTTPConnection(self.socket, timeout)

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, **headers: str
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One request on a fresh connection, sent with the placeholder key by default."""
        conn = self.connect()
        try:
            sent = {"x-api-key": PLACEHOLDER, "content-type": "application/json", **headers}
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            return response.status, response.headers, response.read()
        finally:
            conn.close()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=10)


@pytest.fixture
def sockdir() -> Iterator[Path]:
    """A 0700 folder under /tmp: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="fbx-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def upstream() -> Iterator[FakeAPI]:
    """The "real" API: answers only requests that carry REAL_KEY."""
    with FakeAPI(api_key=REAL_KEY) as api:
        yield api


def _clean_env() -> dict[str, str]:
    prefixes = ("ANTHROPIC_", "CLAUDE_", "FLOWER_")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


def kill_left_running(processes: Iterable[subprocess.Popen[bytes] | None]) -> None:
    """Kill what a test started and left running (a failed assertion skips its stop)."""
    for process in processes:
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.01)


def spawn_gateway(
    sock: Path,
    creds: Path,
    usage: Path,
    log: Path,
    args: Sequence[str] = (),
    *,
    preexec: Callable[[], object] | None = None,
) -> subprocess.Popen[bytes]:
    """`python -m flowerbox.sidecar.gateway` with a clean environment, its stderr into `log`
    (`preexec`: run in the child before the exec)."""
    with log.open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "flowerbox.sidecar.gateway", "--socket", str(sock)]
            + ["--credentials", str(creds), "--usage", str(usage), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=_clean_env(),
            preexec_fn=preexec,
        )


@pytest.fixture
def start_gateway(sockdir: Path, tmp_path: Path) -> Iterator[Callable[..., GatewayProcess]]:
    """Start `python -m flowerbox.sidecar.gateway`; its stderr goes to a file the test can read."""
    started: list[GatewayProcess] = []

    def start(
        base_url: str, *, credentials: str | None = None, args: tuple[str, ...] = ()
    ) -> GatewayProcess:
        n = len(started)
        creds = tmp_path / f"creds{n}.env"
        creds.touch(mode=0o600)
        key_line = credentials or f"ANTHROPIC_API_KEY={REAL_KEY}\n"
        creds.write_text(key_line + f"ANTHROPIC_BASE_URL={base_url}\n")
        sock, usage, log = (
            sockdir / f"api{n}.sock",
            tmp_path / f"usage{n}.json",
            tmp_path / f"g{n}.log",
        )
        process = spawn_gateway(sock, creds, usage, log, args)
        gateway = GatewayProcess(process, sock, usage, log)
        started.append(gateway)
        wait_for(lambda: sock.exists() or process.poll() is not None)
        return gateway

    try:
        yield start
    finally:
        for gateway in started:
            if gateway.process.poll() is None:
                gateway.process.kill()
            gateway.process.wait(timeout=10)


@dataclass
class RelayProcess:
    process: subprocess.Popen[str]
    ports: list[int]


@pytest.fixture
def start_relay() -> Iterator[Callable[..., RelayProcess]]:
    """Start `python -m flowerbox.inside.relay` on free ports; returns them from its ready lines."""
    started: list[subprocess.Popen[str]] = []

    def start(*sockets: Path) -> RelayProcess:
        args = [a for s in sockets for a in ("--listen", f"127.0.0.1:0={s}")]
        process = subprocess.Popen(
            [sys.executable, "-m", "flowerbox.inside.relay", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            env=_clean_env(),
        )
        started.append(process)
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in sockets]
        ports = [int(line.split()[1].rpartition(":")[2]) for line in lines]
        return RelayProcess(process, ports)

    try:
        yield start
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)
            if process.stdout is not None:
                process.stdout.close()


def routed(args: list[str]) -> list[str]:
    """What flowerbox's root group makes of a command line's first words (the ask routed to
    `go`), without running anything."""
    # lazy: only the routing tests need the CLI's typer app
    import typer

    from flowerbox.cli.app import FlowerboxGroup, app

    group = typer.main.get_command(app)
    assert isinstance(group, FlowerboxGroup)
    with group.make_context("flowerbox", [], resilient_parsing=True) as ctx:
        return group.route(ctx, args)


@pytest.fixture
def xdg_state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A private run index (XDG_STATE_HOME) and no credentials in the environment."""
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "FLOWER_", "CLAUDE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "state"


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[Relay]:
    """The broker's git relay in front of a loopback git remote (tests/flowerbox/gitclient.py)."""
    with relayed(tmp_path) as running:
        yield running
