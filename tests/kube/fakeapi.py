"""A fake Kubernetes API server on loopback: enough of the REST API for flowerbox.kube.cluster
(create, get, list by label, delete, a Pod's log) and for the broker's run tokens (a Secret's
stringData kept as data, resource versions, `?watch=true` streaming what changes), with every
request recorded, so the official client runs end to end, its serialization and HTTP
included, up to the wire.

`FakeKube.run` plays the Job controller and the kubelet: given a created Job, it returns what
its Pod printed (or None: the Job stays running, no Pod); the server then makes the Pod (the
Job's Pod template, labelled `job-name` as the controller does) with that log, and marks the
Job succeeded."""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

PATH = re.compile(
    r"^/(?:api/v1|apis/[^/]+/[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+))?(?P<log>/log)?$"
)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


@dataclass
class FakeKube:
    """What the server holds: objects by (plural, name), the requests, each Pod's log, and
    each change made through `put` and `delete` (what a watch streams)."""

    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    logs: dict[str, bytes] = field(default_factory=dict)
    run: Callable[[dict[str, Any]], bytes | None] = lambda job: None
    url: str = ""
    changes: list[tuple[int, str, str, dict[str, Any]]] = field(default_factory=list)
    version: int = 0
    closed: bool = False
    watches: int = 0  # open now: a test waits for one before changing what it watches
    changed: threading.Condition = field(default_factory=threading.Condition)

    def created(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.method == "POST"]

    def put(self, plural: str, obj: dict[str, Any]) -> None:
        """Add an object as the API server does: a Secret's stringData becomes base64 data,
        and it gets the next resource version."""
        obj = json.loads(json.dumps(obj))  # what was sent stays as it was sent
        with self.changed:
            self.version += 1
            obj["metadata"]["resourceVersion"] = str(self.version)
            if plural == "secrets" and "stringData" in obj:
                text = obj.pop("stringData")
                obj["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in text.items()}
            self.objects[(plural, obj["metadata"]["name"])] = obj
            self.changes.append((self.version, "ADDED", plural, obj))
            self.changed.notify_all()

    def modify(self, plural: str, name: str, **fields: Any) -> None:
        """Change an object's top-level `fields` (a Job's status, as its controller does),
        with the next resource version: a watch streams it as MODIFIED."""
        with self.changed:
            obj = json.loads(json.dumps(self.objects[(plural, name)] | fields))
            self.version += 1
            obj["metadata"]["resourceVersion"] = str(self.version)
            self.objects[(plural, name)] = obj
            self.changes.append((self.version, "MODIFIED", plural, obj))
            self.changed.notify_all()

    def delete(self, plural: str, name: str) -> dict[str, Any] | None:
        with self.changed:
            gone = self.objects.pop((plural, name), None)
            if gone is not None:
                self.version += 1
                self.changes.append((self.version, "DELETED", plural, gone))
                self.changed.notify_all()
            return gone

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()


def _selected(obj: dict[str, Any], selector: str) -> bool:
    tags = obj.get("metadata", {}).get("labels", {})
    key, _, value = selector.partition("=")
    return key in tags and (not value or tags[key] == value)


def _ran(kube: FakeKube, job: dict[str, Any], printed: bytes) -> None:
    """The Job's one Pod, which printed `printed` and succeeded."""
    name = job["metadata"]["name"]
    template = job["spec"]["template"]
    pod = f"{name}-fake1"
    tags = {**template["metadata"]["labels"], "job-name": name}
    made = {"name": pod, "labels": tags, "creationTimestamp": "2026-12-02T10:15:00Z"}
    kube.put("pods", {"metadata": made, "spec": template["spec"]})
    kube.logs[pod] = printed
    kube.modify("jobs", name, status={"succeeded": 1})


def _handler(kube: FakeKube) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test reads kube.requests."""

        def _answer(self, status: int, body: Any, *, raw: bytes | None = None) -> None:
            data = raw if raw is not None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header(
                "Content-Type", "text/plain" if raw is not None else "application/json"
            )
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _status(self, code: int, reason: str) -> None:
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
            self._answer(code, body | {"reason": reason})

        def _serve(self) -> None:
            split = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            query = parse_qs(split.query)
            kube.requests.append(Request(self.command, split.path, query, body))
            found = PATH.match(split.path)
            if found is None:
                return self._status(404, "NotFound")
            plural, name = found["plural"], found["name"]
            if found["log"]:
                return self._answer(200, None, raw=kube.logs.get(name, b""))
            if self.command == "POST":
                key = (plural, body["metadata"]["name"])
                if key in kube.objects:
                    return self._status(409, "AlreadyExists")
                kube.put(plural, body)
                if plural == "jobs" and (printed := kube.run(body)) is not None:
                    _ran(kube, kube.objects[key], printed)
                return self._answer(201, body)
            if self.command == "DELETE":
                gone = kube.delete(plural, name)
                if gone is None:
                    return self._status(404, "NotFound")
                # As the real API: a claim's delete answers the object, most others a Status.
                done = {"kind": "Status", "apiVersion": "v1", "status": "Success"}
                return self._answer(200, gone if plural == "persistentvolumeclaims" else done)
            if name is not None:
                if (plural, name) not in kube.objects:
                    return self._status(404, "NotFound")
                return self._answer(200, kube.objects[(plural, name)])
            selector = query.get("labelSelector", [""])[0]
            if query.get("watch") == ["true"]:
                return self._watch(plural, selector, query)
            with kube.changed:
                items = [
                    o
                    for (p, _), o in kube.objects.items()
                    if p == plural and _selected(o, selector)
                ]
                meta = {"resourceVersion": str(kube.version)}
            return self._answer(
                200, {"apiVersion": "v1", "kind": "List", "metadata": meta, "items": items}
            )

        def _watch(self, plural: str, selector: str, query: dict[str, list[str]]) -> None:
            """One JSON line per change after the given resource version, as it happens,
            until timeoutSeconds: a chunk each, as the API server sends them (the client
            reads a watch chunk by chunk)."""
            seen = int(query.get("resourceVersion", ["0"])[0] or 0)
            deadline = time.monotonic() + float(query.get("timeoutSeconds", ["30"])[0])
            self.protocol_version = "HTTP/1.1"
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            kube.watches += 1
            try:  # (a watcher gone shows as a failed write: the handler ends)
                while time.monotonic() < deadline:
                    with kube.changed:
                        if kube.closed:
                            return
                        fresh = [c for c in kube.changes if c[0] > seen]
                        if not fresh:
                            kube.changed.wait(0.2)
                            continue
                    for version, kind, where, obj in fresh:
                        seen = version
                        if where == plural and _selected(obj, selector):
                            line = json.dumps({"type": kind, "object": obj}).encode() + b"\n"
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                            self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            finally:
                kube.watches -= 1

        do_GET = do_POST = do_DELETE = _serve

    return Handler


def write_kubeconfig(path: Path, kube: FakeKube) -> Path:
    """A kubeconfig at `path` whose current context is the fake server."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": kube.url}}],
        "users": [{"name": "me", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}],
        "current-context": "fake",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@contextmanager
def fake_kube() -> Iterator[FakeKube]:
    kube = FakeKube()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(kube))
    kube.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield kube
    finally:
        kube.close()
        server.shutdown()
        server.server_close()
