"""compose.yaml's broker service for real, with docker-compose 1.29: `--profile broker up -d
broker` starts `flowerbox broker --no-engine` in a hardened container of its own, and two
concurrent `flowerbox shell` runs on the host (the e2e user, with a state folder of its own)
are served through it, each with its own token and budget; `down` leaves the ledger on the
host. The fake API on the host's loopback is its upstream (docs/deployment.md's override puts
the broker on the host's network); the request-level rules: tests/docker/test_broker.py."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from docker import DockerClient  # noqa: TID251 - the test inspects the broker's container

from flower.testing import Always, FakeAPI, Usage, text
from flowerbox.box.state import SOCKET_ROOT
from flowerbox.broker import client
from tests.docker.e2e import FLOWERBOX, REAL, as_user, box_env
from tests.docker.test_broker import CALLS, CLIENT
from tests.docker.test_compose_run import COMPOSE, HOST_GATEWAY, NO_COMPOSE
from tests.flowerbox.conftest import wait_for

pytestmark = pytest.mark.docker

User = tuple[str, int, int]


@dataclass
class ComposeBroker:
    """The broker service of a compose project, and where its host folders are."""

    root: Path  # the e2e user's: compose's home, the workspaces
    home: Path  # compose's $HOME: the state folder, and the credentials compose reads
    base: list[str]  # docker-compose with the files and the project
    env: dict[str, str]
    project: str

    @property
    def folder(self) -> Path:
        return self.home / ".local" / "state" / "flowerbox" / "broker"

    def compose(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.base, *args],
            env=self.env,
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.folder / "ledger.db") as db:
            return list(db.execute(sql).fetchall())


def owned(user: User, path: Path, *, under: Path, mode: int = 0o700) -> Path:
    """`path` made with its parents up to `under`, all `user`'s (compose would make a
    missing folder it mounts root's)."""
    path.mkdir(mode=mode, parents=True, exist_ok=True)
    for made in [path, *path.parents]:
        if made == under:
            return path
        os.chown(made, user[1], user[2])
    raise AssertionError(f"{path} is not under {under}")


@pytest.fixture
def compose_broker(
    real_api: FakeAPI,
    host_user: User,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> Iterator[ComposeBroker]:
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.skip(NO_COMPOSE)
    _, uid, gid = host_user
    root = Path(tempfile.mkdtemp(prefix="fbx-cbk-", dir="/tmp"))  # the e2e user's to enter
    os.chown(root, uid, gid)
    home = root / "home"
    credentials = owned(host_user, home / ".config" / "flower", under=root) / ".env"
    credentials.write_text(f"ANTHROPIC_API_KEY={REAL}\nANTHROPIC_BASE_URL={real_api.url}\n")
    credentials.chmod(0o600)
    os.chown(credentials, uid, gid)
    owned(host_user, home / ".local/state/flowerbox", under=root)  # the docs' mkdir, first
    owned(host_user, Path(f"/tmp/flowerbox-{uid}"), under=Path("/tmp"))
    override = root / "host-network.yaml"
    override.write_text(HOST_GATEWAY)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "UID": str(uid), "GID": str(gid)}
    env |= {"PWD": str(root), "FLOWERBOX_IMAGE": flowerbox_image}
    project = f"fbxbroker{os.getpid()}"
    base = [compose, "-f", str(COMPOSE), "-f", str(override), "-p", project]
    base += ["--project-directory", str(root), "--profile", "broker"]
    running = ComposeBroker(root, home, base, env, project)
    try:
        up = running.compose("up", "-d", "broker")
        assert up.returncode == 0, up.stderr[-3000:]
        wait_for(lambda: client.running(running.folder), 60)
        yield running
    finally:
        running.compose("down")
        subprocess.run(["rm", "-rf", str(root)], check=False)


def test_composes_broker_serves_concurrent_runs_and_down_leaves_its_ledger(
    compose_broker: ComposeBroker,
    real_api: FakeAPI,
    host_user: User,
    docker_client: DockerClient,
) -> None:
    real_api.script = Always(text("hi", usage=Usage(1000, 100)))  # $0.006 a call
    label = {"label": f"com.docker.compose.project={compose_broker.project}"}
    [container] = docker_client.containers.list(filters=label)
    config = container.attrs["HostConfig"]
    assert container.attrs["Config"]["User"] == f"{host_user[1]}:{host_user[2]}"
    assert config["ReadonlyRootfs"] and config["CapDrop"] == ["ALL"]
    mounts = {mount["Source"]: mount["Destination"] for mount in container.attrs["Mounts"]}
    assert not [source for source in mounts if "docker.sock" in source]  # no engine inside
    assert mounts[str(compose_broker.home / ".local/state/flowerbox")] == str(
        compose_broker.home / ".local/state/flowerbox"
    )

    budgets = [0.01, 1.0]  # the first can afford two calls
    env = box_env(real_api, host_user)  # flowerbox on the host finds the broker in its state:
    env["XDG_STATE_HOME"] = str(compose_broker.home / ".local" / "state")
    env[SOCKET_ROOT] = f"/tmp/flowerbox-{host_user[1]}"  # the default, which compose mounts
    folders = []
    for n in range(2):
        folders.append(owned(host_user, compose_broker.root / f"ws{n}", under=compose_broker.root))
        as_user(host_user, ["git", "init", "-q"], cwd=folders[n])

    def box(n: int) -> subprocess.CompletedProcess[str]:
        command = [FLOWERBOX, "shell", "--budget", str(budgets[n]), "--", "python3", "-c"]
        return as_user(host_user, [*command, CLIENT], cwd=folders[n], env=env)

    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(box, range(2)))
    outputs = []
    for result in done:
        assert result.returncode == 0, result.stderr[-3000:]
        outputs.append(json.loads(result.stdout.strip().splitlines()[-1]))

    runs = dict(compose_broker.query("SELECT token_sha256, run_id FROM runs"))
    run_of = [runs[output["key"]] for output in outputs]  # each held its own run's token
    assert len(set(run_of)) == 2
    assert outputs[0]["statuses"] == [200, 200, 403] and outputs[1]["statuses"] == [200] * CALLS
    assert {output["forged"] for output in outputs} == {401}
    assert not any(output["inspected"] for output in outputs)
    assert all(revoked for (revoked,) in compose_broker.query("SELECT revoked_at FROM runs"))
    assert real_api.saw_key(REAL) and len(real_api.requests) == 2 + CALLS

    down = compose_broker.compose("down")
    assert down.returncode == 0, down.stderr[-3000:]
    assert docker_client.containers.list(all=True, filters=label) == []
    for n, run_id in enumerate(run_of):  # the ledger outlived the broker's container
        rows = compose_broker.query(
            f"SELECT status FROM requests WHERE run_id = '{run_id}' ORDER BY id"  # noqa: S608
        )
        assert [status for (status,) in rows] == [*outputs[n]["statuses"], 401]
    assert (compose_broker.folder / "ledger.db").stat().st_uid == host_user[1]
