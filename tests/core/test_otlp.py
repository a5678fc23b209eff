"""flower.core.otlp's reading of the standard variables (the export itself is tested end to
end against a receiver: tests/cli/test_traces.py)."""

from __future__ import annotations

import pytest

from flower.core.otlp import (
    check_traces,
    export_trace,
    protocol,
    trace_content_wanted,
    traces_wanted,
)
from flower.core.trace import build_trace
from flower.errors import UsageError
from tests.core.test_trace import ev, row
from tests.otlp import Receiver

URL = "http://127.0.0.1:4318"


def test_traces_are_on_only_with_an_endpoint_and_off_by_the_sdks_switch() -> None:
    assert not traces_wanted({})
    assert not traces_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "})
    assert traces_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": URL})
    assert traces_wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": URL + "/v1/traces"})
    assert not traces_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": URL, "OTEL_SDK_DISABLED": "TRUE"})


def test_the_traces_protocol_wins_over_the_general_one() -> None:
    assert protocol({}) == "http/protobuf"
    assert protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == "grpc"
    both = {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }
    assert protocol(both) == "http/protobuf"


def test_a_protocol_without_its_exporter_says_what_to_install() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    with pytest.raises(UsageError, match="pip install opentelemetry-exporter-otlp-proto-grpc"):
        check_traces(env)  # the gRPC exporter is not in the otel extra
    check_traces({"OTEL_EXPORTER_OTLP_ENDPOINT": URL})


def test_the_conversation_only_on_the_conventions_opt_in() -> None:
    name = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
    assert not trace_content_wanted({})
    assert not trace_content_wanted({name: "false"})
    assert trace_content_wanted({name: "True"}) and trace_content_wanted({name: "SPAN_ONLY"})


def test_what_utf_8_cannot_hold_and_key_shapes_never_reach_the_receiver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "sk-ant-api03-" + "z" * 30
    lines = [
        ev(0.1, "step", "干活"),
        ev(0.5, "tool_call", "x", "Bash\ud800" + key, id="t1"),  # a box's JSON can say "\ud800"
        ev(0.6, "ask", "?", id="q\udfff", state="asked"),
    ]
    spans = build_trace("r1", lines, [row("干活\ud800", 0, 3)])
    with Receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        sent, line = export_trace(spans)
        got = receiver.spans()
        body = b"".join(body for _, body in receiver.bodies)
    assert sent and line == f"trace {got[0].trace_id} sent ({len(spans)} spans)"
    assert len(got) == len(spans)
    assert {s.name for s in got} >= {"invoke_agent 干活?", "execute_tool Bash?[redacted]"}
    assert key.encode() not in body and b"sk-ant-" not in body
