"""The broker's image under the memory attacks, with the Deployment's limits: `flowerbox
broker --listen` in the image, 512 MiB (no swap), one CPU, the Pod's hardening, on the
host's network listening on 127.0.0.1 only (its fake Kubernetes API and upstream are on
loopback too). Before issue 34, the 14th token-less 31 MiB body OOM-killed it (exit 137);
now neither that nor 10,000 idle half-sent heads kill it, and a run is served all along.

The image holds no `kubernetes` client (the `kube` extra), which `--listen` imports to learn
its runs: this test's copy of it (and of its dependencies), from this checkout's venv, is
mounted read-only on PYTHONPATH. The broker's own code is the image's."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flower.testing import FakeAPI
from flowerbox.kube.target import UID
from tests.flowerbox.conftest import REAL_KEY
from tests.flowerbox.flood import MIB, idle_heads, pinned_bodies
from tests.flowerbox.test_broker_tcp import TcpBroker, cluster_brokers

pytestmark = pytest.mark.docker
KUBE_CLIENT = (
    "kubernetes", "google", "yaml", "_yaml", "websocket", "requests_oauthlib", "oauthlib",
    "durationpy", "dateutil", "six", "rsa", "pyasn1", "pyasn1_modules", "cachetools",
)  # fmt: skip


def kube_client(into: Path) -> Path:
    """The official client and what it needs beyond the image (those installed here: some
    are for other clusters' logins), copied into `into`."""
    into.mkdir()
    assert importlib.util.find_spec("kubernetes"), "no client here: pip install 'flowerbox[kube]'"
    for name in KUBE_CLIENT:
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        origin = Path(spec.origin or next(iter(spec.submodule_search_locations or [])))
        source = origin.parent if origin.name == "__init__.py" else origin
        if source.is_dir():
            shutil.copytree(source, into / source.name)
        else:
            shutil.copy2(source, into / source.name)
    return into


class ContainerBroker(TcpBroker):
    """The broker in the image under test (`docker run`, attached: its log is the
    container's, SIGTERM reaches it), its folder mounted at the same path."""

    image = ""
    client = Path()  # kube_client's folder

    @property
    def name(self) -> str:
        return f"flowerbox-flood-{self.root.name[-12:]}-{self.api_port}"

    def command(self, credentials: Path) -> list[str]:
        self.folder.mkdir(exist_ok=True)
        self.folder.chmod(0o777)  # the image's user writes the ledger there
        docker = ["docker", "run", "--rm", "--name", self.name, "--network", "host"]
        docker += ["--memory", "512m", "--memory-swap", "512m", "--cpus", "1"]
        # the image's user, as in a cluster; a developer's own where the suite is not root,
        # who must read the ledger the broker writes 0600 (root reads it either way)
        user = f"{UID}:{UID}" if os.geteuid() == 0 else f"{os.getuid()}:{os.getgid()}"
        docker += ["--user", user, "--read-only", "--tmpfs", "/tmp"]
        docker += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
        docker += ["-e", f"KUBECONFIG={self.root / 'kubeconfig'}", "-e", "HOME=/tmp"]
        docker += ["-v", f"{self.root}:{self.root}", "--label", "dev.flower.test=broker-flood"]
        docker += ["-v", f"{self.client}:/opt/kube-client:ro", "-e", "PYTHONPATH=/opt/kube-client"]
        return [*docker, self.image, "flowerbox", *self.arguments(credentials)]

    def rss_kib(self) -> int:
        """The container's memory as its cgroup counts it, page cache left out: what the
        512 MiB limit is held against."""
        stats = self.inspect("{{.Id}}")
        for base in (Path("/sys/fs/cgroup/memory/docker"), Path("/sys/fs/cgroup/system.slice")):
            v1 = base / stats / "memory.stat"
            v2 = base / f"docker-{stats}.scope" / "memory.stat"
            for path in (v1, v2):
                if path.exists():
                    fields = dict(line.split() for line in path.read_text().splitlines())
                    return int(fields.get("rss", fields.get("anon", "0"))) // 1024
        raise AssertionError(f"no cgroup of container {stats}: has it been killed?")

    def inspect(self, template: str) -> str:
        done = subprocess.run(
            ["docker", "inspect", "-f", template, self.name],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        return done.stdout.strip()


@pytest.fixture
def image_broker(tmp_path: Path, flowerbox_image: str) -> Iterator[Callable[..., TcpBroker]]:
    ContainerBroker.image = flowerbox_image
    ContainerBroker.client = kube_client(tmp_path / "kube-client")
    tmp_path.chmod(0o755)
    with (
        FakeAPI(api_key=REAL_KEY) as upstream,
        cluster_brokers(tmp_path, upstream, ContainerBroker) as start,
    ):
        started: list[TcpBroker] = []

        def launch(*args: str) -> TcpBroker:
            started.append(start(*args))
            return started[-1]

        try:
            yield launch
        finally:
            for broker in started:
                assert isinstance(broker, ContainerBroker)
                subprocess.run(["docker", "rm", "-f", broker.name], capture_output=True,
                               check=False, timeout=60)  # fmt: skip


def test_the_image_with_512_mib_outlives_pinned_bodies_and_idle_heads(
    image_broker: Callable[..., TcpBroker],
) -> None:
    broker = image_broker()
    assert isinstance(broker, ContainerBroker)
    run = broker.add("20261205-000000-ffffff")
    assert broker.spend(run) == 200
    before = broker.rss_kib()
    with pinned_bodies(broker.api_port, count=14):
        grown = broker.rss_kib() - before
        assert grown <= 64 * MIB, f"the broker grew by {grown // MIB} MiB"
        assert broker.spend(run) == 200
    meanwhile = broker.spend
    with idle_heads(broker.api_port, count=10_000, meanwhile=lambda: meanwhile(run)) as served:
        grown = broker.rss_kib() - before
        assert served == [200] * 5
        assert grown <= 64 * MIB, f"the broker grew by {grown // MIB} MiB"
    assert broker.inspect("{{.State.Running}} {{.State.OOMKilled}}") == "true false"
    assert broker.spend(run) == 200
    broker.stop()
