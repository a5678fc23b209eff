"""Event: the one shape everything above the core sees. normalize() is the only place that
knows SDK message types; the workflow, the CLI and flowerbox consume Events only.

The 16 kinds (a wire format: a kind is added, never renamed; UIs keep an `else` branch):

    kind         emitted by        text                          payload (besides context)
    text         normalize         what the model said           subagent?, session_id, usage
    thinking     normalize         the model's thinking          subagent?, usage
    tool_call    normalize         one-line summary of input     id, input, subagent?, usage
    tool_result  normalize         the result, flattened         tool_use_id, is_error, subagent?
    denied       normalize         why a call was refused        tool_use_id, subagent?
    error        normalize         synthetic "API Error: ..."    error, synthetic / mirror
    session      normalize         "session <id>"                session_id, model, cwd, tools
                                                                 (+ window, from Runtime)
    result       normalize         the turn's final text         session_id, cost_usd, num_turns,
                                                                 is_error, terminal_reason, ...
                                                                 (+ run_cost_usd, Runtime)
    retry        normalize/Runtime "retrying ..."                step, attempt, status, delay_s,
                                                                 source
    reset        normalize         "context compacted"           trigger, pre_tokens, post_tokens
    status       normalize         CLI state, rate limits        status / state / rate_limit
    task         normalize/goal    subagent task lifecycle       task_id, status, tool_use_id
    ask          HumanChannel      the question / human's words  kind, id, state, options
    step         Workflow.run      the step name (each round)    index, total, resumed, woke,
                                                                 round, rounds (if several)
    handoff      Runtime           the context level explained   phase, step, context, window
    call         Runtime           "<model>: $<cost>"            message_id, model, usage (final
                                                                 tokens), cost_usd (price table)

normalize() does four things beyond the translation (seed 004): subagent lines carry
payload["subagent"] (the parent Agent call's id) so they never mix with the main text;
synthetic API-error messages become kind "error", never "text"; compact boundaries become
"reset"; every event from an assistant message carries payload["context"] = input +
cache_read + cache_creation tokens, the sole input of the handoff decision, and the response's
`message_id`, `model` and `usage` (what the manifest's running row counts and prices).
"""

from __future__ import annotations

import json
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ConversationResetMessage,
    RateLimitEvent,
    ResultMessage,
    SystemMessage,
    TaskNotificationMessage,
    TaskProgressMessage,
    TaskStartedMessage,
    TaskUpdatedMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from flower.core.event import Event as Event
from flower.core.event import EventKind as EventKind

SYNTHETIC_MODEL = "<synthetic>"
# Texts with which a refused tool call comes back to the model (hook deny, permission mode).
DENIAL_MARKERS = (
    "hook error:",
    "Permission to use",
    "requested permissions to",
    "doesn't want to proceed",
)
_SUMMARY_FIELDS = ("command", "file_path", "path", "pattern", "url", "description", "query")


def context_level(usage: dict[str, Any] | None) -> int:
    """Tokens in the context window as the API counted them for this message."""
    if not usage:
        return 0
    keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    return sum(int(usage.get(k) or 0) for k in keys)


def summarize_input(tool_input: dict[str, Any], limit: int = 120) -> str:
    """A one-line description of a tool call's input, for the terminal and logs."""
    for key in _SUMMARY_FIELDS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            line = value.strip().splitlines()[0] if value.strip() else value
            return line[:limit]
    return json.dumps(tool_input, ensure_ascii=False)[:limit]


def flatten(content: Any) -> str:
    """Tool-result content (a string or a list of blocks) as text; non-text blocks named."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts = []
    for block in content:
        if isinstance(block, dict):
            parts.append(str(block.get("text", f"[{block.get('type', 'block')}]")))
    return "\n".join(parts)


def is_denial(text: str) -> bool:
    return any(marker in text for marker in DENIAL_MARKERS)


def normalize(message: Any) -> list[Event]:
    """Turn one SDK message into zero or more Events."""
    match message:
        case AssistantMessage():
            return _assistant(message)
        case UserMessage():
            return _user(message)
        case ResultMessage():
            return [_result(message)]
        case TaskStartedMessage() | TaskProgressMessage() | TaskUpdatedMessage():
            return [_task(message)]
        case TaskNotificationMessage():
            return [_task(message, text=message.summary, status=str(message.status))]
        case SystemMessage():
            return _system(message)
        case RateLimitEvent():
            info = message.rate_limit_info
            status = getattr(info, "status", None) or (
                info.get("status") if isinstance(info, dict) else ""
            )
            return [
                Event(
                    "status", f"rate limit: {status}", payload={"rate_limit": status}, raw=message
                )
            ]
        case ConversationResetMessage():
            return [Event("reset", "conversation reset", payload={"trigger": "reset"}, raw=message)]
    return []


def _assistant(message: AssistantMessage) -> list[Event]:
    base: dict[str, Any] = {}
    if message.parent_tool_use_id:
        base["subagent"] = message.parent_tool_use_id
    if message.error or message.model == SYNTHETIC_MODEL:
        text = "\n".join(b.text for b in message.content if isinstance(b, TextBlock))
        payload = {**base, "error": message.error, "synthetic": True}
        return [Event("error", text, payload=payload, raw=message)]
    base["context"] = context_level(message.usage)
    # What this API response used so far (the stream's message_start figures; the CLI sends
    # one AssistantMessage per content block, all with the same id and usage).
    base["message_id"] = message.message_id
    base["model"] = message.model
    base["usage"] = dict(message.usage or {})
    events = []
    for block in message.content:
        match block:
            case TextBlock(text=text):
                events.append(Event("text", text, payload=dict(base), raw=message))
            case ThinkingBlock(thinking=thinking):
                events.append(Event("thinking", thinking, payload=dict(base), raw=message))
            case ToolUseBlock(id=tool_id, name=name, input=tool_input):
                payload = {**base, "id": tool_id, "input": tool_input}
                events.append(
                    Event("tool_call", summarize_input(tool_input), name, payload, raw=message)
                )
    return events


def _user(message: UserMessage) -> list[Event]:
    if not isinstance(message.content, list):
        return []
    base = {"subagent": message.parent_tool_use_id} if message.parent_tool_use_id else {}
    events = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            text = flatten(block.content)
            payload = {**base, "tool_use_id": block.tool_use_id, "is_error": bool(block.is_error)}
            kind: EventKind = "denied" if block.is_error and is_denial(text) else "tool_result"
            events.append(Event(kind, text, payload=payload, raw=message))
    return events


def _result(message: ResultMessage) -> Event:
    payload = {
        "session_id": message.session_id,
        "cost_usd": message.total_cost_usd or 0.0,
        "num_turns": message.num_turns,
        "is_error": message.is_error,
        "subtype": message.subtype,
        "terminal_reason": getattr(message, "terminal_reason", None),
        "api_error_status": getattr(message, "api_error_status", None),
        "errors": list(getattr(message, "errors", None) or []),
        "usage": message.usage or {},
    }
    text = "" if message.is_error else (message.result or "")
    return Event("result", text, payload=payload, raw=message)


def _task(message: SystemMessage, *, text: str = "", status: str = "") -> Event:
    data = message.data
    payload = {
        "task_id": data.get("task_id"),
        "status": status or message.subtype.removeprefix("task_"),
        "tool_use_id": data.get("tool_use_id"),
        "task_type": data.get("task_type"),
    }
    return Event("task", text or str(data.get("description", "")), payload=payload, raw=message)


def _system(message: SystemMessage) -> list[Event]:
    data = message.data
    match message.subtype:
        case "init":
            payload = {k: data.get(k) for k in ("session_id", "model", "cwd", "tools", "plugins")}
            return [
                Event("session", f"session {data.get('session_id')}", payload=payload, raw=message)
            ]
        case "api_retry":
            delay = (data.get("retry_delay_ms") or 0) / 1000
            payload = {
                "attempt": data.get("attempt"),
                "status": data.get("error_status"),
                "delay_s": delay,
                "source": "cli",
            }
            text = f"API error {data.get('error_status')}, the CLI retries in {delay:.1f}s"
            return [Event("retry", text, payload=payload, raw=message)]
        case "compact_boundary":
            meta = data.get("compact_metadata") or {}
            payload = {
                "trigger": meta.get("trigger"),
                "pre_tokens": meta.get("pre_tokens"),
                "post_tokens": meta.get("post_tokens"),
            }
            return [Event("reset", "context compacted", payload=payload, raw=message)]
        case "status":
            state = data.get("status") or data.get("compact_result") or ""
            return [Event("status", str(state), payload={"status": state}, raw=message)]
        case "session_state_changed":
            state = data.get("state")
            return [Event("status", str(state), payload={"state": state}, raw=message)]
        case "permission_denied":
            return [Event("denied", str(data.get("message", "")), payload=dict(data), raw=message)]
        case "mirror_error":
            payload = {"error": data.get("error"), "mirror": True}
            return [
                Event("error", f"session store: {data.get('error')}", payload=payload, raw=message)
            ]
    return []
