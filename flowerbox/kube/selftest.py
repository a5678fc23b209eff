"""`flowerbox selftest --on kube`: the escape probes (flowerbox.selftest.probes) as a Job with
the agent's own Pod spec, network policy and volume, so a team checks a node pool or a
runtime class as a run there would get it; and the negative control, the same Job with every
property weakened and an allow-all policy, where the probes must find ways out.

What the probes aim at: the cluster's own API Service, a listener every cluster has, which the
run's policy must keep an agent from (TCP; UDP to the same address: nothing answers there, so
the UDP probe can only prove a block, never a leak). The verdicts are in the Pod's log
(`flowerbox kube logs RUN`): judging them on the host, as the local self-test does, needs
what only a real cluster shows and is not done yet (docs/deployment.md says so).
"""

from __future__ import annotations

import copy
import secrets

from flowerbox.box.spec import BoxSpec
from flowerbox.kube.pod import Manifest
from flowerbox.kube.render import folders, run_manifests
from flowerbox.kube.target import KubeTarget, kube_spec
from flowerbox.selftest.runner import probe_command

TARGET = "kubernetes.default.svc:443"
WEAK = {
    "privileged": True,
    "allowPrivilegeEscalation": True,
    "runAsUser": 0,
    "runAsNonRoot": False,
    "readOnlyRootFilesystem": False,
    "seccompProfile": {"type": "Unconfined"},
}


def probe_spec(*, image: str, negative: bool, token: str | None = None) -> BoxSpec:
    """A self-test run: a run id of its own (from `token`, random unless given), the probes
    for a command."""
    token = token or secrets.token_hex(6)
    run_id = f"selftest-{'weak-' if negative else ''}{token}"
    spec = kube_spec(run_id, image=image, command=())
    command = probe_command(spec, tcp=TARGET, udp=TARGET, token=token, marker=run_id)
    return kube_spec(run_id, image=image, command=tuple(command))


def probe_manifests(spec: BoxSpec, target: KubeTarget, *, negative: bool) -> list[Manifest]:
    """The run's manifests with the probes for the agent and nothing to fetch; `negative`:
    every property weakened and a policy letting everything through, so every probe should
    FAIL."""
    claim, policy, job = copy.deepcopy(run_manifests(spec, target))
    pod = job["spec"]["template"]["spec"]
    pod["initContainers"] = [folders(spec)]  # no repository: the probes plant what they need
    if not negative:
        return [claim, policy, job]
    pod["securityContext"] = {"runAsUser": 0, "runAsNonRoot": False}
    pod["automountServiceAccountToken"] = True
    for box in pod["containers"]:
        box["securityContext"] = dict(WEAK)
    policy["spec"] |= {"egress": [{}], "ingress": [{}]}  # past the namespace's default deny
    return [claim, policy, job]
