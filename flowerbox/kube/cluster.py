"""The cluster side of a run, through the official `kubernetes` client: apply what
flowerbox.kube.render rendered (the same dicts, turned into the client's own models), and
`ps`, `logs`, `stop`, `resume`, `deliver` on the Jobs by their `flowerbox.dev/run-id` label.

    cluster = Cluster.connect(context=None, namespace="flowerbox")
    cluster.start(spec, run_manifests(spec, target))   # its token Secret, then these
    cluster.runs(); cluster.logs(run_id, follow=True); cluster.stop(run_id)
    cluster.resume(run_id, target); cluster.deliver(run_id, target)
    cluster.wait(run_id, timeout_s=600); cluster.remove(run_id)
    cluster.drop(run_id, target, {"answer": "q1", "text": "yes"})   # answer and send
    cluster.questions([run_id], target, timeout_s=60)    # what ps shows: a read Job each

The one seam is the ApiClient the constructor takes: tests give it a Configuration whose
host is a fake API server on loopback, so every request goes through the client's own
serialization and HTTP code. What a run wrote reaches the host only as a Pod's log: printed
as it is (`logs`), or, bounded, handed to its hostile-input reader (flowerbox.kube.asks, and
flowerbox.kube.selftest for the probes).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from flower import text
from flowerbox.box.spec import BoxSpec
from flowerbox.broker.gitroute import delivery_ref
from flowerbox.errors import ClusterError, RunError
from flowerbox.kube import asks
from flowerbox.kube.pod import RUN_LABEL, TOKEN_KEY, Manifest, labels, token_secret
from flowerbox.kube.render import (
    COMMAND_ANNOTATION,
    REF_ANNOTATION,
    deliver_manifests,
    drop_manifests,
    read_manifests,
    run_manifests,
)
from flowerbox.kube.target import KubeTarget, kube_spec
from flowerbox.wire import (
    ALLOW_ANNOTATION,
    API_FETCH_ANNOTATION,
    BUDGET_ANNOTATION,
    DELIVER_ANNOTATION,
    IMAGE_ANNOTATION,
    REPO_ANNOTATION,
    TOKEN_ROLE,
)

CONFLICT = 409
NOT_FOUND = 404
# What each kind becomes, and the client call that creates it in a namespace.
MODELS: dict[str, tuple[type[Any], str, str]] = {
    "PersistentVolumeClaim": (
        client.V1PersistentVolumeClaim,
        "CoreV1Api",
        "create_namespaced_persistent_volume_claim",
    ),
    "Service": (client.V1Service, "CoreV1Api", "create_namespaced_service"),
    "Secret": (client.V1Secret, "CoreV1Api", "create_namespaced_secret"),
    "NetworkPolicy": (
        client.V1NetworkPolicy,
        "NetworkingV1Api",
        "create_namespaced_network_policy",
    ),
    "Deployment": (client.V1Deployment, "AppsV1Api", "create_namespaced_deployment"),
    "ServiceAccount": (client.V1ServiceAccount, "CoreV1Api", "create_namespaced_service_account"),
    "Role": (client.V1Role, "RbacAuthorizationV1Api", "create_namespaced_role"),
    "RoleBinding": (
        client.V1RoleBinding,
        "RbacAuthorizationV1Api",
        "create_namespaced_role_binding",
    ),
    "Job": (client.V1Job, "BatchV1Api", "create_namespaced_job"),
}
_AGENT_JOB = re.compile(r"(-\d+)?")  # after flowerbox-<run>: the first Job, or a resume's
JOB_LABEL = "job-name"  # what the Job controller labels a Job's Pods with
KEPT = frozenset(
    {
        "PersistentVolumeClaim",
        "NetworkPolicy",
        "Service",
        "Deployment",
        "ServiceAccount",
        "Role",
        "RoleBinding",
    }
)


@dataclass(frozen=True)
class RunStatus:
    """One Job of a run, as `ps` shows it."""

    run_id: str
    job: str
    state: str  # running, succeeded, failed

    def line(self) -> str:
        return f"{self.run_id}  {self.state:<9}  {self.job}"

    @property
    def agent(self) -> bool:
        """The run's own Job (its first, or a resume's), not a drop, read or deliver Job."""
        return _AGENT_JOB.fullmatch(self.job.removeprefix(f"flowerbox-{self.run_id}")) is not None


def model(manifest: Manifest) -> Any:
    """The client's own model of a rendered manifest; it serializes back to the same dict."""
    kind = manifest["kind"]
    if kind not in MODELS:
        raise ValueError(f"no client model for kind {kind!r}")
    return MODELS[kind][0].from_dict(manifest)


class Cluster:
    """One namespace of one cluster, through an ApiClient."""

    def __init__(self, api: client.ApiClient, *, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)

    @classmethod
    def connect(cls, *, context: str | None, namespace: str) -> Cluster:
        """The kubeconfig's cluster (`context`, or its current one). KUBECONFIG is read now:
        the client's own default is the value it had when the client was first imported.
        The kubeconfig is only read (persist_config=False): flowerbox never rewrites it."""
        path = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        try:
            # the client's config module has no annotations (its models and APIs have)
            api = config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=path, context=context, persist_config=False
            )
        except (ConfigException, OSError) as exc:
            raise ClusterError(text("kube.no_kubeconfig", problem=exc)) from exc
        return cls(api, namespace=namespace)

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except ApiException as exc:
            raise ClusterError(
                text(
                    "kube.refused_to",
                    what=what,
                    namespace=self.namespace,
                    status=exc.status,
                    reason=exc.reason,
                ),
                status=exc.status,
            ) from exc

    def apply(self, manifests: list[Manifest]) -> list[str]:
        """Create each manifest as given; one of a kind a run keeps (its claim, the broker)
        that is there already is left as it is. Returns what was created, as kind/name."""
        created = []
        for manifest in manifests:
            kind, name = manifest["kind"], manifest["metadata"]["name"]
            _, group, create = MODELS[kind]
            api = getattr(client, group)(self.api)
            try:
                getattr(api, create)(self.namespace, model(manifest))
            except ApiException as exc:
                if exc.status == CONFLICT and kind in KEPT:
                    continue
                raise ClusterError(
                    text(
                        "kube.refused_object",
                        kind=kind,
                        name=name,
                        status=exc.status,
                        reason=exc.reason,
                    ),
                    status=exc.status,
                ) from exc
            created.append(f"{kind}/{name}")
        return created

    def start(
        self,
        spec: BoxSpec,
        manifests: list[Manifest],
        *,
        repo: str = "",
        deliver_branch: bool = False,
    ) -> list[str]:
        """A new run: its token first (the Pods read it, the broker learns the run from it,
        the `repo` its git relay lets it reach, a self-test has none, and the one ref it may
        push there), then exactly what render printed."""
        token = secrets.token_urlsafe(32)
        made = token_manifest(spec, self.namespace, token, repo=repo, deliver_branch=deliver_branch)
        self.apply([made])
        return self.apply(manifests)

    def _recorded(self, run_id: str, target: KubeTarget) -> tuple[BoxSpec, KubeTarget]:
        """The run's spec, and `target` with its repository and ref, again from what its
        claim (which outlives every Job) recorded."""
        claim = self._call(
            text("kube.do_read_volume", run=run_id),
            lambda: self.core.read_namespaced_persistent_volume_claim(
                f"flowerbox-{run_id}", self.namespace
            ),
        )
        annotations = claim.metadata.annotations or {}
        try:
            command = tuple(json.loads(annotations[COMMAND_ANNOTATION]))
            image = annotations[IMAGE_ANNOTATION]
            where = {"repo": annotations[REPO_ANNOTATION], "ref": annotations[REF_ANNOTATION]}
        except (KeyError, ValueError) as exc:
            raise RunError(text("kube.no_command", run=run_id), run_id=run_id) from exc
        spec = kube_spec(run_id, image=image, command=command)
        # no annotation (a claim older than it): the default ref, as its token Secret's
        branch = annotations.get(DELIVER_ANNOTATION) == delivery_ref(run_id, branch=True)
        return spec, dataclasses.replace(target, **where, deliver_branch=branch)

    def _idle(self, run_id: str) -> list[RunStatus]:
        jobs = self._jobs(run_id)
        if any(job.state == "running" for job in jobs):
            raise RunError(text("kube.still_running", run=run_id), run_id=run_id)
        return jobs

    def resume(self, run_id: str, target: KubeTarget) -> list[str]:
        """A new Job on the run's claim, with the command and repository the claim recorded
        (`target` says where: namespace, broker, runtime class)."""
        spec, target = self._recorded(run_id, target)
        name = f"flowerbox-{run_id}-{max(map(_resumed, self._idle(run_id)), default=0) + 1}"
        return self.apply(run_manifests(spec, target, name=name))

    def deliver(self, run_id: str, target: KubeTarget) -> tuple[list[str], str]:
        """The Job that pushes the run's branch back, once it ended, as the one ref the run
        was made with (`refs/flowerbox/<run-id>`, or the branch `flowerbox/<run-id>`): what
        was created, and that ref."""
        spec, target = self._recorded(run_id, target)
        self._idle(run_id)
        ref = delivery_ref(run_id, branch=target.deliver_branch)
        return self.apply(deliver_manifests(spec, target)), ref

    def drop(self, run_id: str, target: KubeTarget, payload: dict[str, str]) -> str:
        """An answer or a message into the running run's inbox, by a drop Job on its node;
        returns the Job's name. Whether flower took it, its log says (as `logs` shows)."""
        spec, target = self._recorded(run_id, target)
        self.running(run_id)
        tag = secrets.token_hex(4)
        file = f"{time.time_ns():020d}-kube-{tag}.json"
        (made,) = self.apply(drop_manifests(spec, target, payload, file=file, tag=tag))
        return made

    def running(self, run_id: str) -> None:
        """Refuse a run whose own Job (not a drop or read Job beside it) is not running."""
        if not any(job.agent and job.state == "running" for job in self._jobs(run_id)):
            raise RunError(text("kube.not_running", run=run_id), run_id=run_id)

    def questions(
        self, run_ids: list[str], target: KubeTarget, *, timeout_s: float, poll_s: float = 1.0
    ) -> dict[str, list[dict[str, Any]] | str]:
        """The questions each running run waits on, printed by a read Job beside it (all
        started at once, waited for together, deleted after); for a run whose questions
        could not be read (the cluster refused, the read did not end within `timeout_s`),
        why not: ps still lists the runs."""
        reads: dict[str, tuple[BoxSpec, str, str]] = {}
        found: dict[str, list[dict[str, Any]] | str] = {}
        try:
            for run_id in run_ids:
                tag = secrets.token_hex(4)
                try:
                    spec, where = self._recorded(run_id, target)
                    manifests = read_manifests(spec, where, tag=tag, limit=asks.MAX_ASKS_BYTES)
                    (made,) = self.apply(manifests)
                except (ClusterError, RunError) as exc:
                    found[run_id] = str(exc)
                    continue
                reads[run_id] = (spec, tag, made.split("/", 1)[1])
            deadline = time.monotonic() + timeout_s
            while len(found) < len(run_ids) and time.monotonic() <= deadline:
                for run_id, (spec, tag, job) in reads.items():
                    if run_id not in found and self._state(job) != "running":
                        log = self.log(run_id, limit=asks.MAX_LOG_BYTES, container="read", job=job)
                        found[run_id] = asks.pending(log, spec, tag)
                if len(found) < len(run_ids):
                    time.sleep(poll_s)
        finally:
            for _, _, job in reads.values():
                self._delete_job(job)
        late = f"its read Job did not end within {timeout_s:.0f} s"
        return {run_id: found.get(run_id, late) for run_id in run_ids}

    def _state(self, job: str) -> str:
        read = self._call(
            text("kube.do_read", name=job),
            lambda: self.batch.read_namespaced_job(job, self.namespace),
        )
        return _status(read).state

    def _delete_job(self, job: str) -> None:
        """Delete a Job and, in the background, its Pods (SIGTERM to what runs there); one
        gone already (its TTL) is no error."""
        try:
            self._call(
                text("kube.do_delete", name=job),
                partial(
                    self.batch.delete_namespaced_job,
                    job,
                    self.namespace,
                    propagation_policy="Background",
                ),
            )
        except ClusterError as exc:
            if exc.status != NOT_FOUND:
                raise

    def _jobs(self, run_id: str | None = None) -> list[RunStatus]:
        selector = RUN_LABEL if run_id is None else f"{RUN_LABEL}={run_id}"
        found = self._call(
            text("kube.do_list_jobs"),
            lambda: self.batch.list_namespaced_job(self.namespace, label_selector=selector),
        )
        return [_status(job) for job in found.items]

    def runs(self) -> list[RunStatus]:
        """Every Job of every run in the namespace, newest name last."""
        return sorted(self._jobs(), key=lambda status: status.job)

    def logs(
        self, run_id: str, *, follow: bool, container: str = "agent", job: str | None = None
    ) -> Iterator[bytes]:
        """The output of `container` in the run's newest Pod that has one (the agent's: the
        newest Job's; `job`: of that Job's Pods alone), as it comes with `follow`. The
        bytes are the Pod's: never trusted."""
        selector = f"{RUN_LABEL}={run_id}" if job is None else f"{JOB_LABEL}={job}"
        pods = self._call(
            text("kube.do_list_pods"),
            lambda: self.core.list_namespaced_pod(self.namespace, label_selector=selector),
        )
        if not pods.items:
            raise RunError(text("kube.no_pod", run=run_id, namespace=self.namespace), run_id=run_id)
        having = [p for p in pods.items if any(c.name == container for c in p.spec.containers)]
        if not having:
            raise RunError(
                text("kube.no_container_pod", run=run_id, container=container), run_id=run_id
            )
        newest = max(having, key=_started).metadata.name
        response = self._call(
            text("kube.do_read_logs"),
            lambda: self.core.read_namespaced_pod_log(
                newest, self.namespace, container=container, follow=follow, _preload_content=False
            ),
        )
        yield from response.stream(4096)

    def log(
        self, run_id: str, *, limit: int, container: str = "agent", job: str | None = None
    ) -> bytes | None:
        """The whole log of `container` (as `logs`) once it ended, or None past `limit`
        bytes: a Pod can print without end, and the caller judges what it read."""
        data = bytearray()
        for chunk in self.logs(run_id, follow=False, container=container, job=job):
            data += chunk
            if len(data) > limit:
                return None
        return bytes(data)

    def stop(self, run_id: str) -> list[str]:
        """Delete the run's Jobs (their Pods get SIGTERM: flower stops at a message
        boundary); its claim and token stay, so it can be resumed."""
        stopped = []
        for status in self._jobs(run_id):
            self._delete_job(status.job)
            stopped.append(status.job)
        if not stopped:
            raise RunError(text("kube.no_job", run=run_id, namespace=self.namespace), run_id=run_id)
        return stopped

    def wait(self, run_id: str, *, timeout_s: float, poll_s: float = 2.0) -> RunStatus:
        """The run's newest Job once it ended; a ClusterError past `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            jobs = self._jobs(run_id)
            if jobs and all(job.state != "running" for job in jobs):
                return max(jobs, key=lambda job: job.job)
            if time.monotonic() > deadline:
                raise ClusterError(text("kube.wait_timeout", run=run_id, seconds=timeout_s))
            time.sleep(poll_s)

    def remove(self, run_id: str) -> list[str]:
        """Everything of an ended run: its Jobs, volume, policy and token. Nothing to resume."""
        self._idle(run_id)
        name = f"flowerbox-{run_id}"
        calls: list[tuple[str, Callable[[], Any]]] = [
            (
                f"Job/{job.job}",
                partial(
                    self.batch.delete_namespaced_job,
                    job.job,
                    self.namespace,
                    propagation_policy="Background",
                ),
            )
            for job in self._jobs(run_id)
        ]
        networking = client.NetworkingV1Api(self.api)
        calls += [
            (
                f"NetworkPolicy/{name}",
                partial(networking.delete_namespaced_network_policy, name, self.namespace),
            ),
            (
                f"PersistentVolumeClaim/{name}",
                partial(self.core.delete_namespaced_persistent_volume_claim, name, self.namespace),
            ),
            (
                f"Secret/{name}-token",
                partial(self.core.delete_namespaced_secret, f"{name}-token", self.namespace),
            ),
        ]
        removed = []
        for what, call in calls:
            try:
                call()
            except ApiException as exc:
                if exc.status != NOT_FOUND:
                    raise ClusterError(
                        text(
                            "kube.remove_refused", what=what, status=exc.status, reason=exc.reason
                        ),
                        status=exc.status,
                    ) from exc
                continue
            removed.append(what)
        return removed


def _resumed(status: RunStatus) -> int:
    """Which resume of its run a Job is (0: the first Job, or not an agent's): the next
    resume's name is past every one there, whichever the TTL removed already."""
    if not status.agent:
        return 0
    return int(status.job.removeprefix(f"flowerbox-{status.run_id}").lstrip("-") or 0)


def token_manifest(
    spec: BoxSpec, namespace: str, token: str, *, repo: str = "", deliver_branch: bool = False
) -> Manifest:
    """The run's token Secret: the run id in its label; the budget and egress allowlist the
    broker applies, and the repository its git relay lets the run reach and the one ref it
    may push there, in its annotations (flowerbox.broker.tokens reads them), with the image
    its provenance note names."""
    notes = {ALLOW_ANNOTATION: json.dumps(list(spec.allow)), IMAGE_ANNOTATION: spec.image}
    notes[DELIVER_ANNOTATION] = delivery_ref(spec.run_id, branch=deliver_branch)
    if repo:
        notes[REPO_ANNOTATION] = repo
    if spec.budget_usd is not None:
        notes = {BUDGET_ANNOTATION: str(spec.budget_usd), **notes}
    if spec.allow_api_fetch:
        notes[API_FETCH_ANNOTATION] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": token_secret(spec),
            "namespace": namespace,
            "labels": labels(spec, TOKEN_ROLE),
            "annotations": notes,
        },
        "type": "Opaque",
        "stringData": {TOKEN_KEY: token},
    }


def _started(pod: Any) -> tuple[float, str]:
    """When a Pod was made (its name breaks ties): the newest is a resume's."""
    made = pod.metadata.creation_timestamp
    return (made.timestamp() if made is not None else 0.0, pod.metadata.name)


def _status(job: Any) -> RunStatus:
    state = job.status or client.V1JobStatus()  # none yet: the controller has not seen it
    if state.succeeded:
        word = "succeeded"
    elif state.failed:
        word = "failed"
    else:
        word = "running"
    return RunStatus(job.metadata.labels[RUN_LABEL], job.metadata.name, word)
