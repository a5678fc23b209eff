"""One request the fake API received, with the views scripts and tests need.

Scripts decide from the whole conversation state, never from "the last message is a
tool_result": the CLI puts role "system" messages inside `messages` (environment, reminders,
hook context), so the last message is often not the one a naive script expects.
Credentials are never kept: headers are redacted and the key survives only as a fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

SECRET_HEADERS = frozenset({"x-api-key", "authorization", "proxy-authorization"})
COMPACTION_MARKERS = ("Respond with TEXT ONLY", "summary of the conversation")

RequestKind = Literal["main", "subagent", "compaction", "count_tokens"]


def fingerprint(secret: str) -> str:
    """A stable, non-reversible name for a credential (what the recorder keeps instead)."""
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()[:16]


def credential_of(headers: dict[str, str]) -> str | None:
    """The API key or bearer token a request carried, if any."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if key := lowered.get("x-api-key"):
        return key
    auth = lowered.get("authorization", "")
    return auth.removeprefix("Bearer ").strip() or None


def redact(headers: dict[str, str]) -> dict[str, str]:
    """Lower-cased header names (HTTP names are case-insensitive), credentials replaced."""
    lowered = {k.lower(): v for k, v in headers.items()}
    return {k: ("<redacted>" if k in SECRET_HEADERS else v) for k, v in lowered.items()}


@dataclass(frozen=True)
class ToolResult:
    """A tool_result block as the model was shown it (content flattened to text)."""

    tool_use_id: str
    text: str
    is_error: bool


def block_text(content: Any) -> str:
    """Flatten message or tool_result content (a string or a list of blocks) to text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                elif block.get("type") == "tool_result":
                    parts.append(block_text(block.get("content", "")))
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return ""


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


@dataclass
class Request:
    """A received request. `body` is the parsed JSON; headers carry no secrets."""

    index: int
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]
    size: int
    key_fingerprint: str | None = None
    received_at: float = 0.0
    answered: str = field(default="", compare=False)
    method: str = "POST"
    usage: dict[str, Any] | None = field(default=None, compare=False)
    """The usage the answer reported, as far as it reached the client: message_start's,
    then message_delta's output count once that was sent (a cut stream keeps what went out);
    None for an error or a stream cut before message_start."""
    answer_model: str | None = field(default=None, compare=False)

    # --- who is asking -------------------------------------------------------------------

    @property
    def agent_id(self) -> str | None:
        """The subagent's id (header `x-claude-code-agent-id`), None on the main thread."""
        return self.headers.get("x-claude-code-agent-id")

    @property
    def is_subagent(self) -> bool:
        return self.agent_id is not None or "cc_is_subagent=true" in self.billing_header

    @property
    def is_compaction(self) -> bool:
        last = self.last_user_text
        return all(marker in last for marker in COMPACTION_MARKERS)

    @property
    def kind(self) -> RequestKind:
        if "count_tokens" in self.path:
            return "count_tokens"
        if self.is_compaction:
            return "compaction"
        return "subagent" if self.is_subagent else "main"

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    # --- what the model is shown ----------------------------------------------------------

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages", [])
        return messages if isinstance(messages, list) else []

    @cached_property
    def system_blocks(self) -> list[str]:
        system = self.body.get("system", [])
        if isinstance(system, str):
            return [system]
        return [str(b.get("text", "")) for b in system if isinstance(b, dict)]

    @property
    def billing_header(self) -> str:
        return self.system_blocks[0] if self.system_blocks else ""

    @property
    def system_text(self) -> str:
        """The system prompt, plus the role "system" messages the CLI puts in `messages`."""
        in_messages = [
            block_text(m.get("content")) for m in self.messages if m.get("role") == "system"
        ]
        return "\n".join(self.system_blocks + in_messages)

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered in this request."""
        return [str(t.get("name")) for t in self.body.get("tools", []) if isinstance(t, dict)]

    def tool_uses(self) -> list[dict[str, Any]]:
        """Every tool_use block of the assistant messages so far, oldest first."""
        return [
            b
            for m in self.messages
            if m.get("role") == "assistant"
            for b in _blocks(m)
            if b.get("type") == "tool_use"
        ]

    def tool_results(self) -> list[ToolResult]:
        """Every tool_result block in the conversation, oldest first."""
        return [
            ToolResult(
                str(b.get("tool_use_id")), block_text(b.get("content", "")), bool(b.get("is_error"))
            )
            for m in self.messages
            if m.get("role") == "user"
            for b in _blocks(m)
            if b.get("type") == "tool_result"
        ]

    def last_tool_results(self) -> list[ToolResult]:
        """The tool results of the most recent user message that has any."""
        for message in reversed(self.messages):
            found = [b for b in _blocks(message) if b.get("type") == "tool_result"]
            if message.get("role") == "user" and found:
                ids = {str(b.get("tool_use_id")) for b in found}
                return [r for r in self.tool_results() if r.tool_use_id in ids]
        return []

    def result_for(self, tool_use_id: str) -> ToolResult | None:
        return next((r for r in self.tool_results() if r.tool_use_id == tool_use_id), None)

    @property
    def user_texts(self) -> list[str]:
        """Text of each user message (tool results included), oldest first."""
        return [block_text(m.get("content")) for m in self.messages if m.get("role") == "user"]

    @property
    def last_user_text(self) -> str:
        texts = self.user_texts
        return texts[-1] if texts else ""

    @property
    def prompt(self) -> str:
        """What the user said last: the last text block of the latest user message that has
        one, leaving out the <system-reminder> blocks the CLI puts beside it."""
        for message in reversed(self.messages):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                return content
            said = [
                str(b.get("text", ""))
                for b in _blocks(message)
                if b.get("type") == "text"
                and not str(b.get("text", "")).lstrip().startswith("<system-reminder>")
            ]
            if said:
                return said[-1]
        return ""

    @property
    def assistant_texts(self) -> list[str]:
        return [block_text(m.get("content")) for m in self.messages if m.get("role") == "assistant"]

    @cached_property
    def conversation_text(self) -> str:
        """Everything in `messages` as JSON text, for substring checks."""
        return json.dumps(self.messages, ensure_ascii=False)

    def contains(self, needle: str) -> bool:
        """True if `needle` appears in the system prompt or anywhere in the messages."""
        return needle in self.conversation_text or needle in self.system_text

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe record (for the process mode's request log)."""
        return {
            "index": self.index,
            "method": self.method,
            "path": self.path,
            "kind": self.kind,
            "agent_id": self.agent_id,
            "size": self.size,
            "key_fingerprint": self.key_fingerprint,
            "received_at": self.received_at,
            "answered": self.answered,
            "answer_model": self.answer_model,
            "usage": self.usage,
            "headers": self.headers,
            "body": self.body,
        }
