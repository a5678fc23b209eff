"""`flowerbox selftest --on kube`: the probes as a Job with the agent's own Pod security and
network policy, and its negative control; both valid manifests, both submitted as rendered."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from flowerbox.box.spec import BoxSpec
from flowerbox.cli.app import app
from flowerbox.kube.pod import Manifest
from flowerbox.kube.render import run_manifests
from flowerbox.kube.selftest import TARGET, probe_manifests, probe_spec
from flowerbox.kube.target import NO_REPO, KubeTarget
from flowerbox.wire import PROBES_MODULE
from tests.kube.conftest import IMAGE
from tests.kube.fakeapi import FakeKube
from tests.kube.test_render import VERSIONS

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
    args = ["selftest", "--on", "kube", "--runtime-class", "kata"]
    done = runner.invoke(app, [*args, *(["--negative-control"] if negative else [])])
    assert done.exit_code == 0, done.output
    run_id = done.stdout.strip()
    assert f"flowerbox logs {run_id} -f --on kube" in done.stderr
    token, *sent = kubeconfig.created()
    assert token["kind"] == "Secret"
    job = sent[-1]
    assert job["spec"]["template"]["spec"]["runtimeClassName"] == "kata"
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    token_value = command[command.index("--token") + 1]
    spec = probe_spec(image="flowerbox:dev", negative=negative, token=token_value)
    assert spec.run_id == run_id
    target = KubeTarget(repo=NO_REPO, runtime_class="kata")
    assert sent == probe_manifests(spec, target, negative=negative)
    assert yaml.safe_dump(sent)  # plain data, as render prints
