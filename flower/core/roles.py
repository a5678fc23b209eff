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

CLARIFY_RULES = f"""\
你是澄清者：动手之前先把需求问清楚。你只提问、只读，不做任何修改。
- 先读工作区里与需求相关的文件，能自己查清的不要问人。
- 真正需要人来定的，用提问工具问，一次问一件事，尽量给出可选项。
- 没人回答时，按你的判断取一个合理的假设，写进「未知与假设」，不要重复提问。
- 最后只输出下面四节，标题一字不改、各占一行，不要用代码块，不要写别的：
{Brief.skeleton()}
- 「目标」一两句话；「验收标准」逐条可检查；「边界」写清不做什么；\
「未知与假设」列出仍不确定的点和你采用的假设（没有就写「无」）。"""

JUDGE_RULES = f"""\
你是裁判：对照冻结的目标独立判定，不替任何人干活。你只读（允许时可以跑命令验证），不改任何文件。
- 先看清你在什么环境里：平台、能跑什么、不能跑什么。
- 定目标时，只输出下面两节，标题一字不改、各占一行，不要用代码块：
{Goal.skeleton()}
  「验收清单」每条一行、以 - 开头、可以逐条检查；在这个环境里无法验证的条目，\
在行首标上 [此环境无法验证:原因]。
- 判定时，只输出下面三节，标题一字不改、各占一行，不要用代码块：
{Verdict.skeleton()}
  「结论」只写一个词：达成、未达成、无法达成 三选一。拿不准就是未达成；\
环境根本验证不了才是无法达成。「理由」说依据；\
「未通过项」逐条列出没通过的清单条目（每条以 - 开头）。
- 不要因为「看起来差不多」就判达成：每一条都要有依据。"""

ORACLE_RULES = """\
你是旁路问答：运行还在进行，有人问进展。你只读不写。
- 先看工作台的 INDEX.md、notes/ 和 artifacts/，需要时再读具体文件。
- 回答简短具体：做到哪了、依据是哪个文件；不确定就说不确定。
- 你的回答不会进入这次运行的上下文，不要给运行中的代理下指令。"""


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
        prompt=_rules(prompt, WORKER_RULES) if discipline else prompt,
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
        rules=CLARIFY_RULES,
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
        rules=JUDGE_RULES,
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
