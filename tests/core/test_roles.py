"""Role factories: the fields each one fixes, and the tool lists mapped to this CLI."""

from __future__ import annotations

import dataclasses
from typing import Any

from claude_agent_sdk import AgentDefinition

from flower.core.agent import AgentSpec, CompactPolicy
from flower.core.guard import HANDS_ON, wants_isolation
from flower.core.human import HumanChannel
from flower.core.roles import (
    COORDINATOR_RULES,
    ORACLE_RULES,
    WORKER_RULES,
    clarify,
    coordinator,
    judge,
    oracle,
    worker,
)


def test_worker_defaults() -> None:
    agent = worker("writes code", "Implement the parser.")
    assert isinstance(agent, AgentDefinition)
    assert agent.description == "writes code"
    assert agent.prompt == "Implement the parser.\n\n" + WORKER_RULES
    assert agent.tools == ["Read", "Write", "Edit", "Bash", "WebFetch", "WebSearch"]
    assert "TodoWrite" not in agent.tools and "Glob" not in agent.tools
    assert agent.model == "inherit"
    assert agent.maxTurns is None and agent.permissionMode is None and agent.skills is None
    assert not wants_isolation(agent)


def test_worker_options_map_to_the_sdk_fields() -> None:
    agent = worker(
        "reads",
        "Look.",
        tools=["Read"],
        model="haiku",
        effort="low",
        max_turns=5,
        permission_mode="acceptEdits",
        skills=["pdf"],
        discipline=False,
    )
    assert agent.prompt == "Look."
    assert agent.tools == ["Read"]
    assert (agent.model, agent.effort, agent.maxTurns) == ("haiku", "low", 5)
    assert agent.permissionMode == "acceptEdits" and agent.skills == ["pdf"]


def test_worker_tools_are_copied() -> None:
    mine = ["Read"]
    first, second = worker("a", "p", tools=mine), worker("b", "p")
    assert first.tools is not mine
    assert second.tools is not None
    second.tools.append("Monitor")
    assert worker("c", "p").tools == ["Read", "Write", "Edit", "Bash", "WebFetch", "WebSearch"]


def test_worker_isolate_marks_without_reaching_the_cli() -> None:
    agent = worker("coder", "p", isolate=True)
    assert wants_isolation(agent)
    assert "_flower_isolate" not in dataclasses.asdict(agent)


def test_coordinator_fixes_delegation_agents_and_workbench() -> None:
    workers = {"coder": worker("coder", "p", tools=["Read", "Write", "Bash"])}
    spec = coordinator("协调者", "Ship the feature.", workers)
    assert isinstance(spec, AgentSpec)
    assert spec.name == "协调者"
    assert spec.instructions == COORDINATOR_RULES + "\n\nShip the feature."
    assert spec.delegate_only is True and spec.workbench is True and spec.glance is True
    assert spec.agents == workers and spec.agents is not workers
    assert spec.allowed_tools == ["Agent", "Read"]
    assert spec.permission_mode == "acceptEdits"
    assert spec.tools is None  # subagents need Bash/Write to exist; delegate_guard walls them
    assert spec.mcp_servers == {} and spec.env == {} and spec.hooks is None


def test_coordinator_never_pre_approves_hands_on_tools() -> None:
    workers = {
        "a": worker("a", "p"),
        "b": worker("b", "p", tools=["Bash", "WebFetch"]),
        "c": AgentDefinition(description="all tools", prompt="p"),
    }
    allowed = coordinator("c", "", workers).allowed_tools
    assert allowed == ["Agent", "Read", "WebFetch", "WebSearch"]
    assert not set(allowed) & set(HANDS_ON.split("|"))


def test_coordinator_merges_only_the_web_tools_workers_have() -> None:
    workers = {"r": worker("r", "p", tools=["Read", "WebSearch"])}
    assert coordinator("c", "", workers, can_read=False).allowed_tools == ["Agent", "WebSearch"]
    assert coordinator("c", "", {}, can_read=False).allowed_tools == ["Agent"]


def test_coordinator_with_a_channel_allows_its_tool_and_server() -> None:
    channel = HumanChannel()
    spec = coordinator("c", "", {}, channel=channel)
    assert spec.allowed_tools == ["Agent", "Read", "mcp__human__ask", "mcp__human"]
    assert spec.mcp_servers == channel.mcp_servers()
    assert spec.env == {"ENABLE_TOOL_SEARCH": "false"}  # the tools are offered, not deferred


def test_clarify_and_judge_may_ask_but_not_read_the_inbox() -> None:
    channel = HumanChannel()
    asking = clarify("c", channel), judge("j", channel), judge("j", channel, can_run=True)
    for spec in asking:
        assert spec.allowed_tools[0] == channel.tool_name
        assert spec.disallowed_tools == [channel.inbox_tool_name]
        assert spec.tools is not None and not {"Agent", "Write", "Edit"} & set(spec.tools)
        assert spec.workbench is False and spec.env == channel.env()
    assert asking[0].tools == ["Read", "Glob", "Grep", "WebFetch", "WebSearch"]
    assert asking[1].tools == ["Read", "Glob", "Grep"]
    assert asking[2].tools == ["Read", "Glob", "Grep", "Bash"]
    assert clarify("c", channel, can_read=False).tools == []


def test_coordinator_passes_the_session_settings_through() -> None:
    hooks: dict[str, Any] = {"Stop": []}
    env = {"A": "1"}
    compact = CompactPolicy(mode="off")
    spec = coordinator(
        "c",
        "",
        {},
        glance=False,
        model="opus",
        effort="high",
        max_turns=40,
        max_budget_usd=3.0,
        permission_mode="default",
        compact=compact,
        hooks=hooks,
        env=env,
    )
    assert spec.instructions == COORDINATOR_RULES
    assert (spec.model, spec.effort, spec.max_turns, spec.max_budget_usd) == (
        "opus",
        "high",
        40,
        3.0,
    )
    assert spec.permission_mode == "default" and spec.glance is False
    assert spec.compact is compact and spec.hooks is hooks
    assert spec.env == env and spec.env is not env


def test_oracle_is_read_only_twice_over() -> None:
    spec = oracle()
    assert spec.name == "旁路问答"
    assert spec.instructions == ORACLE_RULES
    assert spec.tools == ["Read", "Glob", "Grep"]
    assert spec.allowed_tools == ["Read", "Glob", "Grep"]
    assert spec.tools is not spec.allowed_tools
    for tool in ("Agent", "Write", "Edit", "Bash", "NotebookEdit"):
        assert tool not in spec.tools
    assert spec.workbench is True and spec.delegate_only is False
    assert (spec.max_turns, spec.max_budget_usd) == (12, 0.5)
    assert spec.mcp_servers == {}


def test_oracle_options() -> None:
    spec = oracle(
        "aside",
        instructions="Answer in English.",
        model="haiku",
        effort="low",
        max_turns=None,
        max_budget_usd=None,
    )
    assert spec.instructions == ORACLE_RULES + "\n\nAnswer in English."
    assert (spec.name, spec.model, spec.effort) == ("aside", "haiku", "low")
    assert spec.max_turns is None and spec.max_budget_usd is None
    # the seed's defaults (004:287): read-only, the workbench's index, 12 turns, $0.50
    default = oracle()
    assert default.allowed_tools == ["Read", "Glob", "Grep"] and default.workbench is True
    assert (default.max_turns, default.max_budget_usd) == (12, 0.5)


def test_coordinator_rules_relay_the_workbench_to_workers() -> None:
    # Subagents do not inherit the index: the coordinator's brief is their only channel.
    for words in ("工作台的位置", "artifacts/", "2000", "目标", "验收标准"):
        assert words in COORDINATOR_RULES
    # Workers never hard-code the path: the real one comes from Workbench via the brief.
    assert ".flower" not in WORKER_RULES and "任务说明给出的工作台 artifacts/" in WORKER_RULES
