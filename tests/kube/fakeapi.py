"""A fake Kubernetes API server on loopback: enough of the REST API for flowerbox.kube.cluster
(create, get, list by label, delete, a Pod's log), with every request recorded, so the
official client runs end to end, its serialization and HTTP included, up to the wire.

`FakeKube.run` plays the Job controller and the kubelet: given a created Job, it returns what
its Pod printed (or None: the Job stays running, no Pod); the server then makes the Pod (the
Job's Pod template, labelled `job-name` as the controller does) with that log, and marks the
Job succeeded."""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

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
    """What the server holds: objects by (plural, name), the requests, each Pod's log."""

    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    logs: dict[str, bytes] = field(default_factory=dict)
    run: Callable[[dict[str, Any]], bytes | None] = lambda job: None
    url: str = ""

    def created(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.method == "POST"]


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
    kube.objects[("pods", pod)] = {
        "metadata": {"name": pod, "labels": tags, "creationTimestamp": "2026-12-02T10:15:00Z"},
        "spec": template["spec"],
    }
    kube.logs[pod] = printed
    job["status"] = {"succeeded": 1}


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
                kept = kube.objects[key] = copy.deepcopy(body)  # the request stays as sent
                if plural == "jobs" and (printed := kube.run(kept)) is not None:
                    _ran(kube, kept, printed)
                return self._answer(201, kept)
            if self.command == "DELETE":
                gone = kube.objects.pop((plural, name), None)
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
            items = [
                o for (p, _), o in kube.objects.items() if p == plural and _selected(o, selector)
            ]
            return self._answer(
                200, {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}
            )

        do_GET = do_POST = do_DELETE = _serve

    return Handler


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
        server.shutdown()
        server.server_close()
