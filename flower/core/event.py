"""Event and its kinds: the shape everything above the core sees (flower.core.events has the
table of kinds, and normalize(), which makes Events of the SDK's messages).

Apart from normalize() because a reader of Events needs no SDK: flowerbox's host side reads a
detached run's events from its log and renders them, and importing the SDK for that would
cost every `flowerbox ps` and `logs` most of a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

EventKind = Literal[
    "text",
    "thinking",
    "tool_call",
    "tool_result",
    "denied",
    "error",
    "session",
    "result",
    "retry",
    "reset",
    "status",
    "task",
    "ask",
    "step",
    "handoff",
    "call",
]


@dataclass
class Event:
    """One thing that happened in a run. `raw` is the source object: never ship it to a UI."""

    kind: EventKind
    text: str = ""
    tool: str = ""
    payload: dict[str, Any] = field(default_factory=dict)
    raw: Any = None

    def __str__(self) -> str:
        if self.kind == "tool_call":
            return f"[{self.tool}] {self.text}"
        return self.text or f"<{self.kind}>"

    def to_json(self) -> dict[str, Any]:
        """The Event as a JSON object for another process: everything but `raw` (an SDK
        object that never leaves this one). A payload value JSON cannot hold is left as it
        is; write with `json.dumps(..., default=str)`."""
        return {"kind": self.kind, "text": self.text, "tool": self.tool, "payload": self.payload}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        """An Event back from `to_json()`'s object (no `raw`). Written by another process, so
        read leniently: a missing kind is "status", a payload that is no object is {}."""
        payload = data.get("payload")
        return cls(
            data.get("kind", "status"),
            str(data.get("text", "")),
            str(data.get("tool", "")),
            payload if isinstance(payload, dict) else {},
        )
