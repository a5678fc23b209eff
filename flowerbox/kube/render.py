"""Every manifest of a run on Kubernetes, as plain dicts: what `flowerbox kube render` prints
(as YAML: flowerbox.kube.document) and exactly what the client applies (flowerbox.kube.cluster),
so what is reviewed is what runs.

    run_manifests(spec, target)      the run's PVC, its NetworkPolicy and its Job
    deliver_manifests(spec, target)  a Job that pushes the agent's branch back, after the run
    drop_manifests(spec, target, ...) a Job that drops an answer or a message into its inbox
    read_manifests(spec, target, ...) a Job that prints its pending questions (asks.json)
    broker_manifests(target, image)  the broker: default-deny, its service account and Role
                                     (to read the run tokens), Deployment, Service, its policy

Pure: no cluster, no client, no secret. The Secrets the manifests name (the broker's key, each
run's token) are created apart (docs/deployment.md gives the command): a rendered manifest
never holds a credential's value.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from flowerbox import wire
from flowerbox.box.spec import BoxSpec
from flowerbox.broker.gitroute import delivery_ref
from flowerbox.kube.pod import (
    ROLE_LABEL,
    RUN_LABEL,
    TOKEN_KEY,
    Manifest,
    claim_name,
    container,
    container_security,
    labels,
    pod_security,
    pod_spec,
    token_secret,
)
from flowerbox.kube.target import UID, VOLUME, KubeTarget

KEY_SECRET = "flowerbox-broker-key"  # `kubectl create secret generic` (docs/deployment.md)
BROKER_LEDGER = "/var/lib/flowerbox-broker"
DROP_TTL_S = 600  # a drop Job is gone soon after: the run's log says it took the file
DROP_DEADLINE_S = 300
# On the claim, which outlives every Job: what `resume` and `deliver` start again from.
COMMAND_ANNOTATION = "flowerbox.dev/command"
REF_ANNOTATION = "flowerbox.dev/ref"
# A checkov check that cannot hold for this design, and why (docs/deployment.md lists them).
SKIPS = {
    "CKV_K8S_43": "the image is named by tag; pin a digest with --image name@sha256:...",
    "CKV_K8S_15": "IfNotPresent: a node pool may hold a locally loaded image with no registry",
    "CKV_K8S_35": "the run's token is an environment variable the CLI reads; it is per-run "
    "and worth nothing once the run ends",
    "CKV_K8S_38": "the broker alone has an API token: it lists and watches the run tokens' "
    "Secrets and the runs' Jobs in its namespace, and its Role allows nothing else",
    "CKV2_K8S_5": "the broker reads the Secrets of its own namespace: each run's token is one; "
    "the namespace holds flowerbox's alone",
}
SECRET_READER = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}
JOB_READER = {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]}


def _meta(name: str, target: KubeTarget, tags: dict[str, str], **extra: Any) -> Manifest:
    return {"name": name, "namespace": target.namespace, "labels": tags, **extra}


def _skips(*checks: str) -> dict[str, str]:
    """checkov.io/skipN annotations: each skip with its reason, on the object it concerns."""
    return {
        f"checkov.io/skip{n}": f"{check}={SKIPS[check]}" for n, check in enumerate(checks, start=1)
    }


def _git_env(spec: BoxSpec, target: KubeTarget) -> list[Manifest]:
    """git's way to the remote: the broker's relay, the run's token as the credential. The
    repository on the claim is the agent's to write, so git runs none of its hooks, no
    fsmonitor, no credential helper, askpass, signing program or proxy it could name, and no
    transport but http (a `file://`, `ext::` or ssh URL its config rewrites a URL to would
    run its receivepack or command): GIT_CONFIG_* outrank .git/config and its includes."""
    relay = f"http://{target.broker_host}:{wire.GIT_PORT}/"
    token = {"secretKeyRef": {"name": token_secret(spec), "key": TOKEN_KEY}}
    settings = {
        f"url.{relay}.insteadOf": "https://",
        "http.extraHeader": "Authorization: Bearer $(FLOWERBOX_TOKEN)",
        "core.hooksPath": "/dev/null",
        "core.fsmonitor": "false",
        "core.askPass": "",
        "credential.helper": "",
        "protocol.allow": "never",
        "protocol.http.allow": "always",
        "http.proxy": "",
        "push.gpgSign": "false",
        "push.recurseSubmodules": "no",
    }
    env: list[Manifest] = [
        {"name": "HOME", "value": "/tmp"},
        {"name": "GIT_CONFIG_NOSYSTEM", "value": "1"},
        {"name": "GIT_CONFIG_GLOBAL", "value": "/dev/null"},
        {"name": "GIT_ASKPASS", "value": ""},  # set, empty: core.askPass is never looked at
        {"name": "GIT_TERMINAL_PROMPT", "value": "0"},
        {"name": "FLOWERBOX_TOKEN", "valueFrom": token},
        {"name": "GIT_CONFIG_COUNT", "value": str(len(settings))},
    ]
    for n, (key, value) in enumerate(settings.items()):
        env += [
            {"name": f"GIT_CONFIG_KEY_{n}", "value": key},
            {"name": f"GIT_CONFIG_VALUE_{n}", "value": value},
        ]
    return env


def _fetch(spec: BoxSpec, target: KubeTarget) -> Manifest:
    """The init container: the workspace from `--repo` at `--ref`, once; a resumed run
    finds it there and keeps it."""
    script = '{ test -d "$0/.git" || git clone --branch "$1" -- "$2" "$0"; } && mkdir -p "$3"'
    args = [str(spec.workspace), target.ref, target.repo, str(spec.home)]
    fetch = container(
        spec, name="fetch", command=["sh", "-c", script, *args], env=_git_env(spec, target)
    )
    return fetch | {"workingDir": str(VOLUME)}  # the workspace is not there yet


def folders(spec: BoxSpec) -> Manifest:
    """An init container that makes the workspace and HOME on an empty claim, as the
    agent's user (a working directory the runtime made would be root's)."""
    command = ["mkdir", "-p", str(spec.workspace), str(spec.home)]
    return container(spec, name="folders", command=command, env=[]) | {"workingDir": str(VOLUME)}


def claim(spec: BoxSpec, target: KubeTarget) -> Manifest:
    """The run's volume: the workspace, runs/ and the workbench; it outlives every Job."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(
            claim_name(spec),
            target,
            labels(spec, "agent"),
            annotations={
                COMMAND_ANNOTATION: json.dumps(list(spec.command)),
                wire.IMAGE_ANNOTATION: spec.image,
                wire.REPO_ANNOTATION: target.repo,
                REF_ANNOTATION: target.ref,
                wire.DELIVER_ANNOTATION: delivery_ref(spec.run_id, branch=target.deliver_branch),
            },
        ),
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": target.storage}},
        },
    }


def agent_policy(spec: BoxSpec, target: KubeTarget) -> Manifest:
    """The agent's Pods reach the broker's ports, nothing else (no DNS: a name lookup is a
    way out; flowerbox.kube.pod); nothing reaches them. (A sidecar could not do this: a
    Pod's containers share one network.)"""
    broker = {"podSelector": {"matchLabels": {ROLE_LABEL: "broker"}}}
    ports = [
        {"protocol": "TCP", "port": p} for p in (wire.API_PORT, wire.PROXY_PORT, wire.GIT_PORT)
    ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(f"flowerbox-{spec.run_id}", target, labels(spec, "agent")),
        "spec": {
            "podSelector": {"matchLabels": {RUN_LABEL: spec.run_id}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [{"to": [broker], "ports": ports}],
        },
    }


def job(spec: BoxSpec, target: KubeTarget, *, name: str, pod: Manifest) -> Manifest:
    """A Job that runs its Pod once: no retry, a deadline as a backstop, gone after a TTL.
    Every Pod of a run is an agent's to the network policies, whatever it runs."""
    tags = labels(spec, "agent")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(name, target, tags, annotations=_skips(*SKIPS)),
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": target.deadline_s,
            "ttlSecondsAfterFinished": target.ttl_s,
            "template": {"metadata": {"labels": tags}, "spec": pod},
        },
    }


def run_manifests(spec: BoxSpec, target: KubeTarget, *, name: str | None = None) -> list[Manifest]:
    """A run: its volume, its network policy, and the Job (`name`: a resume's own Job name;
    the fetch keeps a workspace that is there)."""
    pod = pod_spec(spec, target, init=[_fetch(spec, target)])
    return [
        claim(spec, target),
        agent_policy(spec, target),
        job(spec, target, name=name or f"flowerbox-{spec.run_id}", pod=pod),
    ]


def deliver_manifests(spec: BoxSpec, target: KubeTarget) -> list[Manifest]:
    """After the run: flower's branch `flower/<run-id>` pushed to the run's repository as
    `refs/flowerbox/<run-id>` (or `refs/heads/flowerbox/<run-id>`: target.deliver_branch),
    the one ref the broker's git relay lets the run push. No notes ref: the agent holds the
    same token, so a note it could push would prove nothing; the relay writes the provenance
    note itself once the remote took the ref (flowerbox.broker.gitnotes).

    No agent code runs here, though git reads the agent's repository: the push goes to the
    repository's URL, never to a remote of its config (whose url, receivepack or
    pushurl the agent chose), with no hooks (--no-verify, and core.hooksPath), no submodule
    pushes and no signing (gpg.program), and only http, the relay's, as a transport
    (_git_env: set in the environment, which outranks the repository's config)."""
    script = 'cd "$0" && git push --no-verify --no-recurse-submodules -- "$1" "$2:$3"'
    ref = delivery_ref(spec.run_id, branch=target.deliver_branch)
    args = [str(spec.workspace), target.repo, f"refs/heads/flower/{spec.run_id}", ref]
    env = _git_env(spec, target)
    push = container(spec, name="deliver", command=["sh", "-c", script, *args], env=env)
    pod = pod_spec(spec, target, init=[])
    pod["containers"] = [push]
    return [job(spec, target, name=f"flowerbox-{spec.run_id}-deliver", pod=pod)]


def _beside(spec: BoxSpec, target: KubeTarget, box: Manifest, *, name: str) -> list[Manifest]:
    """A brief Job running `box` on the agent's node (a ReadWriteOnce claim is mounted on one
    node at a time), in the agent's Pod spec, with nothing secret."""
    pod = pod_spec(spec, target, init=[])
    pod["containers"] = [box]
    beside = {"matchLabels": {RUN_LABEL: spec.run_id}}
    pod["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": beside, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    brief = dataclasses.replace(target, ttl_s=DROP_TTL_S, deadline_s=DROP_DEADLINE_S)
    return [job(spec, brief, name=name, pod=pod)]


def drop_manifests(
    spec: BoxSpec, target: KubeTarget, payload: dict[str, str], *, file: str, tag: str
) -> list[Manifest]:
    """A Job (`flowerbox-<run>-drop-<tag>`) that drops one answer or message (`payload`, as
    `flowerbox answer`/`send` write it) into the run's inbox on its claim, as `file`
    (flower's drop names sort by time): written under a dot name and renamed,
    as flower's watcher wants. It runs beside the agent, as the agent's user."""
    inbox = spec.run_dir / "inbox"
    script = 'umask 077 && mkdir -p "$0" && printf %s "$1" > "$0/.$2" && mv "$0/.$2" "$0/$2"'
    text = json.dumps(payload, ensure_ascii=False)
    command = ["sh", "-c", script, str(inbox), text, file]
    write = container(spec, name="drop", command=command, env=[])
    return _beside(spec, target, write, name=f"flowerbox-{spec.run_id}-drop-{tag}")


def read_manifests(spec: BoxSpec, target: KubeTarget, *, tag: str, limit: int) -> list[Manifest]:
    """A Job (`flowerbox-<run>-read-<tag>`) that prints the run's asks.json to its log after
    the line `asks_header(spec, tag)`: `ps --on kube` reads the questions there, as local ps
    reads the file. The claim is mounted read-only; a link, a FIFO or anything but a regular
    file prints nothing, and no more than `limit` bytes (+1, so the host sees it was cut)."""
    script = 'printf "%s\\n" "$1"; test -f "$0" && ! test -L "$0" && head -c "$2" -- "$0"; true'
    asks = spec.run_dir / "asks.json"
    command = ["sh", "-c", script, str(asks), asks_header(spec, tag), str(limit + 1)]
    read = container(spec, name="read", command=command, env=[])
    read["volumeMounts"] = [{**m, "readOnly": True} for m in read["volumeMounts"]]
    return _beside(spec, target, read, name=f"flowerbox-{spec.run_id}-read-{tag}")


def asks_header(spec: BoxSpec, tag: str) -> str:
    """The read Job's first line: which run's questions follow, and which read printed them."""
    return f"flowerbox-asks {spec.run_id} {tag}"


def reader_manifests(target: KubeTarget, tags: dict[str, str]) -> list[Manifest]:
    """The broker's identity to the API server: a service account whose Role reads Secrets
    and Jobs in the namespace and nothing else (the run tokens, and whether a Job holding one
    runs: flowerbox.broker.tokens)."""
    account = {"kind": "ServiceAccount", "name": target.broker, "namespace": target.namespace}
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta(target.broker, target, dict(tags)),
            "automountServiceAccountToken": False,  # the broker's Pod asks for it alone
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(target.broker, target, dict(tags), annotations=_skips("CKV2_K8S_5")),
            "rules": [SECRET_READER, JOB_READER],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(target.broker, target, dict(tags), annotations=_skips("CKV2_K8S_5")),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": target.broker,
            },
            "subjects": [account],
        },
    ]


def broker_manifests(target: KubeTarget, *, image: str) -> list[Manifest]:
    """The broker, once per namespace: the only Pod with the key (from KEY_SECRET), an API
    token (to read the run tokens) and a route out; a default-deny policy for everything
    else in the namespace. Its metrics port is announced by the usual `prometheus.io/*`
    annotations and reachable from every namespace but this one (the runs')."""
    tags = {ROLE_LABEL: "broker", "app.kubernetes.io/part-of": "flowerbox"}
    ports = [("api", wire.API_PORT), ("proxy", wire.PROXY_PORT), ("git", wire.GIT_PORT)]
    secrets = wire.SECRETS_IN_GATEWAY
    broker = {
        "name": "broker",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["flowerbox", "broker", "--listen", f"0.0.0.0:{wire.API_PORT}"],
        "args": [
            *("--credentials", f"{secrets}/{wire.CREDENTIALS_FILE}"),
            *("--ledger", BROKER_LEDGER),
            *("--namespace", target.namespace),
            *("--metrics", f"0.0.0.0:{wire.METRICS_PORT}"),
        ],
        "ports": [
            {"name": n, "containerPort": p, "protocol": "TCP"}
            for n, p in [*ports, ("metrics", wire.METRICS_PORT)]
        ],
        "securityContext": container_security(UID, UID),
        "resources": {
            "limits": {"cpu": "1", "memory": "512Mi"},
            "requests": {"cpu": "1", "memory": "512Mi"},
        },
        "readinessProbe": {"tcpSocket": {"port": wire.API_PORT}},
        "livenessProbe": {"tcpSocket": {"port": wire.API_PORT}},
        "volumeMounts": [
            {"name": "key", "mountPath": secrets, "readOnly": True},
            {"name": "ledger", "mountPath": BROKER_LEDGER},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    pod = {
        "serviceAccountName": target.broker,
        "automountServiceAccountToken": True,  # to read the run tokens (reader_manifests)
        "enableServiceLinks": False,
        "securityContext": pod_security(UID, UID),
        "containers": [broker],
        "volumes": [
            {"name": "key", "secret": {"secretName": KEY_SECRET, "defaultMode": 0o400}},
            {"name": "ledger", "persistentVolumeClaim": {"claimName": target.broker}},
            {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
        ],
    }
    if target.runtime_class is not None:
        pod["runtimeClassName"] = target.runtime_class
    agents = {"podSelector": {"matchLabels": {ROLE_LABEL: "agent"}}}
    scraped = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(wire.METRICS_PORT),
        "prometheus.io/path": "/metrics",
    }
    # A Prometheus in any namespace but the runs' own: no agent Pod reads the runs' spend.
    others = {
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": [target.namespace],
                }
            ]
        }
    }
    return [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta("flowerbox-default-deny", target, dict(tags)),
            "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        },
        *reader_manifests(target, tags),
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": _meta(target.broker, target, dict(tags)),
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(
                target.broker,
                target,
                dict(tags),
                annotations=_skips("CKV_K8S_43", "CKV_K8S_15", "CKV_K8S_38"),
            ),
            "spec": {
                "replicas": 1,  # one ledger: the team budget is counted in one place
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": dict(tags)},
                "template": {
                    "metadata": {"labels": dict(tags), "annotations": scraped},
                    "spec": pod,
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(target.broker, target, dict(tags)),
            "spec": {
                "selector": dict(tags),
                "ports": [{"name": n, "port": p, "targetPort": p} for n, p in ports],
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta(target.broker, target, dict(tags)),
            "spec": {
                "podSelector": {"matchLabels": dict(tags)},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [
                    {"from": [agents], "ports": [{"protocol": "TCP", "port": p} for _, p in ports]},
                    {"from": [others], "ports": [{"protocol": "TCP", "port": wire.METRICS_PORT}]},
                ],
                "egress": [{}],  # the API and git remotes: the broker applies the allowlists
            },
        },
    ]
