"""`flowerbox selftest --on kube`: the escape probes (flowerbox.selftest.probes) as a Job with
the agent's own Pod spec, network policy and volume, so a team checks a node pool or a
runtime class as a run there would get it; and the negative control, the same Job with every
property weakened and an allow-all policy, where the probes must find ways out.

What the probes aim at: the cluster's own API Service, a listener every cluster has, which the
run's policy must keep an agent from. The Pod's log comes back to the host, where `verdicts`
judges it with the local self-test's judges (flowerbox.selftest.verdicts, POD_JUDGES: what a
Pod spec decides and its log shows). The log is the Pod's to write, so it is read as hostile:
bounded, a line counts only as a JSON object carrying this run's token (a random value only
the probe command is given), and a probe reported twice counts as not reported.
"""

from __future__ import annotations

import copy
import json
import secrets

from flower import text
from flowerbox.box.spec import BoxSpec
from flowerbox.kube.pod import Manifest
from flowerbox.kube.render import folders, run_manifests
from flowerbox.kube.target import UID, KubeTarget, kube_spec
from flowerbox.selftest.runner import probe_command
from flowerbox.selftest.verdicts import POD_JUDGES, POD_PROBES, Seen, Verdict, judge

TARGET = "kubernetes.default.svc:443"
MAX_LOG_BYTES = 1024 * 1024  # the probes print a few KiB: past this, nothing is judged
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
    command = probe_command(
        spec, tcp=TARGET, udp=TARGET, token=token, marker=run_id, probes=POD_PROBES
    )
    return kube_spec(run_id, image=image, command=tuple(command))


def token_of(spec: BoxSpec) -> str:
    """The token the probe command was given: what a line of its log must carry."""
    command = list(spec.command)
    return command[command.index("--token") + 1]


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


def verdicts(log: bytes | None, spec: BoxSpec) -> list[Verdict]:
    """One verdict per POD_PROBES, from the probe Pod's log (None: longer than
    MAX_LOG_BYTES), judged as the local self-test judges: a probe that did not report FAILs.

    Only a JSON object line naming a probe and carrying the spec's token counts; a probe
    reported twice (something else in the Pod printing in its name) FAILs as such.
    """
    if log is None:
        why = text("verdict.pod_log_over", limit=MAX_LOG_BYTES)
        return [Verdict(name, False, why) for name in POD_PROBES]
    token = token_of(spec)
    seen: dict[str, list[str]] = {}
    for line in log.decode("utf-8", errors="replace").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue  # the runtime's or a tool's text: no observation
        if (
            isinstance(data, dict)
            and data.get("token") == token
            and data.get("probe") in POD_PROBES
        ):
            seen.setdefault(data["probe"], []).append(line)
    once = "\n".join(lines[0] for lines in seen.values() if len(lines) == 1)
    host = Seen(uid=UID, gid=UID, pids_limit=spec.limits.pids, token=token)
    judged = judge(once, host, POD_PROBES, judges=POD_JUDGES)
    twice = text("verdict.reported_twice")
    return [Verdict(v.probe, False, twice) if len(seen.get(v.probe, ())) > 1 else v for v in judged]
