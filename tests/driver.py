"""Drive the real Claude Code CLI (bundled with the SDK) through claude_agent_sdk.query."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ResultMessage,
    query,
)
from claude_agent_sdk._errors import ClaudeSDKError


@dataclass
class Outcome:
    """What one query() yielded, and the exception it ended with (if any)."""

    messages: list[Any] = field(default_factory=list)
    error: ClaudeSDKError | None = None

    @property
    def assistant(self) -> list[AssistantMessage]:
        return [m for m in self.messages if isinstance(m, AssistantMessage)]

    @property
    def result(self) -> ResultMessage:
        results = [m for m in self.messages if isinstance(m, ResultMessage)]
        assert results, f"no ResultMessage among {self.messages!r}"
        return results[-1]

    @property
    def texts(self) -> list[str]:
        return [b.text for m in self.assistant for b in m.content if hasattr(b, "text")]


async def drive(prompt: str, *, cwd: Path, env: dict[str, str], **options: Any) -> Outcome:
    """Run one prompt on the real CLI; collect messages; keep (not raise) the SDK's error."""
    outcome = Outcome()
    opts = ClaudeAgentOptions(
        cwd=cwd,
        env=env,
        system_prompt={"type": "preset", "preset": "claude_code"},
        **options,
    )
    try:
        async for message in query(prompt=prompt, options=opts):
            outcome.messages.append(message)
    except ClaudeSDKError as exc:
        outcome.error = exc
    return outcome
