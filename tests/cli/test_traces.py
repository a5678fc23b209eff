"""Traces by the standard (issue 33, items 1 and 5): a real `flower "ask"` on the fake model,
exported by the OpenTelemetry SDK over OTLP/HTTP to a loopback receiver that decodes it with
the official protobuf messages (tests/otlp.py). The span tree, the GenAI attributes, tokens
and cost must equal the run's manifest; the key must be nowhere in the bytes sent."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from flower.core.spend import call_cost
from flower.testing import (
    DEMO_ASK,
    FakeAPI,
    Usage,
    http_error,
    sequence,
    starter_cast,
    text,
    tool,
)
from tests.cli.conftest import flower
from tests.otlp import Received, Receiver

KEY = "sk-ant-api03-otel-test-key-0123456789abcdef"
# Weighty answers: thousands of output tokens (what a stream's start undercounts) and cached
# input (priced apart), so a figure that misses either is off by cents.
WEIGHT = Usage(output_tokens=3000, cache_read_input_tokens=40_000)
TOKENS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def traced_env(env: dict[str, str], receiver: Receiver, **more: str) -> dict[str, str]:
    return {
        **env,
        "ANTHROPIC_API_KEY": KEY,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": "agents-ci",
        "OTEL_RESOURCE_ATTRIBUTES": "team=platform,deployment.environment=test",
        **more,
    }


def weighty(api: FakeAPI) -> None:
    cast = starter_cast()
    api.script = lambda request: replace(cast(request), usage=WEIGHT)


def tree(spans: list[Received]) -> dict[str, list[Received]]:
    children: dict[str, list[Received]] = {}
    for span in spans:
        children.setdefault(span.parent_id, []).append(span)
    return children


def ancestors(span: Received, by_id: dict[str, Received]) -> list[str]:
    names = []
    while span.parent_id:
        span = by_id[span.parent_id]
        names.append(span.name)
    return names


def test_a_run_lands_in_a_receiver_as_one_trace_with_the_manifests_figures(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    weighty(fake_api)
    with Receiver() as receiver:
        env = traced_env(cli_env, receiver)
        done = flower(
            DEMO_ASK, "--timeout", "0", "-w", str(workspace), env=env, cwd=workspace.parent
        )
        spans = receiver.spans()
        sent = b"".join(body for _, body in receiver.bodies)
    assert done.returncode == 0, done.stderr
    rows = json.loads((workspace.parent / "runs" / "manifest.json").read_text())

    assert len({s.trace_id for s in spans}) == 1  # one trace per run
    assert f"trace {spans[0].trace_id} sent ({len(spans)} spans)" in done.stdout
    by_id = {s.span_id: s for s in spans}
    children = tree(spans)
    (root,) = children[""]
    assert root.name == "invoke_workflow flower"
    assert root.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert root.attributes["flower.run.id"] == rows[0]["run"]
    # The resource the SDK made of the standard variables.
    assert root.resource["service.name"] == "agents-ci"
    assert root.resource["team"] == "platform"
    assert root.resource["deployment.environment"] == "test"

    # A span per manifest row (step, round, ruling), in order, with the row's figures.
    steps = sorted(children[root.span_id], key=lambda s: s.start)
    assert [s.name for s in steps] == [f"invoke_agent {row['step']}" for row in rows]
    for step, row in zip(steps, rows, strict=True):
        assert step.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert step.attributes["gen_ai.agent.name"] == row["step"]
        assert step.attributes["flower.cost.source"] == "manifest"
        assert step.attributes["flower.cost.usd"] == round(row["cost_usd"], 9)
        usage = row["usage"]
        assert step.attributes["gen_ai.usage.output_tokens"] == usage["output_tokens"]
        assert (
            step.attributes["gen_ai.usage.cache_read.input_tokens"]
            == (usage["cache_read_input_tokens"])
        )
        assert step.attributes["gen_ai.usage.input_tokens"] == sum(
            usage[name] for name in TOKENS if name != "output_tokens"
        )
        attempts = [c for c in children.get(step.span_id, []) if c.name.startswith("attempt ")]
        assert [a.attributes["flower.attempt.number"] for a in attempts] == [1]
        assert attempts[0].attributes["gen_ai.conversation.id"] == row["session_id"]

    # A span per API call: the GenAI attributes, final tokens, exact cost; all of them add up
    # to the manifest's figures (the calls of subagents included).
    calls = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(calls) == sum(row["usage"]["api_calls"] for row in rows)
    assert len(calls) == len(fake_api.requests)
    for call in calls:
        a = call.attributes
        assert call.name == f"chat {a['gen_ai.request.model']}"
        assert call.kind == "SPAN_KIND_CLIENT"  # the convention's kind for a model call
        assert a["gen_ai.provider.name"] == "anthropic"
        assert a["gen_ai.usage.output_tokens"] == WEIGHT.output_tokens
        assert a["gen_ai.usage.cache_read.input_tokens"] == WEIGHT.cache_read_input_tokens
        usage = {
            "input_tokens": a["flower.usage.input_tokens"],
            "output_tokens": a["gen_ai.usage.output_tokens"],
            "cache_read_input_tokens": a["gen_ai.usage.cache_read.input_tokens"],
            "cache_creation_input_tokens": a["gen_ai.usage.cache_creation.input_tokens"],
        }
        assert a["flower.cost.usd"] == round(call_cost(a["gen_ai.request.model"], usage), 9)
        assert a["flower.cost.source"] == "flower"
        assert "attempt 1" in ancestors(call, by_id)[:3]
    for name, attribute in (
        ("output_tokens", "gen_ai.usage.output_tokens"),
        ("cache_read_input_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ):
        assert sum(c.attributes[attribute] for c in calls) == sum(r["usage"][name] for r in rows)
    spent = sum(c.attributes["flower.cost.usd"] for c in calls)
    assert round(spent, 2) == round(sum(row["cost_usd"] for row in rows), 2)
    assert round(root.attributes["flower.cost.usd"], 6) == round(
        sum(row["cost_usd"] for row in rows), 6
    )

    # Tool calls: name, duration, outcome; a subagent's calls sit inside its Agent call.
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    named = Counter(s.attributes["gen_ai.tool.name"] for s in tools)
    assert named["Agent"] >= 1 and named["Write"] >= 1
    for span in tools:
        assert span.attributes["flower.tool.outcome"] in ("ok", "error", "denied")
        assert span.end >= span.start
    agent = next(s for s in tools if s.attributes["gen_ai.tool.name"] == "Agent")
    inside = [c.name for c in children.get(agent.span_id, [])]
    assert any(n.startswith("chat ") for n in inside)
    assert "execute_tool Write" in inside

    # Events: the question nobody could answer (timeout 0), the judge's verdict.
    events = {(s.name, name): attrs for s in spans for name, attrs in s.events}
    assert events[("invoke_agent 确认需求", "flower.human")] == {
        "id": "q1",
        "state": "timeout",
        "waited_s": 0.0,
    }
    judged = next(s for s in steps if "判定" in s.name)
    assert judged.attributes["flower.verdict"] == "achieved"
    assert events[(judged.name, "flower.verdict")] == {"flower.verdict": "achieved"}
    # Without the opt-in, no text of the conversation; never the key.
    assert not any("gen_ai.tool.call.arguments" in s.attributes for s in spans)
    assert not any("gen_ai.output.messages" in s.attributes for s in spans)
    assert b"hello.py" not in sent and "两条都核对过".encode() not in sent
    assert KEY.encode() not in sent and KEY[-16:].encode() not in sent


def test_the_conversation_goes_only_when_asked_for_and_never_the_key(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast()
    opt_in = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    with Receiver() as receiver:
        env = traced_env(cli_env, receiver, **opt_in)
        done = flower(
            DEMO_ASK, "--timeout", "0", "-w", str(workspace), env=env, cwd=workspace.parent
        )
        spans = receiver.spans()
        sent = b"".join(body for _, body in receiver.bodies)
    assert done.returncode == 0, done.stderr
    writes = [s for s in spans if s.attributes.get("gen_ai.tool.name") == "Write"]
    assert any("hello.py" in s.attributes["gen_ai.tool.call.arguments"] for s in writes)
    assert any("gen_ai.output.messages" in s.attributes for s in spans)
    assert KEY.encode() not in sent


def test_unset_nothing_of_opentelemetry_is_imported_or_sent(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast()
    loaded = (
        "import atexit\n"
        "atexit.register(lambda: print('LOADED', sorted(m for m in sys.modules if "
        "m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter'))), file=sys.stderr))"
    )
    done = probe_run(loaded, workspace, cli_env)
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stderr  # neither the SDK nor an exporter: nothing could send


def probe_run(code: str, workspace: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`flower "ask"` in a Python that first runs `code` (to hide a package, as a machine
    without the extra would)."""
    script = (
        f"import sys\n{code}\nfrom flower.cli.app import main\n"
        f"sys.argv = ['flower', {DEMO_ASK!r}, '--timeout', '0', '-w', {str(workspace)!r}]\n"
        "main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=workspace.parent,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def test_asked_for_without_the_extra_one_sentence_says_what_to_install(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast()
    env = {**cli_env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}
    done = probe_run("sys.modules['opentelemetry.sdk'] = None", workspace, env)
    assert done.returncode == 2, done.stderr
    assert "pip install 'flowerbox[otel]'" in done.stderr
    assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT 已设置" in done.stderr  # the suite's zh
    assert "没有安装 OpenTelemetry SDK" in done.stderr and "Traceback" not in done.stderr
    assert fake_api.requests == []  # refused before anything was spent


def test_a_protocol_the_exporter_does_not_speak_is_refused_before_the_run(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast()
    env = {
        **cli_env,
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
    }
    done = flower(DEMO_ASK, "--timeout", "0", "-w", str(workspace), env=env, cwd=workspace.parent)
    assert done.returncode == 2, done.stderr
    assert "'http/json'" in done.stderr and "http/protobuf" in done.stderr
    assert fake_api.requests == []
    box = subprocess.run(
        [sys.executable, "-m", "flowerbox", DEMO_ASK, "--timeout", "0"],
        env=env,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert box.returncode == 2, box.stderr
    assert "'http/json'" in box.stderr and "Traceback" not in box.stderr


def test_a_receiver_that_is_down_costs_a_line_not_the_run(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = starter_cast()
    with Receiver() as receiver:
        url = receiver.url  # a port that was ours and is closed now
    env = {**cli_env, "OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_EXPORTER_OTLP_TIMEOUT": "2"}
    done = flower(DEMO_ASK, "--timeout", "0", "-w", str(workspace), env=env, cwd=workspace.parent)
    assert done.returncode == 0, done.stderr
    assert "traces: the OTLP receiver did not take the run's" in done.stdout + done.stderr


def test_a_retried_step_shows_its_attempts_and_the_fault_between_them(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    write = tool("Write", {"file_path": str(workspace / "x.txt"), "content": "x\n"})
    # Three 500s: the CLI's own retries give up, flower's layer tries the step again.
    fake_api.script = sequence(replace(write, fault=http_error(500, times=3)), text("wrote x.txt"))
    with Receiver() as receiver:
        env = traced_env(cli_env, receiver)
        done = flower("once", "write x.txt", "--retries", "5", env=env, cwd=workspace)
        spans = receiver.spans()
    assert done.returncode == 0, done.stderr
    (step,) = [s for s in spans if s.name == "invoke_agent once"]
    attempts = sorted((s for s in spans if s.parent_id == step.span_id), key=lambda s: s.start)
    assert [a.attributes["flower.attempt.kind"] for a in attempts] == ["first", "retry"]
    first, second = attempts
    assert first.error and not second.error and first.end <= second.start
    assert first.attributes["error.type"] == "retry"
    names = [name for name, _ in first.events]
    assert "flower.fault" in names and "flower.retry" in names
    retry = dict(first.events)["flower.retry"]
    assert retry["source"] == "flower" and retry["attempt"] == 1
    assert step.attributes["flower.step.attempts"] == 2
    written = [s for s in spans if s.attributes.get("gen_ai.tool.name") == "Write"]
    assert [s.parent_id for s in written] == [second.span_id]
