"""A question cut by a kill is asked again (issue 30, docs/fault-behaviour.md).

A kill (a reboot, an OOM kill, a detached run's keeper gone) while mcp__human__ask waits for
a human leaves the call unanswered in the session. Resumed as it is, the store would answer
it with "cut, redo it if needed" (flower.stores.prune.heal_orphans): the question was lost
unless the model chose to ask it again, and the fake model of the tests does not (nor, often,
a real one: it decides by itself). So before a woken step resumes its session, flower asks
the human each such question again itself, through the run's channel: the same words and
options, waited for as the run waits (--timeout), shown by `flower status` / `flowerbox ps`
and answered with `flower answer` / `flowerbox answer` as any question. Its outcome (the
answer, or the texts for "nobody answered" and "declined") is stored as the call's result,
so the model goes on as if the first wait had ended that way, and a later resume finds the
call answered.

An answer that reached the session before the kill is in the store (or in the CLI's own
transcript, which flower.core.catchup copies first): the call is answered and nothing is
asked. An answer flower took in the last milliseconds before the kill, before the CLI wrote
it down, is not known here: the question is asked again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from claude_agent_sdk import SessionKey

from flower.core.human import HumanChannel
from flower.stores.prune import PruningSessionStore, answer_entry
from flower.stores.transcript import Entry, blocks

__all__ = ["ask_again", "cut_asks"]


def cut_asks(
    store: PruningSessionStore, session_id: str, tool_name: str
) -> list[tuple[Entry, dict[str, Any]]]:
    """The calls of `tool_name` in `session_id`'s main thread that have no result, each
    with the last entry of its API response (where its result goes), oldest first."""
    found = store.transcript(session_id)
    if found is None:
        return []
    answered = {
        block.get("tool_use_id")
        for entry in found.main
        for block in blocks(entry)
        if block.get("type") == "tool_result"
    }
    last_of: dict[str, Entry] = {}
    calls: list[tuple[str, dict[str, Any]]] = []
    for entry in found.main:
        if entry.get("type") != "assistant" or "uuid" not in entry:
            continue
        response = str(entry.get("message", {}).get("id") or entry["uuid"])
        last_of[response] = entry
        calls += [
            (response, block)
            for block in blocks(entry)
            if block.get("type") == "tool_use"
            and block.get("name") == tool_name
            and block.get("id") not in answered
        ]
    return [(last_of[response], block) for response, block in calls]


async def ask_again(channel: HumanChannel, store: PruningSessionStore, session_id: str) -> int:
    """Ask the human again each question `session_id` was waiting on when its process was
    killed, and store each outcome as that call's result; how many were asked."""
    cut = await asyncio.to_thread(cut_asks, store, session_id, channel.tool_name)
    if not cut:
        return 0
    found = await asyncio.to_thread(store.transcript, session_id)
    assert found is not None  # cut_asks read it
    key: SessionKey = {"project_key": found.project_key, "session_id": session_id}
    answers: dict[str, dict[str, str]] = {}  # anchor uuid -> call id -> its outcome
    anchors = {}
    for anchor, call in cut:
        given = call.get("input")
        given = given if isinstance(given, dict) else {}
        options = given.get("options")
        ask = await channel.ask(
            str(given.get("question") or ""),
            [str(o) for o in options] if isinstance(options, list) else None,
        )
        anchors[anchor["uuid"]] = anchor
        answers.setdefault(anchor["uuid"], {})[str(call.get("id"))] = channel.reply(ask)
    entries = [answer_entry(anchors[uid], said) for uid, said in answers.items()]
    await asyncio.to_thread(store.add, key, entries)  # type: ignore[arg-type]
    return len(cut)
