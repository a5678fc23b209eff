"""Role factories: a role is a rule text, a tool set and (mounted by Runtime) a set of hooks.

`coordinator()` and `oracle()` return an `AgentSpec` (their own session); `worker()` returns
the SDK's `AgentDefinition` (a subagent the coordinator starts with the Agent tool). The
factories attach no hooks themselves: Runtime mounts the guards from the spec
(`delegate_only`, `glance`, `workbench`; see docs/guards.md).

Tool lists follow what this CLI offers, not the seeds' older lists: there is no TodoWrite,
and Glob/Grep exist only in a session (or subagent) where Bash is not offered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from claude_agent_sdk import AgentDefinition, EffortLevel, PermissionMode

from flower.core.agent import AgentSpec, CompactPolicy
from flower.core.brief import Brief
from flower.core.goal import Goal, Verdict
from flower.core.guard import isolated
from flower.core.lang import text
from flower.core.texts.zh import ZH

__all__ = [
    "CLARIFY_RULES",
    "COORDINATOR_RULES",
    "JUDGE_RULES",
    "ORACLE_RULES",
    "WORKER_RULES",
    "Channel",
    "clarify",
    "coordinator",
    "judge",
    "oracle",
    "worker",
]

# The seeds' COORDINATOR_TOOLS also held TodoWrite, which this CLI does not have.
COORDINATOR_TOOLS = ["Agent", "Read"]
WEB_TOOLS = ["WebFetch", "WebSearch"]
# The seeds' WORKER_TOOLS also held Glob and Grep: where Bash is offered the CLI drops them
# (Bash's own find/grep/rg do that job).
WORKER_TOOLS = ["Read", "Write", "Edit", "Bash", "WebFetch", "WebSearch"]
# Without Bash the CLI offers Glob and Grep, so a read-only role gets all three.
ORACLE_TOOLS = ["Read", "Glob", "Grep"]
# The seeds' "five tools" of a clarifier that may read: look at the workspace and the web.
CLARIFY_READ_TOOLS = ["Read", "Glob", "Grep", "WebFetch", "WebSearch"]
JUDGE_TOOLS = ["Read", "Glob", "Grep"]

# The seeds' rule texts (zh), exported as the seeds name them; the roles are built with
# the current language's (`rule_text()`).
COORDINATOR_RULES = ZH["rules.coordinator"]
WORKER_RULES = ZH["rules.worker"]
CLARIFY_RULES = ZH["rules.clarify"].format(brief=Brief.skeleton("zh"))
JUDGE_RULES = ZH["rules.judge"].format(goal=Goal.skeleton("zh"), verdict=Verdict.skeleton("zh"))
ORACLE_RULES = ZH["rules.oracle"]


def rule_text(role: str) -> str:
    """The rule text of `role` (coordinator, worker, clarify, judge, oracle) in the current
    language, with the headings its documents are read by."""
    skeletons = {
        "clarify": {"brief": Brief.skeleton()},
        "judge": {"goal": Goal.skeleton(), "verdict": Verdict.skeleton()},
    }
    return text(f"rules.{role}", **skeletons.get(role, {}))


class Channel(Protocol):
    """What coordinator() needs of a human channel (HumanChannel provides it)."""

    @property
    def tool_name(self) -> str: ...

    @property
    def inbox_tool_name(self) -> str: ...

    def mcp_servers(self) -> dict[str, Any]: ...

    def env(self) -> dict[str, str]: ...


def coordinator(
    name: str,
    instructions: str,
    workers: Mapping[str, AgentDefinition],
    *,
    channel: Channel | None = None,
    can_read: bool = True,
    glance: bool = True,
    model: str | None = None,
    effort: str | None = None,
    max_turns: int | None = None,
    max_budget_usd: float | None = None,
    permission_mode: str = "acceptEdits",
    compact: CompactPolicy | None = None,
    hooks: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> AgentSpec:
    """The main-thread role that splits, delegates, reads reports and decides; never does.

    Fixed in the spec: `delegate_only=True` (Runtime mounts delegate_guard, no
    whitelist_guard), `agents=workers`, `workbench=True`.

    allowed_tools: Agent, plus Read when `can_read`. This session offers Bash (denied to the
    main thread by delegate_guard), so the CLI has no Glob/Grep here; with `glance` the
    coordinator looks around with read-only Bash (`ls`, `git status`, `grep`...) instead.
    The WebFetch/WebSearch of any worker (a definition with `tools=None` has both) are
    added too: allowed_tools is session-wide, and a
    subagent's call to a tool it lacks is left waiting for an approval nobody gives in an
    unattended run. Nothing hands-on is ever added (that would unwall the main thread).
    A `channel` adds its tool and its MCP servers (the whole server is allowed, so its
    companion tools need no approval either).
    """
    allowed = list(COORDINATOR_TOOLS if can_read else COORDINATOR_TOOLS[:1])
    for agent in workers.values():
        offered = WEB_TOOLS if agent.tools is None else agent.tools  # None: every tool
        allowed += [t for t in offered if t in WEB_TOOLS and t not in allowed]
    servers: dict[str, Any] = {}
    channel_env: dict[str, str] = {}
    if channel is not None:
        servers = channel.mcp_servers()
        allowed += [channel.tool_name, *(f"mcp__{server}" for server in servers)]
        channel_env = channel.env()  # offered directly, not deferred behind ToolSearch
    return AgentSpec(
        name=name,
        instructions=_rules(rule_text("coordinator"), instructions),
        allowed_tools=allowed,
        model=model,
        effort=effort,
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
        permission_mode=permission_mode,
        agents=dict(workers),
        mcp_servers=servers,
        hooks=hooks,
        compact=compact,
        env={**channel_env, **(env or {})},
        glance=glance,
        delegate_only=True,
    )


def worker(
    description: str,
    prompt: str,
    *,
    tools: list[str] | None = None,
    model: str = "inherit",
    effort: EffortLevel | int | None = None,
    max_turns: int | None = None,
    permission_mode: PermissionMode | None = None,
    skills: list[str] | None = None,
    discipline: bool = True,
    isolate: bool = False,
) -> AgentDefinition:
    """The subagent definition that does the work; pass it in coordinator(workers={...}).

    `tools` defaults to Read, Write, Edit, Bash, WebFetch, WebSearch (the seeds' list minus
    Glob/Grep, which the CLI does not offer beside Bash). `discipline` appends WORKER_RULES
    to `prompt`. `isolate` marks the definition with `isolated()`: each run gets its own git
    worktree (the workspace must be a git repository, or the Agent tool fails with "not in
    a git repository"). The mark is lost by `dataclasses.replace()`.
    """
    agent = AgentDefinition(
        description=description,
        prompt=_rules(prompt, rule_text("worker")) if discipline else prompt,
        tools=list(WORKER_TOOLS) if tools is None else list(tools),
        model=model,
        effort=effort,
        maxTurns=max_turns,
        permissionMode=permission_mode,
        skills=skills,
    )
    return isolated(agent) if isolate else agent


def clarify(
    name: str,
    channel: Channel,
    *,
    instructions: str = "",
    can_read: bool = True,
    model: str | None = None,
    effort: str | None = None,
    max_turns: int | None = None,
    max_budget_usd: float | None = None,
) -> AgentSpec:
    """The role that pins the request down before anything is done, and answers with the
    four sections of a Brief (CLARIFY_RULES asks for exactly the headings Brief reads).

    It only asks and reads: `tools` offers the read tools (Read, Glob, Grep, WebFetch,
    WebSearch when `can_read`) and nothing else, so Agent, Write and Bash do not exist in
    its session; whitelist_guard stands behind that. No workbench (it writes nothing) and
    no inbox tool (unlike the coordinator).
    """
    reads = list(CLARIFY_READ_TOOLS) if can_read else []
    return _asking(
        name,
        channel,
        rules=rule_text("clarify"),
        instructions=instructions,
        tools=reads,
        model=model,
        effort=effort,
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
    )


def judge(
    name: str,
    channel: Channel,
    *,
    instructions: str = "",
    can_run: bool = False,
    model: str | None = None,
    effort: str | None = None,
    max_turns: int | None = None,
    max_budget_usd: float | None = None,
) -> AgentSpec:
    """The role that sets the goal before the work, then rules on each round against it.

    Read tools only, plus Bash with `can_run` (a harder verdict: it can run the acceptance
    commands, at the price that Bash can write). Agent, Write and Edit are not offered; no
    workbench, no inbox. JUDGE_RULES asks for exactly the headings Goal and Verdict read.
    """
    tools = [*JUDGE_TOOLS, "Bash"] if can_run else list(JUDGE_TOOLS)
    return _asking(
        name,
        channel,
        rules=rule_text("judge"),
        instructions=instructions,
        tools=tools,
        model=model,
        effort=effort,
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
    )


def _asking(
    name: str,
    channel: Channel,
    *,
    rules: str,
    instructions: str,
    tools: list[str],
    model: str | None,
    effort: str | None,
    max_turns: int | None,
    max_budget_usd: float | None,
) -> AgentSpec:
    """A read-only role that may ask the human: the channel's ask tool, no inbox tool.

    `tools` restricts only the built-in tools; the channel's MCP server brings both of its
    tools, so the inbox one is removed by name (a bare name in disallowed_tools drops the
    tool from the request)."""
    return AgentSpec(
        name=name,
        instructions=_rules(rules, instructions),
        allowed_tools=[channel.tool_name, *tools],
        disallowed_tools=[channel.inbox_tool_name],
        tools=tools,
        model=model,
        effort=effort,
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
        mcp_servers=channel.mcp_servers(),
        env=channel.env(),
        workbench=False,
    )


def oracle(
    name: str | None = None,
    *,
    instructions: str = "",
    model: str | None = None,
    effort: str | None = None,
    max_turns: int | None = 12,
    max_budget_usd: float | None = 0.5,
) -> AgentSpec:
    """The side-channel role that answers "how far along are we?" from the workbench.

    Read-only twice over: `tools` offers only Read, Glob and Grep (Agent, Write and Bash do
    not exist in its session; Glob/Grep do, since Bash is absent) and `allowed_tools`
    pre-approves the same three. `workbench=True` so its prompt carries the index. `name`
    defaults to 旁路问答 (in en, "side questions").
    """
    return AgentSpec(
        name=name or text("role.oracle"),
        instructions=_rules(rule_text("oracle"), instructions),
        allowed_tools=list(ORACLE_TOOLS),
        tools=list(ORACLE_TOOLS),
        model=model,
        effort=effort,
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
        workbench=True,
    )


def _rules(*parts: str) -> str:
    return "\n\n".join(part.strip() for part in parts if part.strip())
