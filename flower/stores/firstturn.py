"""Where a new generation forks its predecessor's session (issue 30, item 4).

A new generation that starts as a brand-new session pays its first request again from its
first message on: the CLI puts its environment message (about 10 kB) after the first
prompt, and that prompt differs. Forked at the end of the old session's first exchange (its
first prompt, the environment, the first response and that response's tool results), it
starts with the very prefix the old session's requests sent, which a prompt cache holds, and
the handoff comes after it. This module finds that point in a stored transcript.

Only a first exchange that is whole, plain and small is carried: every tool call of the
first response answered in the store and none of them with an error (a refused call is
dropped by the store's load layers on a later resume, which would change the prefix again;
an interrupted one may be healed), no API error or nudge in it, at most
FIRST_EXCHANGE_CHARS of content, and still on the chain the CLI resumes (a compacted
session's is not). Otherwise there is no fork point, and the new generation
starts as a brand-new session as before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from flower.stores.transcript import Entry, blocks, is_api_error, is_protected

__all__ = ["FIRST_EXCHANGE_CHARS", "fork_point"]

FIRST_EXCHANGE_CHARS = 20_000
"""The most content (the first response and its tool results, as JSON) a fork carries on."""


def fork_point(main: Sequence[Entry]) -> str | None:
    """The uuid to resume `main` (a session's main transcript, in stored order) at so that
    only its first exchange is kept: its first response's last entry, or the last of the
    tool results that answer it; None when there is no whole, small first exchange."""
    start = next((i for i, e in enumerate(main) if e.get("type") == "assistant"), None)
    if start is None or not any(e.get("type") == "user" for e in main[:start]):
        return None
    first = _message_id(main[start])
    asked: set[str] = set()
    answered: set[str] = set()
    point: str | None = None
    size = 0
    for entry in main[start:]:
        kind = entry.get("type")
        if kind == "assistant" and _message_id(entry) != first:
            break  # the second response
        if kind == "user" and not _only_results(entry):
            break  # a prompt, a nudge or an interrupt marker: the first exchange is over
        if is_api_error(entry) or is_protected(entry):
            return None  # a failed call or a nudge: not a plain first exchange
        if kind not in ("assistant", "user"):
            continue  # attachments and the like, between the response's entries
        for block in blocks(entry):
            if block.get("type") == "tool_use":
                asked.add(str(block.get("id")))
            elif block.get("type") == "tool_result":
                if block.get("is_error") is True:
                    return None  # refused or interrupted: the load layers may drop or heal it
                answered.add(str(block.get("tool_use_id")))
        size += len(json.dumps(entry.get("message", {}).get("content"), ensure_ascii=False))
        point = entry.get("uuid")
    whole = asked <= answered and size <= FIRST_EXCHANGE_CHARS
    return point if whole and isinstance(point, str) and _on_chain(main, point) else None


def _on_chain(main: Sequence[Entry], uuid: str) -> bool:
    """Whether `uuid` is on the parentUuid chain the CLI walks back from the session's leaf
    (a compaction starts a new chain: the first exchange before it is not on it)."""
    by_uuid = {e["uuid"]: e for e in main if isinstance(e.get("uuid"), str)}
    leaf = next((e for e in reversed(main) if isinstance(e.get("uuid"), str)), None)
    seen: set[str] = set()
    while leaf is not None and leaf["uuid"] not in seen:
        if leaf["uuid"] == uuid:
            return True
        seen.add(leaf["uuid"])
        leaf = by_uuid.get(leaf.get("parentUuid"))
    return False


def _message_id(entry: Entry) -> object:
    message = entry.get("message")
    return message.get("id") if isinstance(message, dict) else None


def _only_results(entry: Entry) -> bool:
    """A user entry that holds tool results and nothing else."""
    found = blocks(entry)
    return bool(found) and all(block.get("type") == "tool_result" for block in found)
