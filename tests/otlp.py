"""An OTLP/HTTP receiver on loopback for tests: it keeps every body it is sent and decodes the
traces with the official protobuf messages (opentelemetry-proto's ExportTraceServiceRequest),
so what the tests read is what any collector would have read, not what flower meant to send.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class Received:
    """One span as the receiver decoded it."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: float
    end: float
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    error: bool
    kind: str  # SPAN_KIND_CLIENT, SPAN_KIND_INTERNAL...
    resource: dict[str, Any]


class Receiver:
    """`with Receiver() as receiver:` serves POST /v1/traces on 127.0.0.1 (port 0)."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, bytes]] = []  # (path, body as sent, before any gunzip)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.bodies.append((self.path, body))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[Received]:
        """Every span of every trace request received, decoded."""
        return list(self._spans())

    def _spans(self) -> Iterator[Received]:
        for path, body in self.bodies:
            assert path == "/v1/traces", path
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                resource = _attrs(resource_spans.resource.attributes)
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        yield Received(
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            name=span.name,
                            start=span.start_time_unix_nano / 1e9,
                            end=span.end_time_unix_nano / 1e9,
                            attributes=_attrs(span.attributes),
                            events=[(e.name, _attrs(e.attributes)) for e in span.events],
                            error=span.status.code == span.status.STATUS_CODE_ERROR,
                            kind=span.SpanKind.Name(span.kind),
                            resource=resource,
                        )


def _attrs(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)
