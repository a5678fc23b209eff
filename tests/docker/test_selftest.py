"""`flowerbox selftest` on a real engine, as the unprivileged e2e user: every probe and every
host-boundary check PASSes in the box a run gets (the attacks planted from inside it, the
host's own code run against them, the workspace left as it was); every probe FAILs in the
all-weak negative control (and of the host-boundary checks, the one a box can break); and in
each variant of selftest.controls, which breaks one property, exactly that property's probes
FAIL while all the others still PASS. So no probe is a check that cannot fail, and none fails for a
neighbour's weakness. Every target is on this machine (the probe server on the host's
loopback, `.invalid` names, route lookups that send nothing); the network ways out the
variants open are the host's network, to that loopback, and a namespace this test makes
itself on loopback-range addresses (never a bridge: its addresses are private-range)."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker import DockerClient  # noqa: TID251 - these tests inspect the engine's containers

from flowerbox.selftest.controls import ALL_WEAK_HOST_FAILS, JOINED, VARIANTS, control_named
from flowerbox.selftest.probes import PROBES, ROUTE_V6
from flowerbox.selftest.verdicts import HOST_CHECKS
from flowerbox.wire import SURVIVOR_LABEL
from tests.docker.e2e import FLOWERBOX, as_user, home_of, state_of

pytestmark = pytest.mark.docker


def selftest(
    user: tuple[str, int, int], workspace: Path, image: str, runtime: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, object]]]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home_of(user)),
        "FLOWERBOX_IMAGE": image,
        # A loopback upstream, as the other engine tests' runs have (the fake API): the gateway
        # then takes the host's network, as a run's would. A real API's gateway would take a
        # bridge, which this engine does not have (no private-range traffic).
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    }
    command = [FLOWERBOX, "selftest", "--json", "--runtime", runtime, *args]
    done = as_user(user, command, cwd=workspace, env=env)
    verdicts = {}
    for line in done.stdout.splitlines():
        data = json.loads(line)
        verdicts[data["probe"]] = data
    sections = [v["section"] for v in verdicts.values()]
    assert sections == ["box"] * len(PROBES) + ["host boundary"] * len(HOST_CHECKS), sections
    return done, verdicts


EVERY = [*PROBES, *HOST_CHECKS]


def contents(workspace: Path) -> dict[str, tuple[int, int]]:
    """Every path in the workspace and in its .git (mode and size; no link followed), but
    what prepare() makes for any run (runs/home) and git's index (a `git status` refreshes it)."""
    found = {}
    for path in [workspace, *workspace.rglob("*")]:
        name = str(path.relative_to(workspace))
        if name not in ("runs", "runs/home", ".git/index"):
            info = path.lstat()
            found[name] = (info.st_mode, info.st_size if not path.is_dir() else 0)
    return found


def left_in_tmp(verdicts: dict[str, dict[str, object]]) -> list[str]:
    """This self-test's own files in the host's /tmp (markers, the folder outside), found by
    its token, which the forged run's id ends with."""
    [start] = re.findall(r"20000101-000000-([0-9a-f]{6})", str(verdicts["forged_record"]["why"]))
    found = [*Path("/tmp").glob(f"fbx-selftest-{start}*")]
    return [p.name for p in found + [*Path("/tmp").glob(f"fbx-selftest-outside-{start}*")]]


def failed(verdicts: dict[str, dict[str, object]]) -> dict[str, str]:
    return {name: str(v["why"]) for name, v in verdicts.items() if not v["ok"]}


def leftovers(
    client: DockerClient, workspace: Path, verdicts: dict[str, dict[str, object]]
) -> list[str]:
    """This self-test's containers still on the engine: its box (by its workspace's label) and
    any survivor its verdict names (other engineers' boxes may run on the same engine)."""
    label = f"dev.flower.box.workspace={workspace}"
    found = [c.name for c in client.containers.list(all=True, filters={"label": label})]
    named = re.findall(r"容器 (flowerbox-survivor-[\w-]+)", str(verdicts["survivor"]["why"]))
    survivors = client.containers.list(all=True, filters={"label": SURVIVOR_LABEL})
    return found + [c.name for c in survivors if c.name in named]


def host_has_ipv6_route() -> bool:
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(ROUTE_V6)  # a route lookup: no packet is sent
        except OSError:
            return False
    return True


@pytest.fixture
def workspace(user_workspace: Path, host_user: tuple[str, int, int]) -> Path:
    """A git workspace with a protected path of its own below a folder (`deploy/run.sh`), so
    the parent probe has a folder besides `.git` to try."""
    (user_workspace / "deploy").mkdir()
    (user_workspace / "deploy" / "run.sh").write_text("echo deploy\n")
    (user_workspace / ".flowerbox").mkdir()
    (user_workspace / ".flowerbox" / "config.toml").write_text('protect = ["deploy/run.sh"]\n')
    for path in ("deploy", "deploy/run.sh", ".flowerbox", ".flowerbox/config.toml"):
        os.chown(user_workspace / path, host_user[1], host_user[2])
    return user_workspace


# What the host sees of the box's FIFOs: refused by the host's code (runc), or none at all
# (gVisor keeps the FIFOs it makes in its own kernel); and the kernel the probe names.
FIFOS = {
    "runc": "事件文件和网关计量文件处的 FIFO：被拒绝",
    "runsc": "盒子建了它的 FIFO，但主机上一个也没有",
}
KERNEL = {
    "runc": "主机的内核（runc，如所要求",
    "runsc": "平台）：主机以 'runsc-sandbox' 运行盒子",  # gVisor（P 平台）
}
CHINESE = re.compile("[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def test_every_probe_passes_in_the_box_a_run_gets(
    host_user: tuple[str, int, int],
    workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
    box_runtime: str,
) -> None:
    hooks_before = sorted(p.name for p in (workspace / ".git" / "hooks").iterdir())
    before = contents(workspace)
    done, verdicts = selftest(host_user, workspace, flowerbox_image, box_runtime)
    assert list(verdicts) == EVERY, done.stderr[-2000:]
    assert failed(verdicts) == {} and done.returncode == 0, done.stderr[-2000:]
    assert f"{len(PROBES)} 个探针，{len(HOST_CHECKS)} 项主机边界检查" in done.stderr  # zh
    english = {name: v["why"] for name, v in verdicts.items() if not CHINESE.search(str(v["why"]))}
    assert english == {}, "every verdict says why in the run's language (the suite's: zh)"
    # The attacks were planted from inside (else a check FAILs: "not planted") and the host's
    # code ignored each; afterwards the workspace is as it was, nothing of it left in /tmp.
    for check, words in {
        "dotenv_redirect": "一个把密钥发往探针服务器的 .env",
        "forged_record": "对主机而言不是运行",
        "linked_runs_files": "作为链接被拒绝",
        "fifo_runs_files": FIFOS[box_runtime],
        "git_hook_redirect": "你的 `git status` 没有运行钩子",
        "kernel": KERNEL[box_runtime],
    }.items():
        assert words in str(verdicts[check]["why"]), verdicts[check]
    assert contents(workspace) == before
    assert left_in_tmp(verdicts) == []
    # The folders above protected paths and .git (the box's own) cannot be moved; what the box
    # planted in its .git stayed there.
    assert verdicts["protected_parents"]["why"] == "未被改名：.git, deploy"
    assert "不在你的仓库里" in str(verdicts["git_redirects"]["why"])
    assert f"uid {host_user[1]}，gid {host_user[2]}，没有其他组" in str(verdicts["identity"]["why"])
    # The box is a run's: the workbench of an isolated run is mounted (and says so).
    assert f"{workspace.parent}/.flower-{workspace.name}" in str(verdicts["read_only_root"]["why"])
    assert "CONNECT 和普通 HTTP 都得到 403，日志记为 deny" in str(
        verdicts["proxy_denied_name"]["why"]
    )
    name = str(verdicts["proxy_denied_name"]["why"]).split("：")[0]  # this run's own
    logs = (state_of(host_user) / "runs").glob("*/gateway/egress.jsonl")
    [egress] = [path for path in logs if name in path.read_text()]
    decisions = [json.loads(line) for line in egress.read_text().splitlines()]
    assert decisions and {entry["decision"] for entry in decisions} == {"deny"}
    assert sorted(p.name for p in (workspace / ".git" / "hooks").iterdir()) == hooks_before
    assert not (workspace / ".git" / "commondir").exists()  # the host removed the plant
    assert leftovers(docker_client, workspace, verdicts) == []


def test_every_probe_fails_in_the_negative_controls_weak_container(
    host_user: tuple[str, int, int],
    workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
    box_runtime: str,
) -> None:
    """The weak container claims gVisor and runs on runc, whatever was asked: so the kernel
    probe FAILs too."""
    before = contents(workspace)
    done, verdicts = selftest(
        host_user, workspace, flowerbox_image, box_runtime, "--negative-control"
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert list(verdicts) == EVERY
    # The IPv6 probe can only be shown to fail on a host that has an IPv6 route (this one has).
    expected = set(PROBES) if host_has_ipv6_route() else set(PROBES) - {"ipv6_route"}
    expected |= ALL_WEAK_HOST_FAILS
    passed = {name: v["why"] for name, v in verdicts.items() if v["ok"] and name in expected}
    assert passed == {}, "these probes cannot fail, so they prove nothing"
    # The other host-boundary checks judge the host's own code, which no box changes: they
    # PASS here too (tests/flowerbox/test_hostboundary.py fails each with a trusting host).
    assert set(HOST_CHECKS) - ALL_WEAK_HOST_FAILS <= {n for n, v in verdicts.items() if v["ok"]}
    assert "运行了盒子的" in str(verdicts["git_hook_redirect"]["why"])
    assert contents(workspace) == before  # what root planted, the user's side removed
    assert left_in_tmp(verdicts) == []
    assert "遗留：容器 flowerbox-survivor-" in str(verdicts["survivor"]["why"])
    assert "到达了主机的环回地址" in str(verdicts["direct_tcp"]["why"])
    assert "未被拒绝" in str(verdicts["proxy_denied_name"]["why"])
    assert "要求的是 runsc，但主机以" in str(verdicts["kernel"]["why"])
    # The survivor it caught was removed afterwards.
    assert leftovers(docker_client, workspace, verdicts) == []


def _run(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def outside_namespace(docker_client: DockerClient, flowerbox_image: str) -> Iterator[str]:
    """A bridge's shape without its private-range addresses: a container's network namespace
    (the box joins it) with a veth pair to a second namespace this test makes, both ends on
    loopback-range addresses (127.77.0.2 and .1, `route_localnet` on) and a default route
    through it. Before it is handed over, a datagram is sent across it, so the way out is real.
    Yields the container's name; removes both namespaces afterwards."""
    if os.geteuid() != 0:
        pytest.skip("a veth pair into a container's network namespace needs root (CI runs as root)")
    tag = secrets.token_hex(3)
    name, netns, inner, outer = f"fbx-st-ns-{tag}", f"fbxst{tag}", f"fbxa{tag}", f"fbxb{tag}"
    helper = docker_client.containers.run(
        flowerbox_image, ["sleep", "600"], network_mode="none", detach=True, name=name
    )
    try:
        helper.reload()
        pid = str(helper.attrs["State"]["Pid"])
        _run("ip", "netns", "add", netns)
        _run("ip", "link", "add", inner, "type", "veth", "peer", "name", outer)
        _run("ip", "link", "set", inner, "netns", pid)
        _run("ip", "link", "set", outer, "netns", netns)
        for enter, device, address in (
            (["nsenter", "-t", pid, "-n"], inner, "127.77.0.2/30"),
            (["ip", "netns", "exec", netns], outer, "127.77.0.1/30"),
        ):
            for key in ("all", device):
                _run(*enter, "sysctl", "-qw", f"net.ipv4.conf.{key}.route_localnet=1")
            _run(*enter, "ip", "addr", "add", address, "dev", device)
            _run(*enter, "ip", "link", "set", device, "up")
        _run("nsenter", "-t", pid, "-n", "ip", "route", "add", "default", "dev", inner)
        receive = (
            "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
            "s.bind(('127.77.0.1', 9999)); s.settimeout(10); print(s.recv(64).decode())"
        )
        receiver = subprocess.Popen(
            ["ip", "netns", "exec", netns, sys.executable, "-c", receive],
            stdout=subprocess.PIPE,
            text=True,
        )
        send = (
            "import socket, time\n"
            "for _ in range(40):\n"
            "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
            f".sendto(b'{tag}', ('127.77.0.1', 9999)); time.sleep(0.05)"
        )
        _run("nsenter", "-t", pid, "-n", sys.executable, "-c", send)
        out, _ = receiver.communicate(timeout=15)
        assert out.strip() == tag, "the test's namespace is not reachable: no way out to test"
        yield name
    finally:
        helper.remove(force=True)
        subprocess.run(["ip", "netns", "del", netns], check=False, capture_output=True)


@pytest.mark.parametrize("variant", [*sorted(VARIANTS), JOINED])
def test_each_broken_property_fails_exactly_its_probes(
    variant: str,
    host_user: tuple[str, int, int],
    workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
    request: pytest.FixtureRequest,
    box_runtime: str,
) -> None:
    """Under runsc, a property gVisor does not take from the engine is broken by leaving it
    (Control.under): the kernel probe FAILs with it."""
    weaken = variant
    if variant == JOINED:  # a namespace of the test's own to join
        weaken = f"{JOINED}:{request.getfixturevalue('outside_namespace')}"
    control = control_named(weaken).under(box_runtime)
    expected = set(control.fails)
    if not host_has_ipv6_route():
        expected.discard("ipv6_route")  # a host network without IPv6 has no IPv6 route out
    done, verdicts = selftest(
        host_user, workspace, flowerbox_image, box_runtime, "--weaken", weaken
    )
    assert list(verdicts) == EVERY, done.stderr[-2000:]
    why = failed(verdicts)
    if variant == "host_network" and "遍历被截断" in why.get("docker_socket", ""):
        # The host's network namespace lists the host's unix sockets (/proc/net/unix): on a
        # developer's machine (desktop sessions, their compose stack) more than the probe tries,
        # and a walk cut short is no clean one. The machine's, not the property's.
        expected.add("docker_socket")
    assert set(why) == expected, (why, done.stderr[-2000:])
    if variant == JOINED:  # seen by the route lookup: the box's 127.0.0.1 is its own there
        assert "内核会把数据报路由出去" in failed(verdicts)["udp"]
    if variant == "users_gitdir":  # and the host removed what reached the user's .git
        assert "到达了你的仓库：出现了 .git/commondir" in failed(verdicts)["git_redirects"]
        assert "你的 `git status` 运行了盒子的" in failed(verdicts)["git_hook_redirect"]
        assert not (workspace / ".git" / "commondir").exists()
        assert not list((workspace / ".git").glob("fbx-hooks-*"))
    assert leftovers(docker_client, workspace, verdicts) == []
