"""The box's hardening as Pod security, derived from the same BoxSpec as Docker's kwargs.

    Docker (flowerbox.box.spec)           Pod (here)
    user uid:gid                          runAsUser/runAsGroup/fsGroup, runAsNonRoot
    read_only                             readOnlyRootFilesystem
    security_opt no-new-privileges        allowPrivilegeEscalation: false
    cap_drop ALL                          capabilities.drop [ALL]
    Docker's default seccomp profile      seccompProfile RuntimeDefault
    mem_limit, nano_cpus                  resources.limits memory, cpu (requests = limits)
    tmpfs /tmp (noexec, 256m)             emptyDir medium Memory, sizeLimit 256Mi at /tmp
    network none + the gateway's relay    a NetworkPolicy: only the broker (no DNS either)
    no Docker socket                      automountServiceAccountToken: false (no API token)
    pids_limit                            no Pod field: the kubelet's podPidsLimit (docs)

tests/kube/test_pod.py holds the two side by side, field by field, from one BoxSpec.
"""

from __future__ import annotations

import re
from typing import Any

from flowerbox import wire
from flowerbox.box.spec import TMPFS, BoxSpec, agent_env
from flowerbox.kube.target import VOLUME, KubeTarget

Manifest = dict[str, Any]
RUN_LABEL = wire.KUBE_RUN_LABEL
ROLE_LABEL = wire.KUBE_ROLE_LABEL
TOKEN_KEY = wire.TOKEN_KEY
NO_RESOLVER = "127.0.0.1"  # a Pod's own loopback: no DNS server listens there
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([kmgt]?)b?$", re.IGNORECASE)


def quantity(size: str) -> str:
    """Docker's size ("4g", "256m") as a Kubernetes quantity ("4Gi", "256Mi")."""
    found = _SIZE.match(size.strip())
    if found is None:
        raise ValueError(f"not a size: {size!r}")
    number, unit = found.groups()
    return number + {"": "", "k": "Ki", "m": "Mi", "g": "Gi", "t": "Ti"}[unit.lower()]


def tmp_size(options: str = TMPFS) -> str:
    """The Docker tmpfs's size= as a quantity: the emptyDir at /tmp holds no more."""
    sizes = [part.split("=", 1)[1] for part in options.split(",") if part.startswith("size=")]
    return quantity(sizes[0])


def pod_security(uid: int, gid: int) -> Manifest:
    """The Pod's securityContext: who runs, and the kernel's filter."""
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "fsGroup": gid,  # the PVC is written as the run's group, as the host's folders
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security(uid: int, gid: int) -> Manifest:
    """Each container's securityContext: what Docker's hardening says per container."""
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def resources(spec: BoxSpec) -> Manifest:
    """Requests equal to limits: the Pod is Guaranteed, never squeezed past what it asked."""
    limits = {"cpu": f"{spec.limits.cpus:g}", "memory": quantity(spec.limits.memory)}
    return {"limits": limits, "requests": dict(limits)}


def labels(spec: BoxSpec, role: str) -> dict[str, str]:
    return {RUN_LABEL: spec.run_id, ROLE_LABEL: role, "app.kubernetes.io/part-of": "flowerbox"}


def volumes(spec: BoxSpec) -> list[Manifest]:
    return [
        {"name": "run", "persistentVolumeClaim": {"claimName": claim_name(spec)}},
        {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": tmp_size()}},
    ]


def mounts() -> list[Manifest]:
    return [{"name": "run", "mountPath": str(VOLUME)}, {"name": "tmp", "mountPath": "/tmp"}]


def claim_name(spec: BoxSpec) -> str:
    return f"flowerbox-{spec.run_id}"


def token_secret(spec: BoxSpec) -> str:
    """The run's own broker token: the one thing the broker tells runs apart by."""
    return wire.TOKEN_SECRET.format(run_id=spec.run_id)


def agent_environment(spec: BoxSpec, target: KubeTarget) -> list[Manifest]:
    """The Docker agent's environment with the broker's Service (by its cluster IP:
    KubeTarget.broker_host) for the relay's loopback ports, and the run's token (from its
    Secret) for the placeholder key. The broker tells a CONNECT's run by the token in the
    proxy URL (the CLI sends it as `Proxy-Authorization: Basic`), expanded by the kubelet
    from the variable listed first; the API is reached directly (NO_PROXY), as through the
    relay in Docker."""
    env = agent_env(spec)
    broker = target.broker_host
    api = f"http://{broker}:{wire.API_PORT}"
    proxy = f"http://run:$(ANTHROPIC_API_KEY)@{broker}:{wire.PROXY_PORT}"
    env |= {"ANTHROPIC_BASE_URL": api, "FLOWER_HEALTH_URL": f"{api}/health"}
    env |= dict.fromkeys(("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"), proxy)
    env |= dict.fromkeys(("NO_PROXY", "no_proxy"), f"{env['NO_PROXY']},{broker}")
    env.pop("ANTHROPIC_API_KEY")
    token = {"secretKeyRef": {"name": token_secret(spec), "key": TOKEN_KEY}}
    listed: list[Manifest] = [{"name": name, "value": value} for name, value in env.items()]
    return [{"name": "ANTHROPIC_API_KEY", "valueFrom": token}, *listed]


def container(spec: BoxSpec, *, name: str, command: list[str], env: list[Manifest]) -> Manifest:
    """A container of the box: the image, the hardening, the run's volume and /tmp."""
    return {
        "name": name,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "workingDir": str(spec.workspace),
        "env": env,
        "securityContext": container_security(spec.uid, spec.gid),
        "resources": resources(spec),
        "volumeMounts": mounts(),
    }


def pod_spec(spec: BoxSpec, target: KubeTarget, *, init: list[Manifest]) -> Manifest:
    """The agent's Pod: one container running the spec's command, after `init`. It has no
    DNS (a lookup is a way out: a name can carry data to whoever answers for its domain):
    its one resolver is its own loopback, where nothing answers, so a lookup fails at once
    and nothing leaves; the broker is reached by the address the kubelet gives (Service
    links: the namespace holds flowerbox's Services alone), every other name only through
    the broker's proxy, which resolves what the run's allowlist lets through."""
    command = ["python", "-m", wire.INSIDE_MODULE, "--", *spec.command]
    agent = container(spec, name="agent", command=command, env=agent_environment(spec, target))
    pod: Manifest = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": True,  # the broker's address: KubeTarget.broker_host
        "dnsPolicy": "None",
        "dnsConfig": {"nameservers": [NO_RESOLVER], "searches": [], "options": []},
        "securityContext": pod_security(spec.uid, spec.gid),
        "initContainers": init,
        "containers": [agent],
        "volumes": volumes(spec),
    }
    if target.runtime_class is not None:
        pod["runtimeClassName"] = target.runtime_class
    return pod
