"""A run on a real cluster, end to end through the command lines a user types (`flowerbox
"ask" --on kube`, `ps`, `logs`, `resume`, `rm` with --on kube): create, watch to completion,
logs, resume, clean up.

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
from typer.testing import CliRunner

from flowerbox.cli.app import app
from flowerbox.errors import ClusterError, FlowerboxError
from flowerbox.kube.cluster import Cluster
from flowerbox.kube.target import BROKER

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


def flowerbox(*args: str) -> str:
    """`flowerbox ARGS... --on kube -n NAMESPACE`, which must succeed; its stdout."""
    done = CliRunner().invoke(app, [*args, "--on", "kube", "--namespace", NAMESPACE])
    assert done.exit_code == 0, done.output
    return done.stdout


@pytest.fixture
def started(cluster: Cluster) -> Iterator[str]:
    """A run started as a user starts one; stopped and removed afterwards, whatever happened."""
    run_id = flowerbox("say hello", "--repo", REPO, "--image", IMAGE).split()[-1]
    yield run_id
    with contextlib.suppress(FlowerboxError):  # a run that ended has no Job to stop
        cluster.stop(run_id)
    cluster.remove(run_id)


def test_a_run_on_the_cluster(cluster: Cluster, started: str) -> None:
    assert started in flowerbox("ps").split()
    assert cluster.wait(started, timeout_s=RUN_S).state == "succeeded"
    assert flowerbox("logs", started)
    assert flowerbox("resume", started).strip() == f"created Job/flowerbox-{started}-1"
    assert cluster.wait(started, timeout_s=RUN_S).state == "succeeded"
    assert f"removed PersistentVolumeClaim/flowerbox-{started}" in flowerbox("rm", started)
