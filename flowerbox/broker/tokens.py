"""Where a broker on a cluster learns its runs: each run's token Secret in its namespace
(flowerbox.kube.cluster makes it when the run starts, and deletes it when the run is
removed), and whether a Job holding that token runs, through the official `kubernetes`
client.

    source = TokenSource.connect(namespace="flowerbox")   # in-cluster, else the kubeconfig
    threading.Thread(target=source.follow, args=(broker, stopping), daemon=True).start()

`follow` lists the Secrets labelled as run tokens (`sync`: the runs not listed are revoked,
the new ones served), then watches them: a Secret added is a run served, one deleted a run
revoked; when a watch ends (its timeout, an error, the API server gone) it lists again. The
runs' Jobs are followed the same way, on a thread of their own (`Holders`): a run's token
is served only while a Job whose Pod reads it runs (its own, a resume's, its deliver Job),
so it is worth nothing once the run ends, not only once it is removed; a resume or a
deliver serves it again for that Job's life. The broker's Role lets it get, list and watch
Secrets and Jobs in its namespace, nothing else (flowerbox.kube.render). A Secret is read
for its run id (label), its token (only hashed here), budget and allowlist (annotations);
one that holds something else is left out with a line on stderr, never a reason to serve no
other run.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from flower import text
from flowerbox.broker.listener import RunToken
from flowerbox.errors import BrokerError, FlowerboxError
from flowerbox.wire import (
    ALLOW_ANNOTATION,
    API_FETCH_ANNOTATION,
    BUDGET_ANNOTATION,
    DELIVER_ANNOTATION,
    DELIVERY_BRANCH,
    IMAGE_ANNOTATION,
    KUBE_ROLE_LABEL,
    KUBE_RUN_LABEL,
    REPO_ANNOTATION,
    TOKEN_KEY,
    TOKEN_ROLE,
    TOKEN_SECRET,
)

__all__ = ["SELECTOR", "Holders", "TokenSource", "ended", "holds_token", "run_token"]

SELECTOR = f"{KUBE_ROLE_LABEL}={TOKEN_ROLE}"
WATCH_S = 300  # a watch is ended and the Secrets listed again at least this often
RETRY_S = 5.0  # after the API server failed or refused
IN_CLUSTER = "KUBERNETES_SERVICE_HOST"  # set in every Pod: the service account's config


class Runs(Protocol):
    """What `follow` tells: flowerbox.broker.listener.ClusterBroker."""

    def sync(self, told: list[RunToken]) -> None: ...
    def learn(self, told: RunToken) -> None: ...
    def revoke(self, run_id: str) -> bool: ...
    def running(self, run_ids: frozenset[str]) -> None: ...
    def line(self, text: str) -> None: ...


def run_token(secret: Any) -> RunToken:
    """The run a token Secret (the client's V1Secret) tells of.

    Raises:
        ValueError: no run id, no token, or a budget or allowlist that is not one.
    """
    meta = secret.metadata
    run_id = (meta.labels or {}).get(KUBE_RUN_LABEL)
    encoded = (secret.data or {}).get(TOKEN_KEY)
    if not run_id or not encoded:
        raise ValueError(f"Secret {meta.name} has no {KUBE_RUN_LABEL} label or no {TOKEN_KEY}")
    try:
        token = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"Secret {meta.name}: its {TOKEN_KEY} is not base64") from exc
    notes = meta.annotations or {}
    budget = notes.get(BUDGET_ANNOTATION)
    try:
        allow = json.loads(notes.get(ALLOW_ANNOTATION) or "[]")
    except RecursionError:  # no ValueError, and it would end the watch: no run learned again
        raise ValueError(f"Secret {meta.name}: {ALLOW_ANNOTATION} is nested too deep") from None
    if not isinstance(allow, list) or not all(isinstance(entry, str) for entry in allow):
        raise ValueError(f"Secret {meta.name}: {ALLOW_ANNOTATION} is not a JSON list of names")
    return RunToken(
        run_id=run_id,
        token_sha256=hashlib.sha256(token).hexdigest(),
        budget_usd=None if budget is None else float(budget),
        allow=tuple(allow),
        repo=notes.get(REPO_ANNOTATION, ""),
        image=notes.get(IMAGE_ANNOTATION, ""),
        namespace=meta.namespace or "",
        allow_api_fetch=notes.get(API_FETCH_ANNOTATION) == "true",
        # its own branch, named exactly; anything else: refs/flowerbox/<run-id>
        deliver_branch=notes.get(DELIVER_ANNOTATION) == DELIVERY_BRANCH.format(run_id=run_id),
    )


class TokenSource:
    """The run token Secrets of one namespace, through an ApiClient."""

    def __init__(self, api: client.ApiClient, *, namespace: str, watch_s: int = WATCH_S) -> None:
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.namespace = namespace
        self.watch_s = watch_s

    @classmethod
    def connect(cls, *, namespace: str) -> TokenSource:
        """The service account's API access in a Pod; elsewhere the kubeconfig's current
        context (KUBECONFIG, else ~/.kube/config), read only.

        Raises:
            BrokerError: neither is usable.
        """
        try:
            if os.environ.get(IN_CLUSTER):
                config.load_incluster_config()  # type: ignore[no-untyped-call]
                return cls(client.ApiClient(), namespace=namespace)
            path = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
            api = config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=path, persist_config=False
            )
        except (ConfigException, OSError) as exc:
            raise BrokerError(text("broker.no_cluster", problem=exc)) from exc
        return cls(api, namespace=namespace)

    def follow(self, runs: Runs, stopping: threading.Event) -> None:
        """The run tokens' Secrets (here) and the runs' Jobs (on a thread of its own), each
        listed, then watched, again and again until `stopping` is set."""
        holders = Holders()
        jobs = (self.batch.list_namespaced_job, KUBE_RUN_LABEL, holders.listed, holders.changed)
        threading.Thread(
            target=self._follow, args=("the runs' Jobs", *jobs, runs, stopping), daemon=True
        ).start()
        secrets = (self.core.list_namespaced_secret, SELECTOR)
        self._follow("the run tokens", *secrets, self._listed, self._changed, runs, stopping)

    def _follow(
        self,
        what: str,
        listing: Callable[..., Any],
        selector: str,
        listed: Callable[[Runs, list[Any]], None],
        changed: Callable[[Runs, str, Any], None],
        runs: Runs,
        stopping: threading.Event,
    ) -> None:
        while not stopping.is_set():
            try:
                found = listing(self.namespace, label_selector=selector)
                listed(runs, found.items)
                version = found.metadata.resource_version if found.metadata else None
                # the client's watch module has no annotations (its models and APIs have)
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    listing,
                    self.namespace,
                    label_selector=selector,
                    resource_version=version,
                    timeout_seconds=self.watch_s,
                )
                for event in stream:
                    if stopping.is_set():
                        return
                    changed(runs, event["type"], event["object"])
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                runs.line(f"cannot read {what} in namespace {self.namespace}: {exc}")
                stopping.wait(RETRY_S)

    def _listed(self, runs: Runs, secrets: list[Any]) -> None:
        runs.sync(list(self._told(runs, secrets)))

    def _changed(self, runs: Runs, kind: str, secret: Any) -> None:
        if kind == "DELETED":
            run_id = (secret.metadata.labels or {}).get(KUBE_RUN_LABEL)
            if run_id and runs.revoke(run_id):
                runs.line(f"run {run_id}: its Secret was deleted; its token is revoked")
        elif kind in ("ADDED", "MODIFIED"):
            for told in self._told(runs, [secret]):
                try:
                    runs.learn(told)
                except FlowerboxError as exc:
                    runs.line(f"run {told.run_id}: {exc}")

    @staticmethod
    def _told(runs: Runs, secrets: Iterable[Any]) -> Iterable[RunToken]:
        for secret in secrets:
            try:
                yield run_token(secret)
            except ValueError as exc:
                runs.line(f"a run token Secret left out: {exc}")


class Holders:
    """The runs' Jobs that hold their run's token (a container of its Pod reads the token's
    Secret: the run's own Job, a resume's, its deliver Job; not a drop or read Job) and are
    running; after each change, `runs.running` is told the runs that have one. A Job that
    ended (succeeded, failed, past its deadline) or is being deleted holds nothing."""

    def __init__(self) -> None:
        self.jobs: dict[str, str] = {}  # Job name -> its run id

    def listed(self, runs: Runs, jobs: list[Any]) -> None:
        self.jobs = {}
        for job in jobs:
            self._take(job)
        runs.running(frozenset(self.jobs.values()))

    def changed(self, runs: Runs, kind: str, job: Any) -> None:
        self.jobs.pop(job.metadata.name, None)
        if kind != "DELETED":
            self._take(job)
        runs.running(frozenset(self.jobs.values()))

    def _take(self, job: Any) -> None:
        run_id = (job.metadata.labels or {}).get(KUBE_RUN_LABEL)
        if run_id and holds_token(job, run_id) and not ended(job):
            self.jobs[job.metadata.name] = run_id


def holds_token(job: Any, run_id: str) -> bool:
    """Whether a container of the Job's Pod reads the run's token from its Secret."""
    pod = job.spec.template.spec if job.spec and job.spec.template else None
    if pod is None:
        return False
    boxes = [*(pod.init_containers or []), *(pod.containers or [])]
    refs = [env.value_from for box in boxes for env in box.env or [] if env.value_from]
    secret = TOKEN_SECRET.format(run_id=run_id)
    return any(ref.secret_key_ref and ref.secret_key_ref.name == secret for ref in refs)


def ended(job: Any) -> bool:
    """Whether a Job is done (or going): no Pod of it runs again."""
    if job.metadata.deletion_timestamp is not None:
        return True
    status = job.status
    if status is None:
        return False
    done = {"Complete", "Failed", "SuccessCriteriaMet", "FailureTarget"}
    finished = any(c.type in done and c.status == "True" for c in status.conditions or [])
    return finished or bool(status.succeeded) or bool(status.failed)
