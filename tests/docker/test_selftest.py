"""`flowerbox selftest` on a real engine, as the unprivileged e2e user: every probe PASSes in
the box a run gets, and every probe FAILs in the negative control's weak container, so none
of them is a check that cannot fail. Every target is on this machine (the probe server on the
host's loopback, `.invalid` names, route lookups that send nothing)."""

from __future__ import annotations

import json
import pwd
import socket
import subprocess
from pathlib import Path

import pytest
from docker import DockerClient  # noqa: TID251 - these tests inspect the engine's containers

from flowerbox.probes import PROBES, ROUTE_V6, SURVIVOR_LABEL
from tests.docker.e2e import FLOWERBOX, as_user

pytestmark = pytest.mark.docker


def selftest(
    user: tuple[str, int, int], workspace: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, object]]]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": pwd.getpwnam(user[0]).pw_dir,
        "FLOWERBOX_IMAGE": "flowerbox:dev",
    }
    done = as_user(user, [FLOWERBOX, "selftest", "--json", *args], cwd=workspace, env=env)
    verdicts = {}
    for line in done.stdout.splitlines():
        data = json.loads(line)
        verdicts[data["probe"]] = data
    return done, verdicts


def leftovers(client: DockerClient) -> list[str]:
    found = client.containers.list(all=True, filters={"label": SURVIVOR_LABEL})
    found += client.containers.list(all=True, filters={"label": "dev.flower.box"})
    return [container.name for container in found]


def host_has_ipv6_route() -> bool:
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(ROUTE_V6)  # a route lookup: no packet is sent
        except OSError:
            return False
    return True


def test_every_probe_passes_in_the_box_a_run_gets(
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    hooks_before = sorted(p.name for p in (user_workspace / ".git" / "hooks").iterdir())
    done, verdicts = selftest(host_user, user_workspace)
    failed = {name: v["why"] for name, v in verdicts.items() if not v["ok"]}
    assert done.returncode == 0 and failed == {}, (failed, done.stderr[-2000:])
    assert list(verdicts) == list(PROBES)
    assert f"uid {host_user[1]}: yours" in str(verdicts["identity"]["why"])
    assert "403 for CONNECT and plain HTTP, logged deny" in str(
        verdicts["proxy_denied_name"]["why"]
    )
    [egress] = (user_workspace / "runs" / "flowerbox").glob("*/egress.jsonl")
    decisions = [json.loads(line) for line in egress.read_text().splitlines()]
    assert decisions and {entry["decision"] for entry in decisions} == {"deny"}
    assert sorted(p.name for p in (user_workspace / ".git" / "hooks").iterdir()) == hooks_before
    assert leftovers(docker_client) == []


def test_every_probe_fails_in_the_negative_controls_weak_container(
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    done, verdicts = selftest(host_user, user_workspace, "--negative-control")
    assert done.returncode == 1, done.stderr[-2000:]
    assert list(verdicts) == list(PROBES)
    # The IPv6 probe can only be shown to fail on a host that has an IPv6 route (this one has).
    expected = set(PROBES) if host_has_ipv6_route() else set(PROBES) - {"ipv6_route"}
    passed = {name: v["why"] for name, v in verdicts.items() if v["ok"] and name in expected}
    assert passed == {}, "these probes cannot fail, so they prove nothing"
    assert "left behind: container flowerbox-survivor-" in str(verdicts["survivor"]["why"])
    assert "reached the host's loopback" in str(verdicts["direct_tcp"]["why"])
    assert "not refused" in str(verdicts["proxy_denied_name"]["why"])
    assert leftovers(docker_client) == []  # the survivor it caught was removed afterwards
