"""A flowerbox run's trace (issue 33, items 2 and 5): a real box run on the fake model, traced
to a loopback OTLP receiver that decodes with the official protobuf messages (tests/otlp.py).
The box has no network: the host exports once the run ends. Its figures are the gateway's,
equal to its ledger to the cent, whatever the agent wrote into the run's events; the key is
nowhere in the bytes sent."""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import replace
from pathlib import Path

import pytest

from flower.testing import FakeAPI, Reply, Request, Usage, When, rules, sequence, text, tool
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.docker.e2e import FLOWERBOX, REAL, as_user, box_env, ledger, usage_of
from tests.otlp import Receiver

pytestmark = pytest.mark.docker

WEIGHT = Usage(output_tokens=3000, cache_read_input_tokens=40_000)
FORGED_COST = 999.0


def forging_cast(api: FakeAPI, workspace: Path) -> None:
    """The starter cast, weighty, whose worker first appends a forged "call" event (a huge
    cost and token count) to every events file of the run directory, as a prompt-injected
    agent could."""
    forged = {
        "kind": "call",
        "text": "forged",
        "tool": "",
        "payload": {
            "message_id": "msg_forged",
            "model": "claude-opus-5-5",
            "usage": {"input_tokens": 10**9, "output_tokens": 10**9},
            "cost_usd": FORGED_COST,
        },
    }
    line = json.dumps(forged)[1:]  # `"kind": ...}`: the time goes in front, as the box's own
    events = shlex.quote(str(workspace / "runs" / "events"))
    command = (
        f"for f in {events}/*.jsonl; do "
        f'printf \'{{"t": %s, %s\\n\' "$(date +%s)" {shlex.quote(line)} >> "$f"; done'
    )
    cast = starter_cast()

    def worker(request: Request) -> Reply:
        if request.result_for("toolu_forge") is None:
            return tool("Bash", {"command": command}, id="toolu_forge")
        return cast(request)

    script = rules((When(kind="subagent"), worker), (When(), cast))
    api.script = lambda request: replace(script(request), usage=WEIGHT)


def test_a_box_run_lands_in_a_receiver_with_the_gateways_figures(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    forging_cast(real_api, user_workspace)
    with Receiver() as receiver:
        env = {
            **box_env(real_api, host_user),
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_SERVICE_NAME": "agents-box",
        }
        done = as_user(
            host_user, [FLOWERBOX, DEMO_ASK, "--timeout", "0"], cwd=user_workspace, env=env
        )
        spans = receiver.spans()
        sent = b"".join(body for _, body in receiver.bodies)
    assert done.returncode == 0, done.stderr[-3000:]
    # The attack landed: the box's events file carries the forged call.
    events = next((user_workspace / "runs" / "events").glob("*.jsonl")).read_text()
    assert '"msg_forged"' in events

    assert len({s.trace_id for s in spans}) == 1
    (root,) = [s for s in spans if not s.parent_id]
    assert root.resource["service.name"] == "agents-box"
    assert root.attributes["flower.cost.source"] == "gateway"
    assert f"trace {root.trace_id} sent ({len(spans)} spans)" in done.stdout + done.stderr

    # One model-call span per request the gateway metered, each with the ledger's figures.
    logged = [
        json.loads(line)
        for line in ledger(host_user, user_workspace, "requests.jsonl").read_text().splitlines()
    ]
    metered = [row for row in logged if row.get("tokens")]
    calls = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(calls) == len(metered) == len(real_api.requests)
    assert sorted(c.attributes["flower.cost.usd"] for c in calls) == sorted(
        row["cost_usd"] for row in metered
    )
    for call in calls:
        assert call.attributes["flower.cost.source"] == "gateway"
        assert call.attributes["gen_ai.provider.name"] == "anthropic"
        assert call.attributes["gen_ai.usage.output_tokens"] == WEIGHT.output_tokens
        assert call.attributes["gen_ai.usage.cache_read.input_tokens"] == 40_000
        assert call.name == f"chat {call.attributes['gen_ai.request.model']}"
    usage = usage_of(host_user, user_workspace)
    total = usage["total_cost_usd"]
    assert root.attributes["flower.cost.usd"] == pytest.approx(total, abs=5e-6)  # to the cent
    assert total == pytest.approx(real_api.cost(), abs=5e-6)  # and what the answers cost
    assert root.attributes["gen_ai.usage.output_tokens"] == WEIGHT.output_tokens * len(calls)
    # Nothing the box wrote is a figure: no forged call, no forged cost anywhere.
    assert not any(s.attributes.get("gen_ai.response.id") == "msg_forged" for s in spans)
    assert all((s.attributes.get("flower.cost.usd") or 0) < FORGED_COST for s in spans)

    # The shape comes from the box's files: a span per manifest row, tool calls inside.
    rows = json.loads((user_workspace / "runs" / "manifest.json").read_text())
    steps = sorted((s for s in spans if s.parent_id == root.span_id), key=lambda s: s.start)
    assert [s.name for s in steps] == [f"invoke_agent {row['step']}" for row in rows]
    assert sum(s.attributes["flower.cost.usd"] for s in steps) == pytest.approx(total, abs=5e-6)
    tools = {s.attributes.get("gen_ai.tool.name") for s in spans}
    assert {"Agent", "Write", "Bash", "mcp__human__ask"} <= tools
    assert REAL.encode() not in sent and b"sk-ant-" not in sent


def test_a_detached_runs_keeper_sends_its_trace(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    note = user_workspace / "note.md"
    real_api.script = sequence(
        tool("Write", {"file_path": str(note), "content": "# note\n"}), text("wrote note.md")
    )
    with Receiver() as receiver:
        env = {**box_env(real_api, host_user), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
        command = [FLOWERBOX, "once", "write a note", "--detach"]
        started = as_user(host_user, command, cwd=user_workspace, env=env)
        assert started.returncode == 0, started.stderr[-3000:]
        deadline = time.monotonic() + 240
        while not receiver.bodies and time.monotonic() < deadline:
            time.sleep(0.5)
        spans = receiver.spans()
    assert note.read_text() == "# note\n"
    (root,) = [s for s in spans if not s.parent_id]
    assert root.attributes["flower.run.id"] == started.stdout.strip()
    names = sorted(s.name for s in spans)
    assert "invoke_agent once" in names and "execute_tool Write" in names
    calls = [
        s
        for s in spans
        if s.attributes.get("flower.cost.source") == "gateway" and s.name.startswith("chat ")
    ]
    assert len(calls) == len(real_api.requests) == 2
    usage = usage_of(host_user, user_workspace)
    assert root.attributes["flower.cost.usd"] == pytest.approx(usage["total_cost_usd"], abs=5e-6)
