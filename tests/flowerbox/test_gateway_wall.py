"""The gateway's wall (tests/gateway_table.py) against a gateway process on a unix socket, in
front of a loopback stand-in upstream: every row before and after the budget is spent, then
what the gateway wrote. The same table runs against the real container in
tests/docker/test_gateway_wall.py."""

from __future__ import annotations

import json
import socket as sockets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.flowerbox.conftest import _clean_env, wait_for
from tests.gateway_table import (
    CANARY,
    RACE_BUDGET,
    REAL_KEY,
    ROWS,
    Row,
    StandIn,
    check,
    credentials,
    race,
    send,
    spend,
    start_standin,
    status_and_body,
    stop_standin,
)

BUDGET = 1.0


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    socket: Path
    usage: Path
    log: Path


def launch(root: Path, standin: StandIn, name: str, *args: str) -> Running:
    creds = root / f"{name}.env"
    credentials(creds, standin)
    sock, usage, log = root / f"{name}.sock", root / f"{name}.json", root / f"{name}.log"
    with log.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "flowerbox.gateway", "--socket", str(sock)]
            + ["--credentials", str(creds), "--usage", str(usage), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=_clean_env(),
        )
    wait_for(lambda: sock.exists() or process.poll() is not None)
    return Running(process, sock, usage, log)


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    server = start_standin()
    yield server
    stop_standin(server)


@pytest.fixture(scope="module")
def gateways(standin: StandIn) -> Iterator[dict[bool, Running]]:
    """Two gateways with the same budget: one untouched, one whose budget is spent."""
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="fbx-wall-"))
    running = {
        spent: launch(root, standin, f"g{int(spent)}", "--budget", str(BUDGET))
        for spent in (False, True)
    }
    spend(running[True].socket, BUDGET)
    yield running
    for gateway in running.values():
        gateway.process.terminate()
        gateway.process.wait(timeout=10)
    subprocess.run(["rm", "-rf", str(root)], check=False)


@pytest.mark.parametrize("spent", [False, True], ids=["budget-left", "budget-spent"])
@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_the_wall(gateways: dict[bool, Running], standin: StandIn, row: Row, spent: bool) -> None:
    mark = standin.count()
    answer = send(gateways[spent].socket, row.raw)
    check(row, answer, standin.since(mark), spent=spent)


def test_nothing_the_gateway_writes_holds_the_key_or_the_userinfo(
    gateways: dict[bool, Running], standin: StandIn, tmp_path: Path
) -> None:
    """Its log and usage file; and its health and 502 answers for an upstream that is gone."""
    with sockets.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        gone_port = closed.getsockname()[1]  # bound, never listening: refused
    creds = tmp_path / "gone.env"
    creds.touch(mode=0o600)
    creds.write_text(
        f"ANTHROPIC_API_KEY={REAL_KEY}\n"
        f"ANTHROPIC_BASE_URL=http://wall-user:{CANARY}@127.0.0.1:{gone_port}/?key={CANARY}\n"
    )
    sock, log = Path(f"/tmp/fbx-gone-{gone_port}.sock"), tmp_path / "gone.log"
    with log.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "flowerbox.gateway", "--socket", str(sock)]
            + ["--credentials", str(creds), "--usage", str(tmp_path / "u.json")],
            stderr=err,
            env=_clean_env(),
        )
    try:
        wait_for(sock.exists)
        health = send(sock, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        unreachable = send(sock, ROWS[0].raw)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert status_and_body(health)[0] == 503 and status_and_body(unreachable)[0] == 502
    assert f"http://127.0.0.1:{gone_port}".encode() in health  # the URL, without its userinfo
    written = [health, unreachable, log.read_bytes(), (tmp_path / "u.json").read_bytes()]
    for gateway in gateways.values():
        written += [gateway.log.read_bytes(), gateway.usage.read_bytes()]
    for text in written:
        assert REAL_KEY.encode() not in text and CANARY.encode() not in text
        assert b"wall-user" not in text
    usage = json.loads(gateways[True].usage.read_text())
    assert usage["total_cost_usd"] <= BUDGET and usage["refused"] > 0


@pytest.mark.parametrize("attempt", range(5))
def test_thirty_parallel_requests_never_take_the_total_past_the_budget(
    tmp_path: Path, attempt: int
) -> None:
    standin = start_standin(delay=0.2)  # every answer overlaps every other request
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="fbx-race-"))
    gateway = launch(root, standin, "race", "--budget", str(RACE_BUDGET))
    try:
        statuses = race(gateway.socket)
        # A refusal is counted in the file just after it is answered: wait for the last one.
        wait_for(lambda: json.loads(gateway.usage.read_text())["refused"] >= statuses.count(403))
    finally:
        gateway.process.terminate()
        gateway.process.wait(timeout=10)
        stop_standin(standin)
    usage = json.loads(gateway.usage.read_text())
    subprocess.run(["rm", "-rf", str(root)], check=False)
    assert sorted(statuses) == [200] + [403] * 29, statuses
    assert len(standin.seen) == 1  # the refused never reached the upstream
    assert 0.75 < usage["total_cost_usd"] <= RACE_BUDGET
    assert (usage["refused"], usage["reserved_usd"]) == (29, 0)
