"""The hook adapter: the one place that turns a guard's decision into the SDK's hook format.

A guard decides (see `flower.core.guard`); this module speaks. `as_matcher(pattern, guard)`
wraps a decision function into the async callback and `HookMatcher` the SDK wants, and
`hook_output(decision)` writes the output dict the CLI reads:

    Deny(reason)       PreToolUse      permissionDecision "deny" + permissionDecisionReason
    Rewrite(input)     PreToolUse      permissionDecision "allow" + updatedInput (the full input)
    Replace(output)    PostToolUse     updatedToolOutput
    Placed(path)       WorktreeCreate  worktreePath: the worktree made (flower.core.worktrees)
    Brief(text)        SubagentStart   additionalContext: what the subagent is shown first
                                       (flower.core.cutwork)
    Halt(reason)       PostToolUse     continue false: the turn ends after this call, no
                                       further API request (flower.core.handoffstop)
    None               {}              no opinion

`as_handler(handler)` does the same for a hook that is no tool's: the handler gets the hook
input and runs in a worker thread (it may run git), one call at a time per handler.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from claude_agent_sdk import HookContext, HookInput, HookJSONOutput, HookMatcher

__all__ = [
    "Decision",
    "Brief",
    "Deny",
    "Halt",
    "Guard",
    "Handler",
    "Placed",
    "Replace",
    "Rewrite",
    "as_handler",
    "as_matcher",
    "hook_output",
]


@dataclass(frozen=True)
class Deny:
    """PreToolUse: the tool does not run; the model gets `reason` as an error result."""

    reason: str


@dataclass(frozen=True)
class Rewrite:
    """PreToolUse: allow the call with `tool_input` (the full input) in place of the model's."""

    tool_input: dict[str, Any]


@dataclass(frozen=True)
class Replace:
    """PostToolUse: the model sees `output` (same shape as the tool's own) instead."""

    output: Any


@dataclass(frozen=True)
class Placed:
    """WorktreeCreate: the worktree was made at `path` (with the hook, the CLI makes none)."""

    path: Path


@dataclass(frozen=True)
class Brief:
    """SubagentStart: the subagent is shown `text` (a system message) before it starts."""

    text: str


@dataclass(frozen=True)
class Halt:
    """PostToolUse: the turn ends once this call's result is in, before another request."""

    reason: str


Decision = Deny | Rewrite | Replace | Placed | Brief | Halt
Guard = Callable[[str, dict[str, Any], Mapping[str, Any]], Decision | None]
"""A decision with its settings bound: ``(tool_name, tool_input, hook_input) -> ...``."""
Handler = Callable[[Mapping[str, Any]], Decision | None]
"""A hook that is no tool's: ``(hook_input) -> ...``."""


def hook_output(decision: Decision | None) -> HookJSONOutput:
    """The SDK hook output for `decision`; {} means no opinion."""
    match decision:
        case Deny(reason):
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }
        case Rewrite(tool_input):
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "allow",
                    "updatedInput": tool_input,
                }
            }
        case Replace(output):
            return {
                "hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": output}
            }
        case Placed(path):
            return {
                "hookSpecificOutput": {"hookEventName": "WorktreeCreate", "worktreePath": str(path)}
            }
        case Brief(said):
            return {
                "hookSpecificOutput": {"hookEventName": "SubagentStart", "additionalContext": said}
            }
        case Halt(reason):
            return {"continue_": False, "stopReason": reason}
    return {}


def as_matcher(pattern: str, guard: Guard) -> HookMatcher:
    """A HookMatcher for the tools in `pattern` whose one callback asks `guard`."""

    async def callback(
        hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        data = cast(Mapping[str, Any], hook_input)
        tool_input = data.get("tool_input")
        return hook_output(
            guard(
                str(data.get("tool_name", "")),
                tool_input if isinstance(tool_input, dict) else {},
                data,
            )
        )

    return HookMatcher(matcher=pattern, hooks=[callback])


def as_handler(handler: Handler, *, timeout: float = 600) -> HookMatcher:
    """A HookMatcher (for every input of its event) whose callback runs `handler` in a
    worker thread, one call at a time: the event loop keeps streaming meanwhile."""
    one_at_a_time = threading.Lock()

    def serial(data: Mapping[str, Any]) -> Decision | None:
        with one_at_a_time:
            return handler(data)

    async def callback(
        hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        return hook_output(await asyncio.to_thread(serial, cast(Mapping[str, Any], hook_input)))

    return HookMatcher(hooks=[callback], timeout=timeout)
