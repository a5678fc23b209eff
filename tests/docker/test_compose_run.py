"""compose.yaml run for real with docker-compose 1.29: the team-repository form of the box.

Only the gateway needs a network. Here the "real" API is the fake one on the host's loopback,
so a test override puts the gateway on the host network; with every service on a network of
its own choosing, compose creates no bridge (no private-range address appears).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from docker import DockerClient

from flower.testing import Always, FakeAPI, text
from tests.docker.e2e import REAL

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
# Debian bookworm has compose 1.29 only as a Debian package (v2 comes with trixie), and PyPI's
# 1.29 does not install beside docker>=7 on Python 3.11: root installs it, .ci/run does.
NO_COMPOSE = "docker-compose is not installed: `sudo apt-get install docker-compose` (.ci/run does)"
# The override docs/deployment.md gives for an upstream on the host's loopback (the fake API).
[HOST_GATEWAY] = [
    textwrap.dedent(block)
    for block in re.findall(
        r"```yaml\n(.*?)```", (ROOT / "docs" / "deployment.md").read_text(), re.DOTALL
    )
    if "network_mode: host" in block
]


def test_compose_runs_flower_once_through_its_gateway(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
    tmp_path: Path,
) -> None:
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.skip(NO_COMPOSE)
    _, uid, gid = host_user
    real_api.script = Always(text("hi from compose"))
    for folder in ("runs", "runs/sockets", "runs/home"):
        (user_workspace / folder).mkdir(exist_ok=True)
        os.chown(user_workspace / folder, uid, gid)
    # compose's default: the file `flower setup` writes, in the home of whoever runs compose
    # (outside the workspace, which the agent's container mounts whole).
    home = tmp_path / "home"
    credentials = home / ".config" / "flower" / ".env"
    credentials.parent.mkdir(parents=True)
    credentials.write_text(f"ANTHROPIC_API_KEY={REAL}\nANTHROPIC_BASE_URL={real_api.url}\n")
    credentials.chmod(0o600)
    os.chown(credentials, uid, gid)
    override = tmp_path / "host-gateway.yaml"
    override.write_text(HOST_GATEWAY)
    env = {"PATH": "/usr/bin:/bin", "PWD": str(user_workspace), "UID": str(uid), "GID": str(gid)}
    env["HOME"] = str(home)
    env["FLOWERBOX_IMAGE"] = flowerbox_image
    project = ["-p", f"fbx{os.getpid()}", "--project-directory", str(user_workspace)]
    base = [compose, "-f", str(COMPOSE), "-f", str(override), *project]
    networks_before = {n.name for n in docker_client.networks.list()}
    try:
        done = subprocess.run(
            [*base, "run", "--rm", "flower", "once", "say hi"],
            env=env,
            cwd=user_workspace,
            capture_output=True,
            text=True,
            timeout=300,
        )
        networks_during = {n.name for n in docker_client.networks.list()}
        project_label = {"label": f"com.docker.compose.project=fbx{os.getpid()}"}
        left_up = [c.name for c in docker_client.containers.list(filters=project_label)]
    finally:
        subprocess.run(
            [*base, "down"], env=env, cwd=user_workspace, capture_output=True, timeout=120
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "hi from compose" in done.stdout
    # `run --rm` leaves the gateway up (why the docs say `down`); `down` stops it.
    assert [name for name in left_up if "gateway" in name] and len(left_up) == 1
    assert docker_client.containers.list(all=True, filters=project_label) == []
    assert real_api.saw_key(REAL) and not real_api.saw_key("sk-flowerbox-placeholder")
    assert networks_during == networks_before  # compose made no network (no bridge address)
    assert (user_workspace / "runs" / "manifest.json").stat().st_uid == uid
    assert REAL not in (user_workspace / "runs" / "gateway-usage.json").read_text()
