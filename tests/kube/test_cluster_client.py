"""flowerbox.kube.cluster through the official client, end to end up to the wire: a fake API
server on loopback receives exactly what `flowerbox kube render` prints, and `ps`, `logs`,
`stop` and `resume` are answered from what it holds."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from flowerbox.box.spec import BoxSpec
from flowerbox.errors import ClusterError, RunError
from flowerbox.kube.cluster import Cluster
from flowerbox.kube.pod import RUN_LABEL as RUN
from flowerbox.kube.pod import Manifest
from flowerbox.kube.render import (
    broker_manifests,
    drop_manifests,
    read_manifests,
    run_manifests,
)
from flowerbox.kube.target import KubeTarget
from flowerbox.runs.records import MAX_ASKS_BYTES
from tests.kube.conftest import IMAGE
from tests.kube.fakeapi import FakeKube, fake_kube


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    with fake_kube() as fake:
        yield fake


@pytest.fixture
def cluster(kube: FakeKube, target: KubeTarget) -> Cluster:
    configuration = client.Configuration(host=kube.url)
    return Cluster(client.ApiClient(configuration), namespace=target.namespace)


def test_start_sends_exactly_the_rendered_manifests(
    cluster: Cluster, kube: FakeKube, spec: BoxSpec, target: KubeTarget
) -> None:
    created = cluster.start(spec, run_manifests(spec, target))
    token, *sent = kube.created()
    assert sent == run_manifests(spec, target)
    assert created == [f"{m['kind']}/{m['metadata']['name']}" for m in sent]
    assert token["kind"] == "Secret" and len(token["stringData"]["token"]) >= 32
    assert token["metadata"]["name"] == f"flowerbox-{spec.run_id}-token"
    paths = [r.path for r in kube.requests]
    assert paths == [
        f"/api/v1/namespaces/{target.namespace}/secrets",
        f"/api/v1/namespaces/{target.namespace}/persistentvolumeclaims",
        f"/apis/networking.k8s.io/v1/namespaces/{target.namespace}/networkpolicies",
        f"/apis/batch/v1/namespaces/{target.namespace}/jobs",
    ]


def test_the_broker_applied_twice_is_left_as_it_is(
    cluster: Cluster, kube: FakeKube, target: KubeTarget
) -> None:
    broker = broker_manifests(target, image=IMAGE)
    assert len(cluster.apply(broker)) == len(broker)
    assert cluster.apply(broker) == []
    assert kube.created()[: len(broker)] == broker


def test_a_run_started_twice_is_refused(
    cluster: Cluster, spec: BoxSpec, target: KubeTarget
) -> None:
    cluster.start(spec, run_manifests(spec, target))
    with pytest.raises(ClusterError, match="409") as refused:
        cluster.start(spec, run_manifests(spec, target))
    assert refused.value.status == 409


def test_ps_logs_stop_resume(
    cluster: Cluster, kube: FakeKube, spec: BoxSpec, target: KubeTarget
) -> None:
    cluster.start(spec, run_manifests(spec, target))
    (status,) = cluster.runs()
    assert (status.run_id, status.state) == (spec.run_id, "running")
    pod = f"flowerbox-{spec.run_id}-x1y2z"
    labels = {"flowerbox.dev/run-id": spec.run_id}
    containers = [{"name": "agent", "image": IMAGE}]
    kube.objects[("pods", pod)] = {
        "metadata": {"name": pod, "labels": labels, "creationTimestamp": "2026-12-02T10:15:00Z"},
        "spec": {"containers": containers},
    }
    drop = f"flowerbox-{spec.run_id}-drop-0a1b-zz"  # newer, but no agent in it
    kube.objects[("pods", drop)] = {
        "metadata": {"name": drop, "labels": labels, "creationTimestamp": "2026-12-02T10:16:00Z"},
        "spec": {"containers": [{"name": "drop", "image": IMAGE}]},
    }
    kube.logs[pod] = b"step 1 done\nstep 2 done\n"
    assert b"".join(cluster.logs(spec.run_id, follow=True)) == b"step 1 done\nstep 2 done\n"
    log = kube.requests[-1]
    assert log.path.endswith(f"/pods/{pod}/log")
    assert log.query["follow"] == ["true"] and log.query["container"] == ["agent"]

    with pytest.raises(RunError, match="仍在运行"):
        cluster.resume(spec.run_id, target)
    assert cluster.stop(spec.run_id) == [f"flowerbox-{spec.run_id}"]
    delete = kube.requests[-1]
    assert delete.method == "DELETE" and delete.query["propagationPolicy"] == ["Background"]
    assert ("persistentvolumeclaims", f"flowerbox-{spec.run_id}") in kube.objects

    created = cluster.resume(spec.run_id, target)
    assert created == [f"Job/flowerbox-{spec.run_id}-1"]  # the claim and policy are kept
    job = kube.created()[-1]
    assert job == run_manifests(spec, target, name=f"flowerbox-{spec.run_id}-1")[2]
    assert job["spec"]["template"]["spec"]["containers"][0]["command"][-3:] == list(spec.command)


def test_a_finished_job_shows_so(
    cluster: Cluster, kube: FakeKube, spec: BoxSpec, target: KubeTarget
) -> None:
    cluster.start(spec, run_manifests(spec, target))
    kube.objects[("jobs", f"flowerbox-{spec.run_id}")]["status"] = {"succeeded": 1}
    assert [s.state for s in cluster.runs()] == ["succeeded"]


def test_unknown_runs_are_refused(cluster: Cluster) -> None:
    with pytest.raises(RunError, match="没有 Pod"):
        list(cluster.logs("20260101-000000-ffffff", follow=False))
    with pytest.raises(RunError, match="没有运行 .* 的 Job"):
        cluster.stop("20260101-000000-ffffff")
    with pytest.raises(ClusterError, match="404"):
        cluster.resume("20260101-000000-ffffff", KubeTarget(repo="https://git.example/a.git"))


def test_no_kubeconfig_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(ClusterError, match="设置 KUBECONFIG 或用 --context NAME"):
        Cluster.connect(context=None, namespace="flowerbox")


def test_wait_returns_once_the_job_ended_and_remove_leaves_nothing(
    cluster: Cluster, kube: FakeKube, spec: BoxSpec, target: KubeTarget
) -> None:
    cluster.start(spec, run_manifests(spec, target))
    with pytest.raises(ClusterError, match="秒内没有结束"):
        cluster.wait(spec.run_id, timeout_s=0.2, poll_s=0.05)
    with pytest.raises(RunError, match="仍在运行"):
        cluster.remove(spec.run_id)
    kube.objects[("jobs", f"flowerbox-{spec.run_id}")]["status"] = {"failed": 1}
    assert cluster.wait(spec.run_id, timeout_s=5, poll_s=0.05).state == "failed"
    removed = cluster.remove(spec.run_id)
    assert len(removed) == 4 and kube.objects == {}
    assert cluster.remove(spec.run_id) == []  # nothing left, nothing refused


def test_answer_and_send_drop_a_file_into_the_inbox_on_the_agents_node(
    cluster: Cluster, kube: FakeKube, spec: BoxSpec, target: KubeTarget
) -> None:
    with pytest.raises(ClusterError, match="404"):  # no such run
        cluster.drop(spec.run_id, target, {"send": "hi"})
    cluster.start(spec, run_manifests(spec, target))
    made = cluster.drop(spec.run_id, target, {"answer": "q1", "text": "use the v2 API"})
    assert made.startswith(f"Job/flowerbox-{spec.run_id}-drop-")
    job = kube.created()[-1]
    pod = job["spec"]["template"]["spec"]
    (write,) = pod["containers"]
    inbox, payload, file = write["command"][3:]
    assert inbox == f"{spec.run_dir}/inbox" and file.endswith(".json") and file[0] != "."
    assert json.loads(payload) == {"answer": "q1", "text": "use the v2 API"}
    assert write["env"] == [] and write["securityContext"]["runAsNonRoot"] is True
    (near,) = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert near["labelSelector"]["matchLabels"] == {"flowerbox.dev/run-id": spec.run_id}
    kube.objects[("jobs", f"flowerbox-{spec.run_id}")]["status"] = {"succeeded": 1}
    kube.objects.pop(("jobs", made.split("/")[1]))
    with pytest.raises(RunError, match="没有在运行"):
        cluster.drop(spec.run_id, target, {"send": "too late"})


def test_the_drop_script_writes_under_a_dot_name_then_renames(
    spec: BoxSpec, target: KubeTarget, tmp_path: Path
) -> None:
    """The drop Job's own shell line, run here: the file flower's watcher reads, whole."""
    (job,) = drop_manifests(spec, target, {"send": 'it\'s "quoted" $HOME'}, file="1.json", tag="t")
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    inbox = tmp_path / "runs" / "inbox"
    subprocess.run([*command[:3], str(inbox), *command[4:]], check=True)
    assert [p.name for p in inbox.iterdir()] == ["1.json"]
    assert json.loads((inbox / "1.json").read_text()) == {"send": 'it\'s "quoted" $HOME'}


def read_job(spec: BoxSpec, target: KubeTarget, limit: int = 64) -> Manifest:
    (job,) = read_manifests(spec, target, tag="0a1c", limit=limit)
    return job


def test_the_read_job_reads_the_claim_read_only_on_the_agents_node(
    spec: BoxSpec, target: KubeTarget
) -> None:
    job = read_job(spec, target)
    assert job["metadata"]["name"] == f"flowerbox-{spec.run_id}-read-0a1c"
    pod = job["spec"]["template"]["spec"]
    (read,) = pod["containers"]
    assert all(mount["readOnly"] for mount in read["volumeMounts"])
    assert read["env"] == [] and read["securityContext"]["readOnlyRootFilesystem"] is True
    assert (
        pod["securityContext"]
        == run_manifests(spec, target)[2]["spec"]["template"]["spec"]["securityContext"]
    )
    (near,) = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert near["labelSelector"]["matchLabels"] == {"flowerbox.dev/run-id": spec.run_id}


def run_read(job: Manifest, asks: Path) -> bytes:
    """The read Job's own shell line, run here on `asks` in place of the claim's asks.json."""
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    done = subprocess.run([*command[:3], str(asks), *command[4:]], capture_output=True, timeout=10)
    assert done.returncode == 0
    return done.stdout


def test_the_read_line_prints_a_regular_file_and_nothing_else(
    spec: BoxSpec, target: KubeTarget, tmp_path: Path
) -> None:
    header = f"flowerbox-asks {spec.run_id} 0a1c\n".encode()
    job = read_job(spec, target, limit=64)
    asks = tmp_path / "asks.json"
    assert run_read(job, asks) == header  # no file: no question
    asks.write_text('[{"id": "q1", "question": "which API?"}]')
    assert run_read(job, asks) == header + asks.read_bytes()
    asks.write_bytes(b"x" * 500)
    assert run_read(job, asks) == header + b"x" * 65  # cut one past the limit: the host sees it
    secret = tmp_path / "secret"
    secret.write_text('[{"id": "q9", "question": "from a file the agent linked"}]')
    asks.unlink()
    asks.symlink_to(secret)
    assert run_read(job, asks) == header
    asks.unlink()
    os.mkfifo(asks)
    assert run_read(job, asks) == header  # not opened: it would block


def test_questions_are_read_beside_each_running_run(
    cluster: Cluster, kube: FakeKube, spec: BoxSpec, target: KubeTarget
) -> None:
    cluster.start(spec, run_manifests(spec, target))
    question = {"id": "q1", "question": "which API?", "options": ["v1", "v2"]}

    def ran(job: Manifest) -> bytes | None:
        command = job["spec"]["template"]["spec"]["containers"][0]["command"]
        if job["metadata"]["name"].startswith(f"flowerbox-{spec.run_id}-read-"):
            return f"{command[4]}\n{json.dumps([question])}".encode()
        return None

    kube.run = ran
    assert cluster.questions([spec.run_id], target, timeout_s=5, poll_s=0.05) == {
        spec.run_id: [question]
    }
    read = kube.created()[-1]
    assert (
        read
        == read_manifests(
            spec, target, tag=read["metadata"]["name"].rsplit("-", 1)[1], limit=MAX_ASKS_BYTES
        )[0]
    )
    assert [kind for kind, _ in kube.objects if kind == "jobs"] == ["jobs"]  # the read is gone
    kube.run = lambda job: None  # a read that never ends: unknown, and deleted all the same
    assert cluster.questions([spec.run_id], target, timeout_s=0.2, poll_s=0.05) == {
        spec.run_id: "its read Job did not end within 0 s"
    }
    assert [kind for kind, _ in kube.objects if kind == "jobs"] == ["jobs"]
    del kube.objects[("persistentvolumeclaims", f"flowerbox-{spec.run_id}")]
    (why,) = cluster.questions([spec.run_id], target, timeout_s=5, poll_s=0.05).values()
    assert isinstance(why, str) and "404" in why  # the others' questions are still read


def test_resume_names_a_new_job_past_the_ones_there_whatever_their_ttl_removed(
    cluster: Cluster, kube: FakeKube, spec: BoxSpec, target: KubeTarget
) -> None:
    kube.run = lambda job: b"done\n"  # every Job ends at once, and stays (its TTL is a day)
    cluster.start(spec, run_manifests(spec, target))
    # a drop or read Job of the run is no resume: it does not count
    kube.objects[("jobs", f"flowerbox-{spec.run_id}-drop-0a1b")] = {
        "metadata": {"name": f"flowerbox-{spec.run_id}-drop-0a1b", "labels": {RUN: spec.run_id}},
        "status": {"succeeded": 1},
    }
    assert cluster.resume(spec.run_id, target) == [f"Job/flowerbox-{spec.run_id}-1"]
    assert cluster.resume(spec.run_id, target) == [f"Job/flowerbox-{spec.run_id}-2"]
    del kube.objects[("jobs", f"flowerbox-{spec.run_id}-1")]  # its TTL: gone first
    assert cluster.resume(spec.run_id, target) == [f"Job/flowerbox-{spec.run_id}-3"]


def test_the_token_secret_tells_the_broker_the_runs_budget_and_allowlist(
    cluster: Cluster, kube: FakeKube, spec: BoxSpec, target: KubeTarget
) -> None:
    """The broker learns a run from its token Secret alone (flowerbox.broker.tokens): the
    run id from its label, the budget, egress allowlist, repository (its git relay's) and
    image (its note's) from its annotations."""
    budgeted = dataclasses.replace(spec, budget_usd=2.5, allow=("pypi.org", "github.com"))
    cluster.start(budgeted, run_manifests(budgeted, target), repo=target.repo)
    token = kube.created()[0]
    assert token["metadata"]["labels"] == {
        "flowerbox.dev/run-id": spec.run_id,
        "flowerbox.dev/role": "token",
        "app.kubernetes.io/part-of": "flowerbox",
    }
    assert token["metadata"]["annotations"] == {
        "flowerbox.dev/budget-usd": "2.5",
        "flowerbox.dev/allow": '["pypi.org", "github.com"]',
        "flowerbox.dev/image": spec.image,
        "flowerbox.dev/repo": target.repo,
        "flowerbox.dev/deliver-ref": f"refs/flowerbox/{spec.run_id}",
    }
    other = dataclasses.replace(spec, run_id="20261202-023500-def456")
    cluster.start(other, run_manifests(other, target))  # a self-test's: no repository
    assert kube.created()[4]["metadata"]["annotations"] == {
        "flowerbox.dev/allow": "[]",
        "flowerbox.dev/image": spec.image,
        "flowerbox.dev/deliver-ref": f"refs/flowerbox/{other.run_id}",
    }
