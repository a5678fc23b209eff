"""A worker cut short, handed on (issue 30, docs/fault-behaviour.md).

When flower is killed (or the CLI dies mid-turn) while a worker runs, the session that
resumes never gets the worker's report, and a coordinator left to itself sends a fresh
worker that does everything again. A handoff (the coordinator's context full) cuts a worker
the same way, and the new generation, a brand-new session, is handed it on alike. The
worker's tool calls and their results are in the store (flower.stores.cut). Runtime hands
them on when it resumes a session (or starts a new generation):

- the coordinator's prompt starts with a note naming the worker and listing what it did
  (`note`), so it does not ask for it again; the note names the worker's agent id, which is
  how a later resume of the same session knows the session was told (it is not told twice);
- the next worker of the same type that the session starts is shown the same list, with
  where the cut one worked (`hooks`: a SubagentStart hook's additionalContext), and told
  to check it against the disk and continue. Until a worker started after the note, the
  list is shown again at each resume (flower.stores.cut: a kill between the note and that
  worker's start must not cost the hand-on).

A call with no stored result was running at the cut: it may or may not have happened, and
both texts say so. Nothing here re-runs anything: effects are at least once only where a
model, told "may have run", decides to do them again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from flower.core.hooks import Brief, as_handler
from flower.core.lang import text
from flower.core.texts.en import EN
from flower.core.texts.zh import ZH
from flower.stores.cut import Call, CutShort, cut_short
from flower.stores.prune import PruningSessionStore

__all__ = ["MAX_CALLS", "cut_work", "hooks", "note"]

MAX_CALLS = 40  # the latest calls of a long worker; the earlier ones are counted
_VALUE = 80  # characters of one input value shown
_RESULT = 100  # characters of one result shown
_BULK = frozenset({"content", "new_string", "old_string", "edits"})  # shown by their size


def cut_work(store: PruningSessionStore, session_id: str) -> list[CutShort]:
    """The workers of `session_id` that were cut short and not handed on yet."""
    transcript = store.transcript(session_id)
    return [] if transcript is None else cut_short(transcript, named=_named)


def _named(agent: str) -> tuple[str, ...]:
    """How a note of this module names a worker it handed on, in any language: the note's
    words up to the id, then the id (the CLI's notices about a background worker name its
    id too, and hand nothing on)."""
    return tuple(
        table[key].split("{agent}", 1)[0] + agent
        for table in (EN, ZH)
        for key in ("cut.coordinator", "cut.handoff_coordinator")
    )


def note(cuts: Sequence[CutShort], *, handoff: bool = False) -> str:
    """What the resumed coordinator (with `handoff`, the new generation that took over
    from the session that started them) is told first (empty when nothing was cut short, or
    when it was told already: a cut worker not yet shown to a worker is only the hook's)."""
    return "\n\n".join(
        text(
            "cut.handoff_coordinator" if handoff else "cut.coordinator",
            agent=cut.agent_id,
            description=cut.description,
            calls=calls_text(cut.calls),
        )
        for cut in cuts
        if not cut.noted
    )


def hooks(cuts: Sequence[CutShort], *, handoff: bool = False) -> dict[str, list[Any]]:
    """A SubagentStart hook that shows each cut worker's list to the first worker of its
    type started after it (once each; `handoff`: it was cut by one); {} when nothing was
    cut short."""
    waiting = list(cuts)
    if not waiting:
        return {}

    def hand_on(given: Mapping[str, Any]) -> Brief | None:
        kind = given.get("agent_type")
        cut = next((c for c in waiting if c.agent_type in ("", kind)), None)
        if cut is None:
            return None
        waiting.remove(cut)
        return Brief(
            text(
                "cut.handoff_worker" if handoff else "cut.worker",
                description=cut.description,
                cwd=cut.cwd or "?",
                calls=calls_text(cut.calls),
            )
        )

    return {"SubagentStart": [as_handler(hand_on)]}


def calls_text(calls: Sequence[Call]) -> str:
    """One line per call (the latest MAX_CALLS), its input and what came back."""
    if not calls:
        return text("cut.none")
    shown = list(enumerate(calls, start=1))[-MAX_CALLS:]
    lines = [f"({len(calls) - len(shown)} ...)"] if len(shown) < len(calls) else []
    for n, call in shown:
        said = f"{call.name} {_input(call.input)}"
        if call.result is None:
            lines.append(text("cut.open", n=n, call=said))
        else:
            key = "cut.failed" if call.failed else "cut.done"
            lines.append(text(key, n=n, call=said, result=_short(_gist(call.result), _RESULT)))
    return "\n".join(lines)


def _input(given: dict[str, Any]) -> str:
    shown = {
        name: f"<{len(str(value))} chars>" if name in _BULK else _short(value, _VALUE)
        for name, value in given.items()
    }
    return json.dumps(shown, ensure_ascii=False)


def _gist(result: str) -> str:
    """A result's first sentence when it runs on ("The file ... updated successfully.
    (file state is current ...)"): the rest is the CLI's advice to the caller, not news."""
    head, dot, _ = result.strip().partition(". ")
    return head + dot.strip() if dot else result


def _short(value: Any, limit: int) -> str:
    said = " ".join(str(value).split())
    return said if len(said) <= limit else said[: limit - 1] + "…"
