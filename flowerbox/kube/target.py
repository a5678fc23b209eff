"""KubeTarget: where and how a run goes on Kubernetes, as one frozen value; and the BoxSpec
a run there has, so the Pod is derived from the same description of the box as Docker's.

On a cluster there is no host folder: the workspace, runs/, the CLI's HOME and the workbench
all live on one per-run PersistentVolumeClaim mounted at VOLUME, at fixed absolute paths, so
a session started by one Job is found by the next (`resume`: the session store is keyed by
the workspace's path). The spec's socket, secrets and state folders are Docker's host-only
places; a Pod has none of them (the broker holds the key and the ledger), so they are named
under STATE and never mounted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flower import text
from flowerbox.errors import ConfigError

if TYPE_CHECKING:
    from flowerbox.box.spec import BoxSpec, Limits

VOLUME = Path("/flowerbox")  # where the run's PVC is mounted in every container
WORKSPACE = VOLUME / "workspace"
WORKBENCH = VOLUME / f".flower-{WORKSPACE.name}"  # flower's workbench_location: beside it
STATE = Path("/nonexistent/flowerbox-state")  # never mounted: the Docker path's host folders
UID = 10001  # the image's own user (Dockerfile): a Pod has no host user to match
NO_REPO = "https://nothing.invalid/"  # a target that fetches nothing: the broker, a self-test
BROKER = "flowerbox-broker"  # the broker's Service (and Deployment) name
DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class KubeTarget:
    """One run's place on a cluster. `repo`/`ref` fill the workspace (the broker fetches);
    the agent's branch goes back to `repo` as `refs/flowerbox/<run-id>`, where no forge's CI
    runs (`deliver_branch`: as the branch `flowerbox/<run-id>`, which CI may run on)."""

    repo: str
    ref: str = "main"
    namespace: str = "flowerbox"
    context: str | None = None  # a kubeconfig context; None: the current one
    broker: str = BROKER
    runtime_class: str | None = None  # e.g. gvisor or kata: the node pool's sandbox
    storage: str = "10Gi"  # the PVC's size: the run's disk budget on a cluster
    deadline_s: int = 6 * 3600  # activeDeadlineSeconds: a backstop, not a timeout
    ttl_s: int = 24 * 3600  # ttlSecondsAfterFinished: the Job goes, the PVC stays for resume
    deliver_branch: bool = False

    def __post_init__(self) -> None:
        for what, value in (("--namespace", self.namespace), ("--broker", self.broker)):
            if len(value) > 63 or not DNS_NAME.match(value):
                raise ConfigError(text("kube.bad_name", what=what, value=repr(value)))
        if not self.repo.startswith("https://"):
            raise ConfigError(text("kube.repo_scheme", repo=repr(self.repo)))

    @property
    def broker_host(self) -> str:
        """The broker's address in a run's Pod: its Service's cluster IP, as the kubelet puts
        it in `<NAME>_SERVICE_HOST` and expands `$(...)` with it, so no Pod of a run needs
        DNS (it has none: flowerbox.kube.pod)."""
        return f"$({self.broker.upper().replace('-', '_')}_SERVICE_HOST)"


def flower_command(args: Sequence[str]) -> tuple[str, ...]:
    """flower with `args` (`go "ask"`...) on the claim's workspace and runs/, as the Docker
    path's prepare() runs it on the host's."""
    run_dir = WORKSPACE / "runs"
    isolate = ("--isolate",) if args[:1] == ["go"] else ()
    return ("flower", *args, "-w", str(WORKSPACE), "--run-dir", str(run_dir), *isolate)


def kube_spec(
    run_id: str, *, image: str, command: tuple[str, ...], limits: Limits | None = None
) -> BoxSpec:
    """The BoxSpec of a run on a cluster: the same fields the Docker path fills, with the
    PVC's paths for the host's. The net is the allowlist: only the broker is reachable."""
    # lazy: the spec's module is for a run's start; the options that build a KubeTarget
    # are every command's (`flowerbox --help`, `ps`: issue 31)
    from flowerbox.box.spec import BoxSpec, Limits

    if not DNS_NAME.match(run_id) or len(run_id) > 40:
        raise ConfigError(text("kube.bad_run_id", run=repr(run_id)))
    return BoxSpec(
        image=image,
        workspace=WORKSPACE,
        run_dir=WORKSPACE / "runs",
        home=WORKSPACE / "runs" / "home",
        socket_dir=STATE / "sockets",
        secrets_dir=STATE / "secrets",
        state_dir=STATE / run_id,
        uid=UID,
        gid=UID,
        command=command,
        run_id=run_id,
        workbench=WORKBENCH,
        limits=limits or Limits(),
    )
