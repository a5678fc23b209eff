"""The gateway's wall on a real engine: the gateway container exactly as flowerbox starts it
(`gateway_kwargs`: the image, its user, read-only root, no capabilities, its CPU limit), in
front of a loopback stand-in upstream, taking the requests of tests/gateway_table.py over its
unix socket as the box's relay sends them. Every row before and after the budget is spent;
then 30 parallel requests against a $1 budget, five times; then what the container wrote.

The stand-in is on the host's loopback, so the gateway runs on the host network
(`upstream_on_loopback`, the documented test exception); nothing leaves this machine.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from docker import DockerClient  # noqa: TID251 - these tests drive the engine itself

from flowerbox.spec import BoxSpec, gateway_kwargs
from tests.gateway_table import (
    BASE_USER,
    CANARY,
    RACE_BUDGET,
    REAL_KEY,
    ROWS,
    Row,
    StandIn,
    check,
    race,
    send,
    spend,
    start_standin,
    status_and_body,
    stop_standin,
)

pytestmark = pytest.mark.docker

UID = 10001  # the image's own user; the folders below are made its
BUDGET = 1.0


@dataclass
class Boxed:
    container: Any
    spec: BoxSpec
    root: Path

    @property
    def socket(self) -> Path:
        return self.spec.api_socket

    def usage(self) -> dict[str, Any]:
        return dict(json.loads((self.spec.run_dir / "gateway-usage.json").read_text()))

    def logs(self) -> bytes:
        return bytes(self.container.logs(stdout=True, stderr=True))

    def remove(self) -> None:
        self.container.remove(force=True)
        shutil.rmtree(self.root, ignore_errors=True)


def start(client: DockerClient, image: str, base_url: str, *, budget: float | None) -> Boxed:
    """A gateway container as flowerbox starts one, for the upstream at `base_url`."""
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="fbx-wall-"))
    folders = {name: root / name for name in ("ws", "runs", "home", "s", "secrets")}
    for path in folders.values():
        path.mkdir(mode=0o700)
        os.chown(path, UID, UID)
    creds = folders["secrets"] / "credentials.env"
    creds.touch(mode=0o600)
    creds.write_text(f"ANTHROPIC_API_KEY={REAL_KEY}\nANTHROPIC_BASE_URL={base_url}\n")
    os.chown(creds, UID, UID)
    spec = BoxSpec(
        image=image,
        workspace=folders["ws"],
        run_dir=folders["runs"],
        home=folders["home"],
        socket_dir=folders["s"],
        secrets_dir=folders["secrets"],
        uid=UID,
        gid=UID,
        command=(),
        run_id=f"wall-{uuid.uuid4().hex[:8]}",
        upstream_on_loopback=True,
        budget_usd=budget,
    )
    boxed = Boxed(client.containers.run(**gateway_kwargs(spec)), spec, root)
    deadline = time.monotonic() + 60
    while not boxed.socket.exists():
        boxed.container.reload()
        if boxed.container.status == "exited" or time.monotonic() > deadline:
            logs = boxed.logs().decode(errors="replace")
            boxed.remove()
            pytest.fail(f"the gateway container did not listen:\n{logs}")
        time.sleep(0.05)
    return boxed


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    server = start_standin()
    yield server
    stop_standin(server)


@pytest.fixture(scope="module")
def gateways(
    docker_client: DockerClient, flowerbox_image: str, standin: StandIn
) -> Iterator[dict[bool, Boxed]]:
    """Two gateway containers with a $1 budget: one untouched, one whose budget is spent."""
    running: dict[bool, Boxed] = {}
    try:
        for spent in (False, True):
            running[spent] = start(
                docker_client, flowerbox_image, standin.base_url(), budget=BUDGET
            )
        spend(running[True].socket, BUDGET)
        yield running
    finally:
        for boxed in running.values():
            boxed.remove()


def test_the_gateway_container_is_hardened(gateways: dict[bool, Boxed]) -> None:
    config = gateways[False].container.attrs["HostConfig"]
    assert config["ReadonlyRootfs"] is True
    assert config["CapDrop"] == ["ALL"] and not config["CapAdd"]
    assert "no-new-privileges" in config["SecurityOpt"] and not config["Privileged"]
    assert 0 < config["NanoCpus"] < (os.cpu_count() or 1) * 1e9  # never every core
    assert config["PidsLimit"] > 0 and config["Memory"] > 0
    assert config["NetworkMode"] == "host"  # the loopback-upstream exception (docs/gateway.md)
    assert gateways[False].container.attrs["Config"]["User"] == f"{UID}:{UID}"


@pytest.mark.parametrize("spent", [False, True], ids=["budget-left", "budget-spent"])
@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_the_wall(gateways: dict[bool, Boxed], standin: StandIn, row: Row, spent: bool) -> None:
    mark = standin.count()
    answer = send(gateways[spent].socket, row.raw)
    check(row, answer, standin.since(mark), spent=spent)


@pytest.mark.parametrize("attempt", range(5))
def test_thirty_parallel_requests_never_take_the_total_past_the_budget(
    docker_client: DockerClient, flowerbox_image: str, attempt: int
) -> None:
    standin = start_standin(delay=0.2)  # every answer overlaps every other request
    boxed = start(docker_client, flowerbox_image, standin.base_url(), budget=RACE_BUDGET)
    try:
        statuses = race(boxed.socket)
        # A refusal is counted in the file just after it is answered: wait for the last one.
        deadline = time.monotonic() + 10
        while boxed.usage()["refused"] < statuses.count(403) and time.monotonic() < deadline:
            time.sleep(0.05)
        usage = boxed.usage()
    finally:
        boxed.remove()
        stop_standin(standin)
    assert sorted(statuses) == [200] + [403] * 29, statuses
    assert len(standin.seen) == 1  # the refused never reached the upstream
    assert 0.75 < usage["total_cost_usd"] <= RACE_BUDGET
    assert (usage["refused"], usage["reserved_usd"]) == (29, 0)


def test_nothing_the_gateway_writes_holds_the_key_or_the_userinfo(
    docker_client: DockerClient, flowerbox_image: str, gateways: dict[bool, Boxed]
) -> None:
    """Its logs and usage file after the table; its health and 502 answers (which name the
    upstream) for an upstream that is gone, with the canary in the URL's userinfo and query."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: refused
        url = f"http://{BASE_USER}:{CANARY}@127.0.0.1:{port}/?key={CANARY}"
        gone = start(docker_client, flowerbox_image, url, budget=None)
        try:
            health = send(gone.socket, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            unreachable = send(gone.socket, ROWS[0].raw)
            written = [health, unreachable, gone.logs()]
        finally:
            gone.remove()
    assert status_and_body(health)[0] == 503 and status_and_body(unreachable)[0] == 502
    assert f"http://127.0.0.1:{port}".encode() in health  # the upstream, without userinfo
    for boxed in gateways.values():
        written += [boxed.logs(), json.dumps(boxed.usage()).encode()]
    for text in written:
        assert REAL_KEY.encode() not in text and CANARY.encode() not in text
        assert BASE_USER.encode() not in text
    usage = gateways[True].usage()
    assert usage["total_cost_usd"] <= BUDGET and usage["refused"] > 0
