"""Whether a prompt reached a session: a woken step's judged feedback is not lost (issue 30).

A goal guard's "not achieved" becomes the next round's prompt to the resumed work session
(flower.workflow.starter.with_goal's on_reject). Until the CLI has written it into the
session, that prompt lives only in flower's memory: a kill in between (the CLI still
starting, a request retried) lost it, the woken coordinator was told to carry on, said its
round was done, and the judge ruled "not achieved" again: each such kill used up a round of
`--rounds`. progress.json therefore keeps the prompt of a round that began with one, and how
many of the session's prompts held it and were answered then; a wake that finds no more of
them now says it again. Answered, not only written: a kill after the CLI wrote the prompt
and before the model replied leaves it unanswered, and the resumed CLI writes "No response
requested." after it (model `<synthetic>`), which reads as if the coordinator had declined
the feedback.
"""

from __future__ import annotations

from flower.stores.prune import PruningSessionStore
from flower.stores.transcript import Entry, blocks

__all__ = ["times_answered"]

SYNTHETIC = "<synthetic>"  # the model name on a reply the CLI made up, not the model's


def times_answered(store: PruningSessionStore, session_id: str | None, said: str) -> int:
    """How many prompts of `session_id`'s main thread (user turns, not tool results) hold
    `said` and were answered by the model (a reply of its own follows them before the next
    prompt; the CLI's "No response requested.", which it writes after a prompt a kill left
    unanswered, does not count); 0 for a session the store does not have."""
    found = store.transcript(session_id) if session_id else None
    if found is None or not said:
        return 0
    answered, pending = 0, False
    for entry in found.main:
        if prompt := _prompt(entry):  # a reply after a later prompt answers that one
            pending = said in prompt
        elif pending and _from_the_model(entry):
            answered, pending = answered + 1, False
    return answered


def _from_the_model(entry: Entry) -> bool:
    message = entry.get("message")
    return (
        entry.get("type") == "assistant"
        and isinstance(message, dict)
        and message.get("model") != SYNTHETIC
    )


def _prompt(entry: Entry) -> str:
    """The text of a user turn ("" for anything else, a tool result included)."""
    if entry.get("type") != "user" or entry.get("isMeta") is True:
        return ""
    content = entry.get("message", {}).get("content")
    if isinstance(content, str):
        return content
    parts = blocks(entry)
    if any(block.get("type") == "tool_result" for block in parts):
        return ""
    return "\n".join(str(b.get("text", "")) for b in parts if b.get("type") == "text")
