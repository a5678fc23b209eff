"""What a subagent that was cut short had done, read from its transcript (issue 30).

A kill (or a CLI that dies mid-turn) between a worker's start and its report leaves the
worker's own transcript, a subkey of the session (``subagents/agent-<id>``), with every tool
call it made and the results that were stored, and an ``agent_metadata`` entry (naming the
coordinator's Agent call in ``toolUseId``) that the CLI never rewrote with ``finished:
true``. :func:`cut_short` finds such workers, so the continuation can hand their work on
instead of having it done again. A call with no stored result was in flight at the cut: it
may or may not have run (``Call.result`` None), and whoever continues must check before
redoing it; so may a call the CLI interrupted while it ran (its result says so), and a call
whose only result is the one the store made up for it on an earlier resume
(flower.stores.prune.heal_orphans: "cut, redo it if needed" is not what the call did). A
continuation that handed a worker on names its agent id in the main thread (the note it
adds to the prompt): the session has been told (``CutShort.noted``). The next
worker is shown the list by a hook, which no transcript records; a worker that the main
thread started after that note (its Agent call later, its transcript stored) got it, and the
cut one is then handed on for good. A continuation killed between the note and the next
worker's start leaves it noted but not handed on: the next resume shows it to a worker again
(noted, so without telling the session twice).

Pure functions over entries, as the store keeps them; the words are the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flower.stores.prune import is_healing
from flower.stores.records import SessionTranscript
from flower.stores.transcript import Entry, blocks, result_text

__all__ = ["AGENT_TOOLS", "Call", "CutShort", "calls_of", "cut_short"]

AGENT_TOOLS = frozenset({"Agent", "Task"})  # the request calls it Agent, init.tools Task
# The CLI's words on the result of a call an interrupt cut (a handoff's, a user's): with or
# without its "this call was stopped while running ... may have run in part or in full"
# (a background worker's cut call gets the bare words, though its command had started).
# flower asks no permission of a person, so only an interrupt says them: the call is in doubt.
STOPPED_WHILE_RUNNING = "The user doesn't want to proceed with this tool use"


@dataclass(frozen=True)
class Call:
    """One tool call of the cut subagent: `result` None means none was stored (the call
    was in flight at the cut and may have run); `failed` an is_error result."""

    name: str
    input: dict[str, Any]
    result: str | None
    failed: bool = False


@dataclass(frozen=True)
class CutShort:
    """A subagent, started by the Agent call `tool_use_id`, that never finished."""

    tool_use_id: str
    agent_id: str
    agent_type: str
    description: str
    prompt: str
    cwd: str
    calls: tuple[Call, ...]
    noted: bool = False  # the session was told already; only a worker is still to be shown it


def calls_of(entries: Sequence[Entry]) -> tuple[Call, ...]:
    """Every tool call in `entries` with its stored result, in the order they were made."""
    results: dict[Any, tuple[str, bool]] = {}
    for entry in entries:
        if is_healing(entry):  # made up on an earlier resume: the call is still in doubt
            continue
        for block in blocks(entry):
            if block.get("type") == "tool_result":
                said = result_text(block)
                if said is not None and STOPPED_WHILE_RUNNING in said:
                    continue  # an interrupt cut it: in doubt
                shown = said if said is not None else "[not text]"
                results[block.get("tool_use_id")] = (shown, block.get("is_error") is True)
    calls: list[Call] = []
    for entry in entries:
        if entry.get("type") != "assistant":
            continue
        for block in blocks(entry):
            if block.get("type") != "tool_use":
                continue
            given = block.get("input")
            found = results.get(block.get("id"))
            calls.append(
                Call(
                    name=str(block.get("name", "")),
                    input=given if isinstance(given, dict) else {},
                    result=found[0] if found else None,
                    failed=bool(found and found[1]),
                )
            )
    return tuple(calls)


def cut_short(
    transcript: SessionTranscript, *, named: Callable[[str], Sequence[str]] = lambda a: (a,)
) -> list[CutShort]:
    """The subagents of `transcript` that never finished (their `agent_metadata` was never
    rewritten with ``finished: true``) or whose report never reached the main thread (their
    Agent call has no result there), and that no worker started after the main thread named
    them (see the module docstring) in one of the ways `named(agent_id)` lists (the bare id
    by default; the CLI's own notices name a background worker by its id too), in the order
    the main thread started them; `noted` when the main thread names them already."""
    started = [
        str(use.get("id"))
        for entry in transcript.main
        if entry.get("type") == "assistant"
        for use in blocks(entry)
        if use.get("type") == "tool_use" and use.get("name") in AGENT_TOOLS
    ]
    calls = {
        str(use.get("id")): use
        for entry in transcript.main
        for use in blocks(entry)
        if use.get("type") == "tool_use"
    }
    answered = {
        block.get("tool_use_id")
        for entry in transcript.main
        for block in blocks(entry)
        if block.get("type") == "tool_result"
    }
    naming = _naming(transcript.main)
    started_at = {tid: i for i, tid in enumerate(started)}
    workers = {  # the Agent calls whose worker's transcript is stored: those workers started
        str(m.get("toolUseId"))
        for entries in transcript.subagents.values()
        for m in entries
        if m.get("type") == "agent_metadata"
    }
    found: list[CutShort] = []
    for entries in transcript.subagents.values():
        metas = [e for e in entries if e.get("type") == "agent_metadata"]
        agent = _first(entries, "agentId")
        if not metas or not agent:
            continue
        finished = any(m.get("finished") is True for m in metas)
        if finished and metas[-1].get("toolUseId") in answered:  # its report arrived
            continue
        names = named(agent)
        noted_at = next((i for i, said in naming if any(n in said for n in names)), None)
        if noted_at is not None and any(
            started_at.get(tid, -1) > noted_at for tid in workers
        ):  # handed on already: a worker started after the note got the list
            continue
        meta = metas[-1]
        call = calls.get(str(meta.get("toolUseId")), {})
        given: dict[str, Any] = call["input"] if isinstance(call.get("input"), dict) else {}
        found.append(
            CutShort(
                tool_use_id=str(meta.get("toolUseId") or ""),
                agent_id=agent,
                agent_type=str(meta.get("agentType") or ""),
                description=str(given.get("description") or meta.get("description") or ""),
                prompt=str(given.get("prompt") or ""),
                cwd=_first(entries, "cwd"),
                calls=calls_of(entries),
                noted=noted_at is not None,
            )
        )
    order = {tid: i for i, tid in enumerate(started)}
    return sorted(found, key=lambda cut: order.get(cut.tool_use_id, len(order)))


def _naming(entries: Sequence[Entry]) -> list[tuple[int, str]]:
    """The text each user entry of the main thread says (string prompts and text blocks),
    with how many Agent calls the main thread had made before it (comparable with a call's
    index among them)."""
    said: list[tuple[int, str]] = []
    calls = 0
    for entry in entries:
        if entry.get("type") == "assistant":
            calls += sum(
                1
                for use in blocks(entry)
                if use.get("type") == "tool_use" and use.get("name") in AGENT_TOOLS
            )
        if entry.get("type") != "user":
            continue
        content = (
            entry.get("message", {}).get("content")
            if isinstance(entry.get("message"), dict)
            else None
        )
        texts = [content] if isinstance(content, str) else []
        texts += [str(b.get("text", "")) for b in blocks(entry) if b.get("type") == "text"]
        if texts:
            said.append((calls - 1, "\n".join(texts)))
    return said


def _first(entries: Sequence[Entry], name: str) -> str:
    """The first string value of field `name` among `entries` ("" if none has one)."""
    return next((e[name] for e in entries if isinstance(e.get(name), str)), "")
