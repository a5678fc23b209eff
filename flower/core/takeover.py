"""The context-full exit of Runtime.run, as one coroutine: the full session writes its own
handoff (or, overflowed, cannot, and gets a degraded one built from the task); the handoff is
filed in the workbench's notes; the events say where it stands (writing, done). What runs the
writer session and what it costs stays with the Runtime, behind `write`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from flower.core.events import Event
from flower.core.handoff import Handoff, degraded, handoff_prompt, write_handoff
from flower.core.lang import text

__all__ = ["SECTIONS", "take_over"]

SECTIONS = ("doing", "decided", "deadends", "next", "scene")


async def take_over(
    *,
    step: str,
    prompt: str,
    used: int,
    window: int,
    overflow: str,
    write: Callable[[str], Awaitable[str]],
    notes: Path | None,
    emit: Callable[[Event], None],
) -> Handoff:
    """The handoff a new session of `step` starts from.

    `write(prompt)` runs the full session on the handoff prompt and returns its text; it is
    not called when the session overflowed (`overflow` holds that error).
    """
    about = {"step": step, "context": used, "window": window}
    writing = {"phase": "writing", **about}
    emit(Event("handoff", text("handoff.writing", used=used, window=window), payload=writing))
    handoff: Handoff | None = None
    if not overflow:
        written = Handoff.parse(await write(handoff_prompt(used, window)))
        handoff = written if written.complete() else None
    was_degraded = handoff is None
    if handoff is None:
        handoff = degraded(step, prompt, why=overflow or text("handoff.incomplete"))
    handoff.step = step
    path = write_handoff(handoff, notes, step) if notes is not None else None
    done = {
        "phase": "done",
        "degraded": was_degraded,
        "path": str(path) if path else None,
        "sections": [name for name in SECTIONS if getattr(handoff, name)],
        **about,
    }
    said = text("handoff.done_at", path=path) if path else text("handoff.done")
    emit(Event("handoff", said, payload=done))
    return handoff
