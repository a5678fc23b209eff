"""Exporting a run's spans (flower.core.trace) over OTLP, by the OpenTelemetry SDK, configured
by the standard variables: on only when OTEL_EXPORTER_OTLP_ENDPOINT or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, and nothing of OpenTelemetry is imported otherwise.

    if traces_wanted():
        check_traces()                   # before the run: the extra, the protocol (UsageError)
    ...
    sent, line = export_trace(spans)     # after it: whether the receiver took it, and a line

The SDK reads the rest itself: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the resource),
OTEL_EXPORTER_OTLP_[TRACES_]HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE; OTEL_SDK_DISABLED=true
turns it all off (nothing imported, as unset).
The protocol is http/protobuf unless OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL says grpc (which
needs the gRPC exporter installed). The conversation's texts go only when
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT asks for them, and every text, asked for or
not, passes `credential_redactor()`: the credentials this process holds never leave in a span.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flower.core.env import CREDENTIALS
from flower.core.lang import text
from flower.core.trace import Span
from flower.errors import UsageError

__all__ = [
    "CONTENT_ENV",
    "check_traces",
    "credential_redactor",
    "export_trace",
    "trace_content_wanted",
    "traces_wanted",
]

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CONTENT_ON = {"true", "1", "span_only", "span_and_event"}
INSTALL = "pip install 'flowerbox[otel]'"
REDACTED = "[redacted]"
SCOPE = "flower"
_ANTHROPIC_KEY = re.compile(r"sk-ant-[A-Za-z0-9_-]*")


def traces_wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether traces are asked for: an OTLP endpoint variable is set (and not empty), and
    OTEL_SDK_DISABLED does not say true."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINTS)


def trace_content_wanted(env: Mapping[str, str] | None = None) -> bool:
    """The convention's opt-in to the conversation's texts in spans."""
    env = os.environ if env is None else env
    return env.get(CONTENT_ENV, "").strip().lower() in _CONTENT_ON


def protocol(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    for name in PROTOCOLS:
        if env.get(name, "").strip():
            return env[name].strip().lower()
    return "http/protobuf"


def check_traces(env: Mapping[str, str] | None = None) -> None:
    """Raise UsageError (one sentence: what to install or set) when traces are asked for and
    cannot be sent; do it before a run spends anything."""
    env = os.environ if env is None else env
    name = next(n for n in ENDPOINTS if env.get(n, "").strip())
    try:
        import opentelemetry.sdk.trace  # noqa: F401  # lazy: the extra, only when asked for
    except ImportError:
        raise UsageError(text("otlp.no_sdk", name=name, install=INSTALL)) from None
    match protocol(env):
        case "http/protobuf":
            module = "opentelemetry.exporter.otlp.proto.http"
            package = INSTALL
        case "grpc":
            module = "opentelemetry.exporter.otlp.proto.grpc"
            package = "pip install opentelemetry-exporter-otlp-proto-grpc"
        case other:
            raise UsageError(text("otlp.protocol", protocol=repr(other)))
    try:
        __import__(module)
    except ImportError:
        said = text("otlp.no_exporter", protocol=protocol(env), module=module, package=package)
        raise UsageError(said) from None


def credential_redactor(env: Mapping[str, str] | None = None) -> Callable[[str], str]:
    """A function that blanks out every credential value this process holds, and anything
    shaped like an Anthropic key."""
    env = os.environ if env is None else env
    secrets = sorted({env[k] for k in CREDENTIALS if len(env.get(k, "")) >= 8}, key=len)[::-1]

    def redact(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, REDACTED)
        return _ANTHROPIC_KEY.sub(REDACTED, text)

    return redact


def export_trace(spans: Sequence[Span], env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """Send `spans` (root first, a parent before its children) as one trace: whether the
    receiver took them, and a line to tell (the trace id, or why not). `check_traces()` must
    have passed."""
    env = os.environ if env is None else env
    # lazy: OpenTelemetry is imported only when traces are asked for (the extra)
    from opentelemetry import trace as api
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExportResult

    class Kept(SpanProcessor):
        """Keeps every ended span, so that one export call sends them and says how it went."""

        def __init__(self) -> None:
            self.spans: list[ReadableSpan] = []

        def on_end(self, span: ReadableSpan) -> None:
            self.spans.append(span)

    kept = Kept()
    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(kept)
    tracer = provider.get_tracer(SCOPE)
    redact = _utf8(credential_redactor(env))
    made: dict[str, Any] = {}
    for span in spans:
        parent = made.get(span.parent) if span.parent else None
        context = api.set_span_in_context(parent) if parent is not None else None
        live = tracer.start_span(
            redact(span.name),
            context=context,
            kind=api.SpanKind.CLIENT if span.client else api.SpanKind.INTERNAL,
            attributes=_clean(span.attributes, redact),
            start_time=_ns(span.start),
        )
        for event in span.events:
            attributes = _clean(event.attributes, redact)
            live.add_event(redact(event.name), attributes, timestamp=_ns(event.t))
        if span.error is not None:
            live.set_status(api.Status(api.StatusCode.ERROR, redact(span.error)))
        made[span.key] = live
    for span in reversed(spans):  # children end before their parents
        made[span.key].end(end_time=_ns(span.end))
    if not kept.spans:
        return True, "traces: the sampler (OTEL_TRACES_SAMPLER) dropped this run's trace"
    trace_id = format(kept.spans[0].context.trace_id, "032x")
    exporter = _exporter(env)
    try:
        result = exporter.export(kept.spans)
    except Exception as exc:  # noqa: BLE001 - a trace never costs the run: said, not raised
        return False, f"traces: could not send the run's trace ({type(exc).__name__}: {exc})"
    finally:
        exporter.shutdown()
        provider.shutdown()
    if result is not SpanExportResult.SUCCESS:
        return False, f"traces: the OTLP receiver did not take the run's {len(kept.spans)} spans"
    return True, f"trace {trace_id} sent ({len(kept.spans)} spans)"


def _exporter(env: Mapping[str, str]) -> Any:
    if protocol(env) == "grpc":
        # lazy: a package of its own, installed by those who chose gRPC
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
            OTLPSpanExporter as Grpc,
        )

        return Grpc()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # lazy: the extra
        OTLPSpanExporter,
    )

    return OTLPSpanExporter()


def _utf8(redact: Callable[[str], str]) -> Callable[[str], str]:
    """`redact`, then whatever UTF-8 cannot hold (a lone surrogate a box wrote in JSON)
    replaced: protobuf refuses such a string, and the whole trace with it."""

    def clean(text: str) -> str:
        return redact(text).encode("utf-8", "replace").decode("utf-8")

    return clean


def _clean(attributes: Mapping[str, Any], redact: Callable[[str], str]) -> dict[str, Any]:
    return {k: redact(v) if isinstance(v, str) else v for k, v in attributes.items()}


def _ns(t: float) -> int:
    return int(t * 1_000_000_000)
