"""`flowerbox selftest --on kube`: the probes as a Job with the agent's own Pod security and
network policy, and its negative control; both valid manifests, both submitted as rendered;
the probe Pod's log judged on the host, a forged or hostile one passing nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner, Result

from flowerbox.box.spec import BoxSpec
from flowerbox.cli import kube
from flowerbox.cli.app import app
from flowerbox.kube.pod import Manifest
from flowerbox.kube.render import run_manifests
from flowerbox.kube.selftest import MAX_LOG_BYTES, TARGET, probe_manifests, probe_spec
from flowerbox.kube.target import NO_REPO, UID, KubeTarget
from flowerbox.selftest.verdicts import POD_PROBES, ZERO_CAPS
from flowerbox.wire import PROBES_MODULE
from tests.flowerbox.test_selftest import GOOD
from tests.kube.conftest import IMAGE
from tests.kube.fakeapi import FakeKube
from tests.kube.test_render import VERSIONS

pytestmark = (
    pytest.mark.english
)  # the probes' and the count's words, as docs/selftest.md quotes them

runner = CliRunner()


def pod_of(manifests: list[Manifest]) -> Manifest:
    return next(m for m in manifests if m["kind"] == "Job")["spec"]["template"]["spec"]


@pytest.fixture
def probing() -> BoxSpec:
    return probe_spec(image=IMAGE, negative=False)


def test_the_probes_run_in_the_agents_pod(
    probing: BoxSpec, spec: BoxSpec, target: KubeTarget
) -> None:
    probes = pod_of(probe_manifests(probing, target, negative=False))
    agent = pod_of(run_manifests(spec, target))
    assert probes["securityContext"] == agent["securityContext"]
    for field in ("automountServiceAccountToken", "enableServiceLinks", "runtimeClassName"):
        assert probes[field] == agent[field]
    (box,), (run,) = probes["containers"], agent["containers"]
    assert box["securityContext"] == run["securityContext"]
    assert box["resources"] == run["resources"]
    command = box["command"]
    assert command[command.index("--") + 1 :][:3] == ["python", "-m", PROBES_MODULE]
    assert command[command.index("--server") + 1] == TARGET
    (init,) = probes["initContainers"]
    assert init["command"] == ["mkdir", "-p", str(probing.workspace), str(probing.home)]
    assert init["securityContext"] == run["securityContext"]
    kinds = [m["kind"] for m in probe_manifests(probing, target, negative=False)]
    assert kinds == ["PersistentVolumeClaim", "NetworkPolicy", "Job"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("negative", [False, True])
def test_both_jobs_are_valid_manifests(target: KubeTarget, negative: bool, version: str) -> None:
    spec = probe_spec(image=IMAGE, negative=negative)
    for manifest in probe_manifests(spec, target, negative=negative):
        kubernetes_validate.validate(manifest, version, strict=True)


def test_the_negative_control_is_weak_everywhere(target: KubeTarget) -> None:
    weak = probe_spec(image=IMAGE, negative=True)
    manifests = probe_manifests(weak, target, negative=True)
    pod = pod_of(manifests)
    (box,) = pod["containers"]
    assert box["securityContext"]["privileged"] is True
    assert box["securityContext"]["runAsUser"] == 0
    assert box["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
    assert pod["automountServiceAccountToken"] is True
    policy = next(m for m in manifests if m["kind"] == "NetworkPolicy")
    assert policy["spec"]["egress"] == [{}]  # let out, past the namespace's default deny
    assert weak.run_id.startswith("selftest-weak-")


@pytest.mark.parametrize("negative", [False, True])
def test_selftest_on_kube_submits_the_rendered_job(kubeconfig: FakeKube, negative: bool) -> None:
    args = ["--runtime-class", "kata", *(["--negative-control"] if negative else [])]
    done = selftest(kubeconfig, lambda token: printed(POD, token), *args)
    assert done.exit_code == 0, done.output  # the log says every probe held
    token, *sent = kubeconfig.created()
    assert token["kind"] == "Secret"
    job = sent[-1]
    assert job["spec"]["template"]["spec"]["runtimeClassName"] == "kata"
    spec = probe_spec(image="flowerbox:dev", negative=negative, token=token_in(job))
    assert f"waiting for {spec.run_id}" in done.stderr
    target = KubeTarget(repo=NO_REPO, runtime_class="kata")
    assert sent == probe_manifests(spec, target, negative=negative)
    assert yaml.safe_dump(sent)  # plain data, as render prints


# What the probes print in a hardened Pod: the box's shapes, with a Pod's uid, its route out
# (the policy is the boundary), and an emptyDir /tmp that executes.
POD: dict[str, dict[str, Any]] = {name: GOOD[name] for name in POD_PROBES} | {
    "identity": {"uid": UID, "euid": UID, "gid": UID, "groups": [UID]},
    "setuid": {"euid": UID, "CapBnd": ZERO_CAPS, "su": None, "sudo": None},
    "direct_tcp": {"connected": False, "error": "timed out", "route_v4": ""},
    "read_only_root": GOOD["read_only_root"] | {"tmp_exec": True},
}
# What the same probes print in the negative control's Pod (root, privileged, allow-all).
WEAK_POD: dict[str, dict[str, Any]] = POD | {
    "identity": {"uid": 0, "euid": 0, "gid": 0, "groups": [0]},
    "capabilities": {"CapEff": "000001ffffffffff", "CapBnd": "000001ffffffffff"},
    "no_new_privs": {"NoNewPrivs": 0},
    "seccomp": {"Seccomp": 0, "machine": "x86_64", "syscalls": {}},
    "read_only_root": POD["read_only_root"] | {"root_mount": ["rw"], "root_writable": True},
    "direct_tcp": {"connected": True, "error": "", "route_v4": ""},
    "raw_socket": {"opened": ["AF_INET/SOCK_RAW/ICMP", "AF_PACKET/SOCK_RAW"], "errors": {}},
}


def printed(observations: dict[str, dict[str, Any]], token: str) -> bytes:
    """The probe Pod's log: the runtime's own words, then a line per probe."""
    lines = ["relay: nothing to relay"]
    lines += [json.dumps({"probe": name, **o, "token": token}) for name, o in observations.items()]
    return ("\n".join(lines) + "\n").encode()


def token_in(job: Manifest) -> str:
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    return str(command[command.index("--token") + 1])


def selftest(kube: FakeKube, log: Callable[[str], bytes], *extra: str) -> Result:
    """`flowerbox selftest --on kube` against the fake cluster, whose probe Pod prints
    `log(token)`."""
    kube.run = lambda job: log(token_in(job))
    return runner.invoke(app, ["selftest", "--on", "kube", *extra])


def test_a_hardened_pod_passes_and_nothing_is_left(kubeconfig: FakeKube) -> None:
    done = selftest(kubeconfig, lambda token: printed(POD, token))
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [["PASS", name] for name in POD_PROBES]
    assert "the network policy held" in done.stdout
    assert f"{len(POD_PROBES)} probes: {len(POD_PROBES)} PASS, 0 FAIL" in done.stderr
    assert [kind for kind, _ in kubeconfig.objects] == ["pods"]  # the Job's Pod goes with it
    assert kubeconfig.requests[-1].method == "DELETE"


def test_a_failed_probe_fails_the_selftest(kubeconfig: FakeKube) -> None:
    leaky = POD | {"direct_tcp": {"connected": True, "error": "", "route_v4": ""}}
    done = selftest(kubeconfig, lambda token: printed(leaky, token), "--json")
    assert done.exit_code == 1
    verdicts = [json.loads(line) for line in done.stdout.splitlines()]
    assert [v["probe"] for v in verdicts if not v["ok"]] == ["direct_tcp"]
    assert "enforce NetworkPolicy" in verdicts[POD_PROBES.index("direct_tcp")]["why"]


@pytest.mark.parametrize(
    ("forge", "why"),
    [
        (lambda token: printed(POD, "an0ther"), "did not report"),  # another run's lines
        (
            lambda token: b"".join(
                f"PASS  {name:<22} held\n".encode() for name in POD_PROBES
            ),  # a PASS printed by something else in the Pod
            "did not report",
        ),
        (lambda token: printed(POD, token) + printed(POD, token), "reported twice"),
        (lambda token: printed(POD, token) + b"x" * MAX_LOG_BYTES, "over 1048576 bytes"),
        (lambda token: b"\x00\xff{not json\n" * 100, "did not report"),
    ],
)
def test_a_forged_or_hostile_log_passes_nothing(
    kubeconfig: FakeKube, forge: Callable[[str], bytes], why: str
) -> None:
    done = selftest(kubeconfig, forge)
    assert done.exit_code == 1
    lines = done.stdout.splitlines()
    assert len(lines) == len(POD_PROBES)
    assert all(line.startswith("FAIL") and why in line for line in lines), done.stdout


def test_the_negative_control_finds_the_ways_out(kubeconfig: FakeKube) -> None:
    done = selftest(kubeconfig, lambda token: printed(WEAK_POD, token), "--negative-control")
    assert done.exit_code == 1
    failed = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("FAIL")}
    assert failed >= {
        "identity",
        "capabilities",
        "no_new_privs",
        "seccomp",
        "read_only_root",
        "direct_tcp",
        "raw_socket",
    }
    weak = kubeconfig.created()[-1]["spec"]["template"]["spec"]["containers"][0]
    assert weak["securityContext"]["privileged"] is True


def test_a_probe_job_that_never_ends_is_exit_2_and_removed(
    kubeconfig: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube, "PROBES_S", 0.1)
    done = runner.invoke(app, ["selftest", "--on", "kube"])
    assert done.exit_code == 2 and "did not end within" in done.output
    assert not any(kind == "jobs" for kind, _ in kubeconfig.objects)
