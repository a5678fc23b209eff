"""A fake Kubernetes API server on loopback: enough of the REST API for flowerbox.kube.cluster
(create, get, list by label, delete, a Pod's log), with every request recorded, so the
official client runs end to end, its serialization and HTTP included, up to the wire."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
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
    url: str = ""

    def created(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.method == "POST"]


def _selected(obj: dict[str, Any], selector: str) -> bool:
    tags = obj.get("metadata", {}).get("labels", {})
    key, _, value = selector.partition("=")
    return key in tags and (not value or tags[key] == value)


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
                kube.objects[key] = body
                return self._answer(201, body)
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
