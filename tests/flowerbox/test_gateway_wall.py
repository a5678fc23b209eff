"""The gateway's wall (tests/gateway_table.py) against a gateway process on a unix socket, in
front of a loopback stand-in upstream: every row before and after the budget is spent, the
30-way race for the budget, and what the gateway wrote. The same scenarios run against the
real container in tests/docker/test_gateway_wall.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import gateway_table as table
from tests.flowerbox.conftest import spawn_gateway, wait_for


@dataclass
class Process:
    process: subprocess.Popen[bytes]
    root: Path

    @property
    def socket(self) -> Path:
        return self.root / "api.sock"

    def usage(self) -> dict[str, Any]:
        return dict(json.loads((self.root / "usage.json").read_text()))

    def log(self) -> bytes:
        return (self.root / "gateway.log").read_bytes()

    def remove(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


def launch(base_url: str, budget: float | None) -> Process:
    """`python -m flowerbox.sidecar.gateway` in front of `base_url`, listening."""
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="fbx-wall-"))  # short: a socket path
    table.credentials(root / "creds.env", base_url)
    args = ["--budget", str(budget)] if budget is not None else []
    process = spawn_gateway(
        root / "api.sock", root / "creds.env", root / "usage.json", root / "gateway.log", args
    )
    gateway = Process(process, root)
    # generous: a gateway starting beside a busy suite's other workers
    wait_for(lambda: gateway.socket.exists() or process.poll() is not None, timeout=120)
    return gateway


@pytest.fixture(scope="module")
def the_wall() -> Iterator[table.Wall]:
    with table.wall(launch) as running:
        yield running


@pytest.mark.parametrize("spent", [False, True], ids=["budget-left", "budget-spent"])
@pytest.mark.parametrize("row", table.ROWS, ids=[row.id for row in table.ROWS])
def test_the_wall(the_wall: table.Wall, row: table.Row, spent: bool) -> None:
    table.through_the_wall(the_wall, row, spent=spent)


@pytest.mark.parametrize("attempt", range(5))
def test_thirty_parallel_requests_never_take_the_total_past_the_budget(attempt: int) -> None:
    table.race_within_the_budget(launch)


def test_nothing_the_gateway_writes_holds_the_key_or_the_userinfo(the_wall: table.Wall) -> None:
    table.nothing_secret(launch, the_wall)
