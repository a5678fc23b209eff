"""How the CLI's transcript entries are shaped, read in one place.

The session store keeps entries as opaque JSON; the load-time layers (expire, trim, prune)
need to look inside them. Everything they know about the CLI's JSONL format is here:

* ``user`` entries carry ``message.content``: a string (a prompt) or a list of blocks; tool
  results are ``{"type": "tool_result", "tool_use_id", "content", "is_error"}`` blocks whose
  ``content`` is a string or a list of ``text`` / ``image`` / ``document`` blocks.
* ``assistant`` entries hold ONE content block each; the blocks of one API response share
  ``message.id`` (sdk-facts §2). A "turn" below is one API response, counted by ``message.id``.
* Entries chain through ``parentUuid`` (``compact_boundary`` also has ``logicalParentUuid``);
  the CLI walks that chain back from the leaf on resume.

Entries are treated as immutable: helpers that change one return a copy of the parts they
change and share the rest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from typing import Any

__all__ = [
    "LINK_FIELDS",
    "Entry",
    "blocks",
    "drop_blocks",
    "is_api_error",
    "is_denial",
    "is_protected",
    "replace_blocks",
    "result_text",
]

Entry = dict[str, Any]

#: Fields that point at another entry's uuid.
LINK_FIELDS = ("parentUuid", "logicalParentUuid")

#: ``toolDenialKind`` values the CLI writes on a tool_result entry for a call that never ran
#: because it was refused. "interrupted" and "cancelled" are left out: those calls may have
#: run, and their results say so.
_DENIAL_KINDS = frozenset({"permission-rule", "user-rejected", "automode-blocked"})

#: Refusal texts: a PreToolUse hook's deny (the CLI's own pattern for it) and the permission
#: system's "Permission to use X ... has been denied." family, optionally in the CLI's
#: <tool_use_error> wrapper.
_DENIAL_TEXT = re.compile(
    r"^(?:<tool_use_error>)?(?:PreToolUse:\S+ hook error: |Permission to use |Permission for this )"
)


def blocks(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of a user or assistant entry ([] for a string prompt or none)."""
    try:  # the hot path of every layer: most entries have both keys
        content = entry["message"]["content"]
    except (KeyError, TypeError):
        return []
    return content if isinstance(content, list) else []


def is_protected(entry: Mapping[str, Any]) -> bool:
    """Compact summaries and meta nudges: the layers never change or drop them."""
    return entry.get("isCompactSummary") is True or entry.get("isMeta") is True


def is_api_error(entry: Mapping[str, Any]) -> bool:
    """The residue of a failed API call: a synthetic assistant message or a system api_error.

    A synthetic message has ``isApiErrorMessage: true`` *and* the model ``<synthetic>``;
    both are required so that a real answer is never taken for one.
    """
    kind = entry.get("type")
    if kind == "system":
        return entry.get("subtype") == "api_error"
    message = entry.get("message")
    return (
        kind == "assistant"
        and entry.get("isApiErrorMessage") is True
        and isinstance(message, dict)
        and message.get("model") == "<synthetic>"
    )


def result_text(block: Mapping[str, Any]) -> str | None:
    """The plain text of a tool_result's content, or None if it holds anything but text."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    for part in content:
        if not (isinstance(part, dict) and part.get("type") == "text"):
            return None
        texts.append(str(part.get("text", "")))
    return "\n".join(texts)


def is_denial(entry: Mapping[str, Any], block: Mapping[str, Any], tool_name: str) -> bool:
    """True if ``block`` (a tool_result in ``entry``) reports a call that was refused.

    Recognised by the CLI's ``toolDenialKind`` on the entry (when the entry holds this one
    result), else by the refusal texts of hooks and permission rules. The text fallback is
    not applied to ``mcp__`` tools, whose result text their server writes (the CLI makes
    the same exception).
    """
    if block.get("is_error") is not True:
        return False
    results = [b for b in blocks(entry) if b.get("type") == "tool_result"]
    if len(results) == 1 and entry.get("toolDenialKind") in _DENIAL_KINDS:
        return True
    if tool_name.startswith("mcp__"):
        return False
    text = result_text(block)
    return text is not None and _DENIAL_TEXT.match(text) is not None


def replace_blocks(entry: Entry, changes: Mapping[int, dict[str, Any]]) -> Entry:
    """A copy of ``entry`` whose block ``i`` is ``changes[i]``; ``entry`` is not modified."""
    content = list(blocks(entry))
    for i, block in changes.items():
        content[i] = block
    return {**entry, "message": {**entry["message"], "content": content}}


def drop_blocks(entry: Entry, indices: Set[int]) -> Entry | None:
    """A copy of ``entry`` without the blocks at ``indices``, or None if none is left."""
    content = [b for i, b in enumerate(blocks(entry)) if i not in indices]
    return {**entry, "message": {**entry["message"], "content": content}} if content else None
