"""A run on a real cluster, end to end: create, watch to completion, logs, resume, clean up.

It runs wherever a kubeconfig names a reachable cluster with the broker applied in
FLOWERBOX_NAMESPACE (default flowerbox; docs/deployment.md, Kubernetes) and FLOWERBOX_KUBE_REPO
names an https repository the broker may fetch; FLOWERBOX_IMAGE is the image the nodes can
pull. Anywhere else it is skipped with the reason. It has never run in this project's CI,
which reaches no cluster (docs/deployment.md says exactly what has run where).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowerbox.errors import ClusterError, FlowerboxError
from flowerbox.kube.cluster import Cluster
from flowerbox.kube.render import run_manifests
from flowerbox.kube.target import BROKER, KubeTarget, flower_command, kube_spec

NAMESPACE = os.environ.get("FLOWERBOX_NAMESPACE", "flowerbox")
REPO = os.environ.get("FLOWERBOX_KUBE_REPO", "")
IMAGE = os.environ.get("FLOWERBOX_IMAGE", "flowerbox:dev")
RUN_S = 900


def _reachable() -> Cluster:
    config = Path(os.environ.get("KUBECONFIG") or Path.home() / ".kube" / "config")
    if not config.exists():
        pytest.skip(f"no kubeconfig at {config}: the cluster test needs a cluster")
    if not REPO:
        pytest.skip("FLOWERBOX_KUBE_REPO is not set: the https repository a run works on")
    try:
        cluster = Cluster.connect(context=None, namespace=NAMESPACE)
        cluster.core.read_namespaced_service(BROKER, NAMESPACE)
    except ClusterError as exc:
        pytest.skip(f"no usable cluster: {exc}")
    except Exception as exc:  # the client's ApiException or a connection error alike
        pytest.skip(f"no broker Service {BROKER} in namespace {NAMESPACE}: {exc}")
    return cluster


@pytest.fixture
def cluster() -> Cluster:
    return _reachable()


@pytest.fixture
def run_id(cluster: Cluster) -> Iterator[str]:
    from flower import new_run_id  # lazy: only this test names a run

    run_id = new_run_id()
    yield run_id
    with contextlib.suppress(FlowerboxError):  # a run that ended has no Job to stop
        cluster.stop(run_id)
    cluster.remove(run_id)


def test_a_run_on_the_cluster(cluster: Cluster, run_id: str) -> None:
    target = KubeTarget(repo=REPO, namespace=NAMESPACE)
    spec = kube_spec(run_id, image=IMAGE, command=flower_command(["go", "say hello"]))
    created = cluster.start(spec, run_manifests(spec, target), repo=target.repo)
    assert f"Job/flowerbox-{run_id}" in created
    assert run_id in [status.run_id for status in cluster.runs()]
    ended = cluster.wait(run_id, timeout_s=RUN_S)
    assert ended.state == "succeeded"
    assert b"".join(cluster.logs(run_id, follow=False))
    assert cluster.resume(run_id, target) == [f"Job/flowerbox-{run_id}-1"]
    assert cluster.wait(run_id, timeout_s=RUN_S).state == "succeeded"
    removed = cluster.remove(run_id)
    assert f"PersistentVolumeClaim/flowerbox-{run_id}" in removed
