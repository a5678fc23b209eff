"""What flower's own synchronous queries on sessions.db return.

Runtime and the offline ``flower analyze`` read these; the SDK never sees them. All are
derived from the raw entries as appended (no layer has reshaped them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from flower.stores.transcript import Entry, is_api_error

__all__ = ["SessionRecord", "SessionTranscript", "SessionUsage", "usage_of"]

_TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


@dataclass(frozen=True)
class SessionRecord:
    """One main transcript: where it lives, when it was last written, what hangs off it."""

    project_key: str
    session_id: str
    mtime: int
    """Last append, epoch ms (the store's strictly monotonic clock)."""
    entries: int
    subkeys: tuple[str, ...] = ()
    """Subpaths of its subagent transcripts (``subagents/agent-<id>``), sorted."""


@dataclass(frozen=True)
class SessionTranscript:
    """A whole session as stored: the main transcript and every subagent transcript."""

    project_key: str
    session_id: str
    main: list[Entry]
    subagents: dict[str, list[Entry]] = field(default_factory=dict)


@dataclass(frozen=True)
class SessionUsage:
    """Cost and tokens of a session, as its transcripts record them.

    ``cost_usd`` is the CLI's own cumulative figure from the last ``cost-state`` entry of the
    main transcript (it survives resume); None when the transcript has none. Token counts
    sum each API response once (the CLI writes one entry per content block, all with the
    same usage) over the main and subagent transcripts; the CLI writes an entry once its
    response is complete, so ``output_tokens`` is the final count (CLI 2.1.332; the
    SDK's AssistantMessage carries the ``message_start`` usage instead).
    ``context_tokens`` is the input side (fresh + cached) of the main thread's last response:
    how full its context was.
    """

    cost_usd: float | None
    api_calls: int
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    context_tokens: int
    model: str | None


def _responses(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """The API messages of a transcript, one per ``message.id``, in order."""
    seen: set[str] = set()
    found: list[dict[str, Any]] = []
    for entry in entries:
        message = entry.get("message")
        if entry.get("type") != "assistant" or is_api_error(entry) or not isinstance(message, dict):
            continue
        mid = message.get("id", entry.get("uuid"))
        if isinstance(mid, str) and mid not in seen:
            seen.add(mid)
            found.append(message)
    return found


def _tokens(message: dict[str, Any], name: str) -> int:
    usage = message.get("usage")
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) else 0


def usage_of(transcript: SessionTranscript) -> SessionUsage:
    """Sum up what a session cost and used (see :class:`SessionUsage`)."""
    main = _responses(transcript.main)
    responses = main + [m for sub in transcript.subagents.values() for m in _responses(sub)]
    totals = {name: sum(_tokens(m, name) for m in responses) for name in _TOKEN_FIELDS}
    cost = next(
        (
            e.get("totalCostUSD")
            for e in reversed(transcript.main)
            if e.get("type") == "cost-state" and isinstance(e.get("totalCostUSD"), int | float)
        ),
        None,
    )
    last = main[-1] if main else {}
    return SessionUsage(
        cost_usd=None if cost is None else float(cost),
        api_calls=len(responses),
        context_tokens=sum(
            _tokens(last, name)
            for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        ),
        model=last.get("model") if isinstance(last.get("model"), str) else None,
        **totals,
    )
