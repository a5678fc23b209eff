"""The gateway's endpoint allowlist is what the real Claude Code CLI sends, recorded here, not
remembered: flower's own flows run offline against the FakeAPI (which records every method and
path it receives), and the set of (method, raw request target) must equal `ENDPOINTS`.

A CLI upgrade that calls a new endpoint fails this test, before a box refuses it in production;
one that stops calling an endpoint fails it too, so the allowlist never keeps a path nobody
needs."""

from __future__ import annotations

from pathlib import Path

import pytest
from claude_agent_sdk import AgentDefinition, ClaudeAgentOptions, ClaudeSDKClient

from flower.core.agent import AgentSpec, CompactPolicy, HandoffPolicy
from flower.core.resilience import Resilience
from flower.core.runtime import Runtime
from flower.testing import (
    Always,
    FakeAPI,
    Reply,
    Request,
    Script,
    Sequence,
    Usage,
    When,
    prompt_too_long,
    rules,
    sequence,
    text,
    tool,
)
from flowerbox.sidecar.gateway import ENDPOINTS, FORWARDED_HEADERS
from flowerbox.sidecar.reach import FetchRule, inspect

pytestmark = pytest.mark.anyio

# Set by the gateway on its own request: the real credentials, Host, framing, identity encoding.
GATEWAY_OWN = {"x-api-key", "authorization", "host", "connection", "content-length"}
GATEWAY_OWN |= {"accept-encoding"}
FAST = Resilience(cli_retries=0, base_delay=0.01, max_delay=0.02, probe_interval=0.05)
HELPER = AgentDefinition(description="helps", prompt="You are the helper.", tools=["Bash"])
BOSS = AgentSpec("boss", "", agents={"helper": HELPER}, allowed_tools=["Bash", "Write"])


def summarising(main: Script) -> Script:
    """`main` for the main thread; a summary for every compaction request."""
    return rules(
        (When(kind="compaction"), Always(text("<summary>earlier work</summary>"))),
        (When(kind="main"), main),
    )


def subagent_script() -> Script:
    """A foreground subagent, then a background one that wakes the session when it ends."""
    foreground = {"description": "fg", "prompt": "fg", "subagent_type": "helper"}
    background = {"description": "bg", "prompt": "bg", "subagent_type": "helper"}
    return rules(
        (When(kind="subagent"), Always(text("sub done"))),
        (When(kind="main", contains="<task-notification>"), Always(text("woken"))),
        (
            When(kind="main"),
            sequence(
                tool("Agent", {**foreground, "run_in_background": False}),
                tool("Agent", {**background, "run_in_background": True}),
                text("launched"),
            ),
        ),
    )


async def test_the_allowlist_is_exactly_what_the_cli_sends(
    flower_env: FakeAPI, workspace: Path
) -> None:
    seen: dict[str, set[tuple[str, str]]] = {}

    headers: set[str] = set()
    # What the gateway's default (no --allow-api-fetch) would refuse of the CLI's own bodies.
    refused: dict[str, str] = {}

    def mode(name: str) -> None:
        seen[name] = {(r.method, r.path) for r in flower_env.requests}
        headers.update(h for r in flower_env.requests for h in r.headers)
        for request in flower_env.requests:
            if (why := FetchRule().refusal(inspect(request.body))) is not None:
                refused[name] = why
        flower_env.reset()

    runtime = Runtime(
        workspace=workspace, run_dir=workspace.parent / "runs", resilience=FAST, handoff=False
    )
    try:
        # A plain step that runs a tool, then a second step resuming its session.
        flower_env.script = sequence(
            tool("Write", {"file_path": str(workspace / "a.txt"), "content": "x"}),
            text("wrote it"),
            text("resumed"),
        )
        first = await runtime.run(BOSS, "write a.txt", step_name="plain")
        assert first.ok, first.error
        mode("plain")
        second = await runtime.run(BOSS, "again", step_name="resumed", resume=first.session_id)
        assert second.ok and second.session_id == first.session_id, second.error
        mode("resumed")

        flower_env.script = subagent_script()
        assert (await runtime.run(BOSS, "delegate", step_name="subagents")).ok
        mode("subagents")

        # The CLI's auto-compaction (flower's safety net behind the handoff).
        big = Usage(input_tokens=150_000)
        flower_env.script = summarising(
            Sequence(
                [tool("Bash", {"command": f"echo {i}"}, usage=big) for i in range(2)],
                then=text("after compaction"),
            )
        )
        compacting = AgentSpec(
            "c", "", allowed_tools=["Bash"], compact=CompactPolicy("auto", 100_000)
        )
        compacted = await runtime.run(compacting, "fill it", step_name="auto-compact")
        assert compacted.ok, compacted.error
        assert any(r.kind == "compaction" for r in flower_env.requests)
        mode("auto-compaction")

        # "prompt is too long" on a later turn: the CLI compacts reactively.
        too_long = prompt_too_long(times=1)
        flower_env.script = summarising(
            sequence(
                tool("Bash", {"command": "echo 1"}), tool("Bash", {}, fault=too_long), text("on")
            )
        )
        assert (await runtime.run(BOSS, "go", step_name="reactive")).ok
        assert any(r.kind == "compaction" for r in flower_env.requests)
        mode("reactive-compaction")
    finally:
        runtime.close()

    # flower's handoff: "prompt is too long" on a first turn hands off to a fresh session.
    def too_long_first(request: Request) -> Reply:
        if request.index == 0:
            return text("never", fault=prompt_too_long())
        return text("started over from the handoff")

    flower_env.script = too_long_first
    handing = Runtime(
        workspace=workspace,
        run_dir=workspace.parent / "runs",
        resilience=FAST,
        handoff=HandoffPolicy(window=200_000),
    )
    try:
        handed = await handing.run(BOSS, "huge", step_name="handoff")
        assert handed.ok and handed.retired, handed.error
        mode("handoff")
    finally:
        handing.close()

    # What a user can ask the CLI for in an interactive session: /context and /compact.
    options = ClaudeAgentOptions(cwd=workspace, env=flower_env.env(home=Path.home()))
    flower_env.script = rules(
        (When(kind="compaction"), Always(text("<summary>s</summary>"))),
        (When(kind="main"), Always(text("ok"))),
    )
    async with ClaudeSDKClient(options) as client:
        for prompt in ("hello", "/compact"):
            await client.query(prompt)
            async for _ in client.receive_response():
                pass
        mode("slash-compact")
        await client.query("/context")
        async for _ in client.receive_response():
            pass
        mode("slash-context")
        await client.get_context_usage()
        mode("get_context_usage")

    everything = set().union(*seen.values())
    assert everything == set(ENDPOINTS), {name: sorted(found) for name, found in seen.items()}
    # Every header the CLI sent is either passed on or one the gateway sets itself, and no
    # passed-on name is one the CLI never sends.
    assert headers - GATEWAY_OWN == FORWARDED_HEADERS, sorted(headers)
    # Nothing the CLI sends in these modes makes the API reach out (WebSearch would).
    assert refused == {}
