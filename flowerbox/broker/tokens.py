"""Where a broker on a cluster learns its runs: each run's token Secret in its namespace
(flowerbox.kube.cluster makes it when the run starts, and deletes it when the run is
removed), through the official `kubernetes` client.

    source = TokenSource.connect(namespace="flowerbox")   # in-cluster, else the kubeconfig
    threading.Thread(target=source.follow, args=(broker, stopping), daemon=True).start()

`follow` lists the Secrets labelled as run tokens (`sync`: the runs not listed are revoked,
the new ones served), then watches them: a Secret added is a run served, one deleted a run
revoked; when a watch ends (its timeout, an error, the API server gone) it lists again. The
broker's Role lets it get, list and watch Secrets in its namespace, nothing else
(flowerbox.kube.render). A Secret is read for its run id (label), its token (only hashed
here), budget and allowlist (annotations); one that holds something else is left out with a
line on stderr, never a reason to serve no other run.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from flowerbox.broker.listener import RunToken
from flowerbox.errors import BrokerError, FlowerboxError
from flowerbox.wire import (
    ALLOW_ANNOTATION,
    BUDGET_ANNOTATION,
    DELIVER_ANNOTATION,
    DELIVERY_BRANCH,
    DELIVERY_REF,
    IMAGE_ANNOTATION,
    KUBE_ROLE_LABEL,
    KUBE_RUN_LABEL,
    REPO_ANNOTATION,
    TOKEN_KEY,
    TOKEN_ROLE,
)

__all__ = ["SELECTOR", "TokenSource", "run_token"]

SELECTOR = f"{KUBE_ROLE_LABEL}={TOKEN_ROLE}"
WATCH_S = 300  # a watch is ended and the Secrets listed again at least this often
RETRY_S = 5.0  # after the API server failed or refused
IN_CLUSTER = "KUBERNETES_SERVICE_HOST"  # set in every Pod: the service account's config


class Runs(Protocol):
    """What `follow` tells: flowerbox.broker.listener.ClusterBroker."""

    def sync(self, told: list[RunToken]) -> None: ...
    def learn(self, told: RunToken) -> None: ...
    def revoke(self, run_id: str) -> bool: ...
    def line(self, text: str) -> None: ...


def run_token(secret: Any) -> RunToken:
    """The run a token Secret (the client's V1Secret) tells of.

    Raises:
        ValueError: no run id, no token, a budget or allowlist that is not one, or a
            delivery ref that is not one of the run's two.
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
    ref = notes.get(DELIVER_ANNOTATION, DELIVERY_REF.format(run_id=run_id))
    if ref not in (DELIVERY_REF.format(run_id=run_id), DELIVERY_BRANCH.format(run_id=run_id)):
        raise ValueError(f"Secret {meta.name}: {DELIVER_ANNOTATION} {ref!r} is not its run's")
    return RunToken(
        run_id=run_id,
        token_sha256=hashlib.sha256(token).hexdigest(),
        budget_usd=None if budget is None else float(budget),
        allow=tuple(allow),
        repo=notes.get(REPO_ANNOTATION, ""),
        image=notes.get(IMAGE_ANNOTATION, ""),
        namespace=meta.namespace or "",
        deliver_branch=ref == DELIVERY_BRANCH.format(run_id=run_id),
    )


class TokenSource:
    """The run token Secrets of one namespace, through an ApiClient."""

    def __init__(self, api: client.ApiClient, *, namespace: str, watch_s: int = WATCH_S) -> None:
        self.core = client.CoreV1Api(api)
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
            raise BrokerError(
                f"--listen learns the runs from the cluster, and no cluster is reachable ({exc}):"
                " run the broker in its Pod (flowerbox kube render --broker-manifests) or set"
                " KUBECONFIG"
            ) from exc
        return cls(api, namespace=namespace)

    def follow(self, runs: Runs, stopping: threading.Event) -> None:
        """List, then watch, again and again until `stopping` is set."""
        while not stopping.is_set():
            try:
                listed = self.core.list_namespaced_secret(self.namespace, label_selector=SELECTOR)
                runs.sync(list(self._told(runs, listed.items)))
                version = listed.metadata.resource_version if listed.metadata else None
                self._watch(runs, version, stopping)
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                runs.line(f"cannot read the run tokens in namespace {self.namespace}: {exc}")
                stopping.wait(RETRY_S)

    def _watch(self, runs: Runs, version: str | None, stopping: threading.Event) -> None:
        # the client's watch module has no annotations (its models and APIs have)
        stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
            self.core.list_namespaced_secret,
            self.namespace,
            label_selector=SELECTOR,
            resource_version=version,
            timeout_seconds=self.watch_s,
        )
        for event in stream:
            if stopping.is_set():
                return
            secret = event["object"]
            if event["type"] == "DELETED":
                run_id = (secret.metadata.labels or {}).get(KUBE_RUN_LABEL)
                if run_id and runs.revoke(run_id):
                    runs.line(f"run {run_id}: its Secret was deleted; its token is revoked")
            elif event["type"] in ("ADDED", "MODIFIED"):
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
