"""One BoxSpec, two boxes: the Docker agent's kwargs and the Pod's security fields say the
same thing, field by field (flowerbox.kube.pod's table). A change to either side that the
other does not follow fails here."""

from __future__ import annotations

import dataclasses

import pytest

from flowerbox.box.spec import TMPFS, BoxSpec, Limits, agent_kwargs
from flowerbox.kube.pod import Manifest, quantity
from flowerbox.kube.render import run_manifests
from flowerbox.kube.target import KubeTarget


def agent_pod(spec: BoxSpec, target: KubeTarget) -> Manifest:
    return run_manifests(spec, target)[2]["spec"]["template"]["spec"]


@pytest.mark.parametrize(
    "limits", [Limits(), Limits(pids=64, memory="512m", cpus=0.5), Limits(memory="16g", cpus=4)]
)
def test_the_pod_is_the_docker_box(spec: BoxSpec, target: KubeTarget, limits: Limits) -> None:
    spec = dataclasses.replace(spec, limits=limits)
    docker = agent_kwargs(spec)
    pod = agent_pod(spec, target)
    (agent,) = pod["containers"]
    both = [*pod["initContainers"], agent]
    user, group = (int(n) for n in docker["user"].split(":"))
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (
        user,
        group,
    )
    assert pod["securityContext"]["runAsNonRoot"] is (user != 0)
    for box in both:
        security = box["securityContext"]
        assert (security["runAsUser"], security["runAsGroup"]) == (user, group)
        assert security["readOnlyRootFilesystem"] is docker["read_only"]
        assert security["allowPrivilegeEscalation"] is (
            "no-new-privileges" not in docker["security_opt"]
        )
        assert security["capabilities"]["drop"] == docker["cap_drop"] == ["ALL"]
        assert security["privileged"] is False
        # Docker's default seccomp profile applies unless security_opt says otherwise.
        assert not any(opt.startswith("seccomp") for opt in docker["security_opt"])
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}
        assert box["resources"]["limits"] == {
            "memory": quantity(docker["mem_limit"]),
            "cpu": f"{docker['nano_cpus'] / 1e9:g}",
        }
        assert box["resources"]["requests"] == box["resources"]["limits"]
        assert box["image"] == docker["image"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert docker["memswap_limit"] == docker["mem_limit"]  # no swap; a Pod has none either
    # pids_limit has no Pod field: the kubelet's podPidsLimit holds it (docs/deployment.md).
    assert docker["pids_limit"] == limits.pids


def test_tmp_is_a_memory_volume_of_the_tmpfs_size(spec: BoxSpec, target: KubeTarget) -> None:
    docker = agent_kwargs(spec)
    pod = agent_pod(spec, target)
    assert docker["tmpfs"] == {"/tmp": TMPFS}
    (tmp,) = [v for v in pod["volumes"] if v["name"] == "tmp"]
    size = next(p.split("=")[1] for p in TMPFS.split(",") if p.startswith("size="))
    assert tmp["emptyDir"] == {"medium": "Memory", "sizeLimit": quantity(size)}
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "tmp"]
    assert mount["mountPath"] == "/tmp"


def test_no_network_but_the_way_to_the_model(spec: BoxSpec, target: KubeTarget) -> None:
    """Docker: no network, the relay to the gateway. Pod: the broker's Service by the
    address the kubelet gives (no DNS), a policy that lets nothing else through, no API
    token."""
    docker = agent_kwargs(spec)
    pod = agent_pod(spec, target)
    assert docker["network_mode"] == "none"
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is True  # the broker's address, with no DNS
    broker = "$(FLOWERBOX_BROKER_SERVICE_HOST)"
    assert target.broker == "flowerbox-broker" and target.broker_host == broker
    listed = pod["containers"][0]["env"]
    env = {e["name"]: e.get("value") for e in listed}
    docker_env = docker["environment"]
    assert env["ANTHROPIC_BASE_URL"] == f"http://{broker}:8080"
    # The run's token as the proxy's credential (the CLI sends it as Proxy-Authorization),
    # expanded by the kubelet from the variable listed before it; the API is not proxied.
    assert env["HTTPS_PROXY"] == f"http://run:$(ANTHROPIC_API_KEY)@{broker}:3128"
    assert listed[0]["name"] == "ANTHROPIC_API_KEY"
    assert env["NO_PROXY"] == env["no_proxy"] == f"127.0.0.1,localhost,{broker}"
    same = set(docker_env) - {"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "FLOWER_HEALTH_URL"}
    same -= {"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "NO_PROXY", "no_proxy"}
    assert {name: env[name] for name in same} == {name: docker_env[name] for name in same}
    assert docker_env["ANTHROPIC_API_KEY"] != env["ANTHROPIC_API_KEY"] is None  # from a Secret


def test_the_command_is_the_spec_command(spec: BoxSpec, target: KubeTarget) -> None:
    docker = agent_kwargs(spec)
    agent = agent_pod(spec, target)["containers"][0]
    assert docker["command"][-len(spec.command) :] == list(spec.command)
    assert agent["command"][-len(spec.command) :] == list(spec.command)
    assert agent["workingDir"] == docker["working_dir"]


@pytest.mark.parametrize(("size", "expected"), [("4g", "4Gi"), ("256m", "256Mi"), ("1T", "1Ti")])
def test_docker_sizes_become_quantities(size: str, expected: str) -> None:
    assert quantity(size) == expected
