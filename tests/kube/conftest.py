"""One run on a cluster, rendered: the spec, the target and every manifest a user reviews."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowerbox.box.spec import BoxSpec
from flowerbox.kube.pod import Manifest
from flowerbox.kube.render import (
    broker_manifests,
    deliver_manifests,
    drop_manifests,
    read_manifests,
    run_manifests,
)
from flowerbox.kube.target import KubeTarget, kube_spec
from tests.kube.fakeapi import FakeKube, fake_kube, write_kubeconfig

RUN_ID = "20261202-023500-abc123"
IMAGE = "registry.example/flowerbox:0.2.0"
DROP = "01764641700000000000-kube-0a1b.json"


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
        *drop_manifests(spec, target, {"answer": "q1", "text": "yes"}, file=DROP, tag="0a1b"),
        *read_manifests(spec, target, tag="0a1c", limit=1024),
    ]


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKube]:
    """A fake API server, and KUBECONFIG naming it as the current context."""
    with fake_kube() as fake:
        monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", fake)))
        yield fake
