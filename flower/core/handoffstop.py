"""A handoff that lets the response's tool calls finish (issue 30, item 4).

When a response shows the context near the window, the session must stop and write its
handoff. Interrupting it at once refuses the tool calls of that response: the writer never
learns their results, and the session's history then holds a refused call, which the
store's load layers drop on a later resume (a first exchange holding one cannot be carried
into the new generation: flower.stores.firstturn). Instead the calls run, and a PostToolUse
(or PostToolUseFailure) hook on the main thread ends the turn once a result is in, before
the CLI sends another request. A call that no such hook sees (refused by a guard) is
caught by the fallback: the next response of the main thread is interrupted, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from claude_agent_sdk import AssistantMessage

from flower.core.hooks import Decision, Halt, as_handler

__all__ = ["HandoffStop"]


class HandoffStop:
    """One attempt's stop for a handoff: `arm()` when it is due; `hooks()` end the turn."""

    def __init__(self) -> None:
        self.armed_at: object = None  # the main-thread response that showed the context full
        self.halted = False

    @property
    def armed(self) -> bool:
        return self.armed_at is not None

    def arm(self, message_id: object) -> None:
        self.armed_at = message_id if message_id is not None else True

    def overrun(self, message: Any) -> bool:
        """Whether `message` (an SDK message) is of a main-thread response after the one it
        was armed at: no hook ended the turn, and it must be interrupted now."""
        if not self.armed or self.halted or getattr(message, "parent_tool_use_id", None):
            return False
        said = getattr(message, "message_id", None)
        return isinstance(message, AssistantMessage) and said != self.armed_at

    def hooks(self) -> dict[str, list[Any]]:
        def halt(given: Mapping[str, Any]) -> Decision | None:
            if not self.armed or given.get("agent_id"):
                return None  # not due, or a subagent's call: its parent's call goes on
            self.halted = True
            return Halt("handoff")

        return {event: [as_handler(halt)] for event in ("PostToolUse", "PostToolUseFailure")}
