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
from flower.core.guard import isolated

__all__ = [
    "COORDINATOR_RULES",
    "ORACLE_RULES",
    "WORKER_RULES",
    "Channel",
    "coordinator",
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

COORDINATOR_RULES = """\
你是协调者：拆分任务、派活、读汇报、做决定，但不亲自动手。
- 改文件、跑命令都用 Agent 工具交给子代理；主线程的 Bash/Write/Edit 会被拦下。
- 子代理看不到你的系统提示和工作台索引，任务说明是它唯一的信息来源。每份任务说明都写清：\
目标、验收标准、工作台的位置（照抄系统提示里「工作台在 …」给出的路径），\
以及「超过 2000 字符的产出写进工作台的 artifacts/，回复里只给路径和结论」。
- 子代理交回后，对照验收标准核对；不满足就写明差距再派一次。
- 关键决定让子代理写进工作台的 notes/，一个决定一个文件。"""

WORKER_RULES = """\
你是执行者：按任务说明把活干完。
- 先看清任务里的目标和验收标准，做完逐条自查。
- 超过 2000 字符的产出（报告、数据、日志）写进任务说明给出的工作台 artifacts/ 目录，\
回复里只给路径和结论。
- 最后的回复就是交给协调者的汇报：做了什么、结果在哪、验收标准是否满足、还剩什么没解决。
- 卡住了就说卡在哪、试过什么；不要编造结果。"""

ORACLE_RULES = """\
你是旁路问答：运行还在进行，有人问进展。你只读不写。
- 先看工作台的 INDEX.md、notes/ 和 artifacts/，需要时再读具体文件。
- 回答简短具体：做到哪了、依据是哪个文件；不确定就说不确定。
- 你的回答不会进入这次运行的上下文，不要给运行中的代理下指令。"""


class Channel(Protocol):
    """What coordinator() needs of a human channel (HumanChannel provides it)."""

    @property
    def tool_name(self) -> str: ...

    def mcp_servers(self) -> dict[str, Any]: ...


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
    if channel is not None:
        servers = channel.mcp_servers()
        allowed += [channel.tool_name, *(f"mcp__{server}" for server in servers)]
    return AgentSpec(
        name=name,
        instructions=_rules(COORDINATOR_RULES, instructions),
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
        env=dict(env or {}),
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
        prompt=_rules(prompt, WORKER_RULES) if discipline else prompt,
        tools=list(WORKER_TOOLS) if tools is None else list(tools),
        model=model,
        effort=effort,
        maxTurns=max_turns,
        permissionMode=permission_mode,
        skills=skills,
    )
    return isolated(agent) if isolate else agent


def oracle(
    name: str = "旁路问答",
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
    pre-approves the same three. `workbench=True` so its prompt carries the index.
    """
    return AgentSpec(
        name=name,
        instructions=_rules(ORACLE_RULES, instructions),
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
