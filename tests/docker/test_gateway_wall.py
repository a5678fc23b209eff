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
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from docker import DockerClient  # noqa: TID251 - these tests drive the engine itself

from flowerbox.box.spec import BoxSpec, gateway_kwargs
from tests import gateway_table as table

pytestmark = pytest.mark.docker

# The image's own user under root; anyone else can only give folders to themselves, and
# flowerbox runs the box as its caller's uid anyway.
UID = os.geteuid() or 10001


@dataclass
class Boxed:
    container: Any
    spec: BoxSpec
    root: Path

    @property
    def socket(self) -> Path:
        return self.spec.api_socket

    def usage(self) -> dict[str, Any]:
        return dict(json.loads(self.spec.usage_file.read_text()))

    def log(self) -> bytes:
        return bytes(self.container.logs(stdout=True, stderr=True))

    def remove(self) -> None:
        self.container.remove(force=True)
        shutil.rmtree(self.root, ignore_errors=True)


def start(client: DockerClient, image: str, base_url: str, budget: float | None) -> Boxed:
    """A gateway container as flowerbox starts one, for the upstream at `base_url`."""
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="fbx-wall-"))
    folders = {name: root / name for name in ("ws", "runs", "home", "s", "secrets", "state")}
    for path in folders.values():
        path.mkdir(mode=0o700)
        os.chown(path, UID, UID)
    table.credentials(folders["secrets"] / "credentials.env", base_url)
    os.chown(folders["secrets"] / "credentials.env", UID, UID)
    spec = BoxSpec(
        image=image,
        workspace=folders["ws"],
        run_dir=folders["runs"],
        home=folders["home"],
        socket_dir=folders["s"],
        secrets_dir=folders["secrets"],
        state_dir=folders["state"],
        uid=UID,
        gid=UID,
        command=(),
        run_id=f"wall-{uuid.uuid4().hex[:8]}",
        upstream_on_loopback=True,
        budget_usd=budget,
    )
    spec.gateway_dir.mkdir(mode=0o700)  # flowerbox makes it before the gateway starts
    os.chown(spec.gateway_dir, UID, UID)
    boxed = Boxed(client.containers.run(**gateway_kwargs(spec)), spec, root)
    deadline = time.monotonic() + 60
    while not boxed.socket.exists():
        boxed.container.reload()
        if boxed.container.status == "exited" or time.monotonic() > deadline:
            logs = boxed.log().decode(errors="replace")
            boxed.remove()
            pytest.fail(f"the gateway container did not listen:\n{logs}")
        time.sleep(0.05)
    return boxed


@pytest.fixture(scope="module")
def launch(docker_client: DockerClient, flowerbox_image: str) -> table.Launch:
    return lambda base_url, budget: start(docker_client, flowerbox_image, base_url, budget)


@pytest.fixture(scope="module")
def the_wall(launch: table.Launch) -> Iterator[table.Wall]:
    with table.wall(launch) as running:
        yield running


def test_the_gateway_container_is_hardened(the_wall: table.Wall) -> None:
    gateway = the_wall[1][False]
    assert isinstance(gateway, Boxed)
    config = gateway.container.attrs["HostConfig"]
    assert config["ReadonlyRootfs"] is True
    assert config["CapDrop"] == ["ALL"] and not config["CapAdd"]
    assert "no-new-privileges" in config["SecurityOpt"] and not config["Privileged"]
    assert 0 < config["NanoCpus"] < (os.cpu_count() or 1) * 1e9  # never every core
    assert config["PidsLimit"] > 0 and config["Memory"] > 0
    assert config["NetworkMode"] == "host"  # the loopback-upstream exception (docs/gateway.md)
    assert gateway.container.attrs["Config"]["User"] == f"{UID}:{UID}"


@pytest.mark.parametrize("spent", [False, True], ids=["budget-left", "budget-spent"])
@pytest.mark.parametrize("row", table.ROWS, ids=[row.id for row in table.ROWS])
def test_the_wall(the_wall: table.Wall, row: table.Row, spent: bool) -> None:
    table.through_the_wall(the_wall, row, spent=spent)


@pytest.mark.parametrize("attempt", range(5))
def test_thirty_parallel_requests_never_take_the_total_past_the_budget(
    launch: table.Launch, attempt: int
) -> None:
    table.race_within_the_budget(launch)


def test_nothing_the_gateway_writes_holds_the_key_or_the_userinfo(
    launch: table.Launch, the_wall: table.Wall
) -> None:
    table.nothing_secret(launch, the_wall)
