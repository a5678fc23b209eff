"""Guards: the boundaries flower enforces through SDK hooks, never through prompt text.

A prompt is a suggestion the model may ignore; a hook is not. Each guard is two parts:

* a **decision**, a plain function ``(tool, tool_input, hook_input, *, <settings>)`` that
  returns a `Deny`, a `Rewrite`, a `Replace` or None (no opinion). Decisions are unit-tested
  as plain calls;
* the factory, which binds the settings and hands the decision to the one adapter,
  `flower.core.hooks.as_matcher`, the only code that speaks the hook format.

Which guard sits on which event (docs/guards.md has the full table)::

    PreToolUse   whitelist_guard   main thread: deny the hands-on tools a role was not given
                 delegate_guard    main thread: deny hands-on tools, "delegate via Agent"
                 isolate_guard     Agent calls for a role marked isolated(): add worktree
    PostToolUse  spill_guard       long string results -> spill file + pointer
                 index_guard       a Write/Edit under the workbench refreshes INDEX.md

"Main thread" is decided in one place, `is_main_thread`: tool hooks fired inside a subagent
carry an ``agent_id``; the main thread's do not.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from claude_agent_sdk import AgentDefinition, HookMatcher

from flower.core import lang
from flower.core.hooks import Deny, Replace, Rewrite, as_matcher
from flower.core.workbench import Workbench
from flower.stores import is_ephemeral

__all__ = [
    "BULKY",
    "HANDS_ON",
    "SPILL_PREVIEW_CHARS",
    "WRITE_ONLY",
    "decide_delegate",
    "decide_isolate",
    "decide_spill",
    "decide_whitelist",
    "delegate_guard",
    "index_guard",
    "is_main_thread",
    "isolate_guard",
    "isolated",
    "merge_hooks",
    "refresh_index",
    "role_hooks",
    "spill_guard",
    "spill_output",
    "wants_isolation",
    "whitelist_guard",
    "workbench_hooks",
]

HANDS_ON = "Bash|Write|Edit|NotebookEdit"
"""The tools that change the workspace: what a coordinator must delegate."""

WRITE_ONLY = "Write|Edit|NotebookEdit"
"""HANDS_ON without Bash, for a role that may run commands but not edit files."""

BULKY = "Bash|Read|Grep|Glob|WebFetch|WebSearch"
"""The tools whose results can be long enough to spill."""

SPILL_PREVIEW_CHARS = 400
"""How much of a spilled text stays in the conversation after the pointer line."""

_ISOLATE_MARK = "_flower_isolate"


# -- decisions --------------------------------------------------------------------------


def is_main_thread(hook_input: Mapping[str, Any]) -> bool:
    """True unless the hook fired inside a subagent (whose tool hooks carry `agent_id`)."""
    return not hook_input.get("agent_id")


def decide_whitelist(
    tool: str,
    tool_input: dict[str, Any],
    hook_input: Mapping[str, Any],
    *,
    banned: Collection[str],
    role: str,
) -> Deny | None:
    """Deny a `banned` tool on the main thread; subagents' tools are their definition's."""
    if tool not in banned or not is_main_thread(hook_input):
        return None
    return Deny(lang.text("guard.whitelist", role=role, tool=tool))


def decide_delegate(
    tool: str,
    tool_input: dict[str, Any],
    hook_input: Mapping[str, Any],
    *,
    tools: Collection[str],
    allow_glance: bool,
    artifacts: str,
) -> Deny | Rewrite | None:
    """Deny a hands-on `tool` on the main thread, telling it how to delegate instead.

    A subagent's call passes, and explicitly (an allow, which also grants the permission):
    subagents share the session's permission rules, the coordinator's allowed_tools carry
    nothing hands-on, and in an unattended run nobody is there to approve a worker's Bash.
    The worker's own AgentDefinition.tools still decide which tools it has.
    With `allow_glance`, a Bash command that `is_ephemeral` accepts passes: the set the
    coordinator may run itself is exactly the set whose results the store later expires.
    `artifacts` is the folder named in the text for the workers' long outputs.
    """
    if tool not in tools:
        return None
    if not is_main_thread(hook_input):
        return Rewrite(dict(tool_input))
    if allow_glance and tool == "Bash" and is_ephemeral(str(tool_input.get("command", ""))):
        return None
    reason = lang.text("guard.delegate", tool=tool, artifacts=artifacts)
    if allow_glance and tool == "Bash":
        reason += lang.text("guard.glance")
    return Deny(reason)


def spill_output(response: Any, workbench: Workbench, threshold: int) -> Any | None:
    """`response` with every string longer than `threshold` spilled, or None if none was.

    Strings are replaced in place in dicts, nested dicts included (Read nests its text in
    ``file.content``), so the result keeps the tool's output shape. Lists are never entered:
    they may hold image blocks. A response that is itself a string is spilled the same way
    (it is then its own shape). A string no longer than the preview is never spilled, whatever
    the threshold: its pointer would be longer than the string.
    """
    if isinstance(response, str):
        long = len(response) > max(threshold, SPILL_PREVIEW_CHARS)
        return _pointer(response, workbench) if long else None
    if not isinstance(response, dict):
        return None
    changed = {key: spill_output(value, workbench, threshold) for key, value in response.items()}
    if all(value is None for value in changed.values()):
        return None
    return {key: response[key] if new is None else new for key, new in changed.items()}


def decide_spill(
    tool: str,
    tool_input: dict[str, Any],
    hook_input: Mapping[str, Any],
    *,
    workbench: Workbench,
    threshold: int,
    main_only: bool,
) -> Replace | None:
    """Spill a long result, except a Read of a spill file (re-spilling it would loop)."""
    if main_only and not is_main_thread(hook_input):
        return None
    if tool == "Read" and _lies_under(workbench.spill, tool_input.get("file_path"), hook_input):
        return None
    output = spill_output(hook_input.get("tool_response"), workbench, threshold)
    return None if output is None else Replace(output)


def refresh_index(
    tool: str,
    tool_input: dict[str, Any],
    hook_input: Mapping[str, Any],
    *,
    workbench: Workbench,
) -> None:
    """Refresh INDEX.md when the written file lies under the workbench (no opinion otherwise)."""
    if _lies_under(workbench.root, tool_input.get("file_path"), hook_input):
        workbench.refresh()


def decide_isolate(
    tool: str,
    tool_input: dict[str, Any],
    hook_input: Mapping[str, Any],
    *,
    agents: Mapping[str, AgentDefinition],
) -> Rewrite | None:
    """Send an Agent call to a git worktree when its subagent_type is marked `isolated()`.

    The model's own choice wins: an `isolation` or `cwd` it set (not None) is left alone.
    """
    if tool != "Agent" or tool_input.get("isolation") is not None:
        return None
    if tool_input.get("cwd") is not None:  # not in this CLI's schema; respected if it comes
        return None
    if not wants_isolation(agents.get(str(tool_input.get("subagent_type")))):
        return None
    return Rewrite({**tool_input, "isolation": "worktree"})


def _lies_under(folder: Path, file_path: Any, hook_input: Mapping[str, Any]) -> bool:
    """Whether the tool's `file_path` (relative ones against the hook's cwd) is in `folder`."""
    if not isinstance(file_path, str) or not file_path:
        return False
    return (Path(hook_input.get("cwd") or ".") / file_path).resolve().is_relative_to(folder)


def _pointer(text: str, workbench: Workbench) -> str:
    path = workbench.spill_text(text)
    head = lang.text("guard.spill", chars=len(text), path=path, preview=SPILL_PREVIEW_CHARS)
    return head + text[:SPILL_PREVIEW_CHARS]


# -- the guards -------------------------------------------------------------------------


def whitelist_guard(allowed: list[str] | None, *, role: str | None = None) -> HookMatcher | None:
    """PreToolUse: make `allowed` exclusive for the HANDS_ON tools, on the main thread.

    `allowed_tools` only pre-approves; this denies the hands-on tools not in it. Returns
    None when `allowed` holds all of them (nothing to block). Not for delegate_only roles:
    delegate_guard covers the same tools with the right advice.
    """
    banned = [tool for tool in HANDS_ON.split("|") if tool not in (allowed or [])]
    if not banned:
        return None
    role = role or lang.text("role.this")
    return as_matcher("|".join(banned), partial(decide_whitelist, banned=banned, role=role))


def delegate_guard(
    *, tools: str = HANDS_ON, allow_glance: bool = False, workbench: Workbench | None = None
) -> HookMatcher:
    """PreToolUse: the main thread calling one of `tools` is told to delegate; subagents pass.

    `workbench` (when given) puts its real artifacts/ path in the advice.
    """
    artifacts = (
        f"{workbench.show(workbench.artifacts)}/" if workbench else lang.text("guard.artifacts")
    )
    decide = partial(
        decide_delegate, tools=tools.split("|"), allow_glance=allow_glance, artifacts=artifacts
    )
    return as_matcher(tools, decide)


def spill_guard(
    workbench: Workbench, *, threshold: int = 4000, tools: str = BULKY, main_only: bool = False
) -> HookMatcher:
    """PostToolUse: results over `threshold` chars go to the workbench's spill/ at once."""
    return as_matcher(
        tools,
        partial(decide_spill, workbench=workbench, threshold=threshold, main_only=main_only),
    )


def index_guard(workbench: Workbench) -> HookMatcher:
    """PostToolUse on Write|Edit: a file written under the workbench refreshes INDEX.md."""
    return as_matcher("Write|Edit", partial(refresh_index, workbench=workbench))


def isolate_guard(
    agents: Mapping[str, AgentDefinition], *, on_inject: Callable[[str], Any] | None = None
) -> HookMatcher:
    """PreToolUse on Agent: roles marked `isolated()` run in a git worktree.

    `on_inject(subagent_type)` is called each time the isolation is added.
    """

    def guard(
        tool: str, tool_input: dict[str, Any], hook_input: Mapping[str, Any]
    ) -> Rewrite | None:
        rewrite = decide_isolate(tool, tool_input, hook_input, agents=agents)
        if rewrite is not None and on_inject is not None:
            on_inject(str(tool_input.get("subagent_type")))
        return rewrite

    return as_matcher("Agent", guard)


def isolated(agent: AgentDefinition, flag: bool = True) -> AgentDefinition:
    """Mark `agent` (in place, and return it) as needing its own git worktree.

    The mark is a plain attribute, not a dataclass field, so the SDK's `asdict()` never
    sends it to the CLI. The cost: `dataclasses.replace()` returns an unmarked copy.
    """
    object.__setattr__(agent, _ISOLATE_MARK, flag)
    return agent


def wants_isolation(agent: AgentDefinition | None) -> bool:
    """True when `agent` was marked by `isolated()`."""
    return bool(getattr(agent, _ISOLATE_MARK, False))


# -- assembly ---------------------------------------------------------------------------


def role_hooks(
    *,
    delegate_only: bool,
    allow_glance: bool = False,
    agents: Mapping[str, AgentDefinition] | None = None,
    workbench: Workbench | None = None,
) -> list[HookMatcher]:
    """The PreToolUse guards that follow from the role itself, workbench or not:
    delegate_guard if `delegate_only`, isolate_guard if any agent is marked `isolated()`."""
    pre: list[HookMatcher] = []
    if delegate_only:
        pre.append(delegate_guard(allow_glance=allow_glance, workbench=workbench))
    if agents and any(wants_isolation(agent) for agent in agents.values()):
        pre.append(isolate_guard(agents))
    return pre


def workbench_hooks(
    workbench: Workbench,
    *,
    delegate_only: bool = True,
    spill_threshold: int | None = 4000,
    agents: Mapping[str, AgentDefinition] | None = None,
    allow_glance: bool = False,
) -> dict[str, list[HookMatcher]]:
    """The hooks a session with a workbench needs (what Runtime mounts).

    PreToolUse: delegate_guard if `delegate_only`, isolate_guard if any agent is marked.
    PostToolUse: index_guard, and spill_guard if `spill_threshold`. Empty events are left out.
    """
    pre = role_hooks(
        delegate_only=delegate_only, allow_glance=allow_glance, agents=agents, workbench=workbench
    )
    post = [index_guard(workbench)]
    if spill_threshold:
        post.append(spill_guard(workbench, threshold=spill_threshold))
    hooks = {"PreToolUse": pre, "PostToolUse": post}
    return {event: matchers for event, matchers in hooks.items() if matchers}


def merge_hooks(*groups: Mapping[str, Sequence[Any]] | None) -> dict[str, list[Any]]:
    """Concatenate hook configs per event (no dedupe: a guard given twice runs twice)."""
    merged: dict[str, list[Any]] = {}
    for group in groups:
        for event, matchers in (group or {}).items():
            merged.setdefault(event, []).extend(matchers)
    return merged
