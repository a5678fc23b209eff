"""One run on a cluster, rendered: the spec, the target and every manifest a user reviews."""

from __future__ import annotations

import pytest

from flowerbox.box.spec import BoxSpec
from flowerbox.kube.pod import Manifest
from flowerbox.kube.render import broker_manifests, deliver_manifests, run_manifests
from flowerbox.kube.target import KubeTarget, kube_spec

RUN_ID = "20261202-023500-abc123"
IMAGE = "registry.example/flowerbox:0.2.0"


@pytest.fixture
def target() -> KubeTarget:
    return KubeTarget(repo="https://git.example/team/app.git", ref="main", runtime_class="gvisor")


@pytest.fixture
def spec() -> BoxSpec:
    return kube_spec(RUN_ID, image=IMAGE, command=("flower", "go", "fix the failing test"))


@pytest.fixture
def manifests(spec: BoxSpec, target: KubeTarget) -> list[Manifest]:
    """Everything `flowerbox kube render` can print for a run, and the broker beside it."""
    return [
        *broker_manifests(target, image=IMAGE),
        *run_manifests(spec, target),
        *deliver_manifests(spec, target),
    ]
