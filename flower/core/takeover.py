"""The context-full exit of Runtime.run, as one coroutine: the full session writes its own
handoff (or, overflowed, cannot, and gets a degraded one built from the task); the handoff is
filed in the workbench's notes; the events say where it stands (writing, done). What runs the
writer session and what it costs stays with the Runtime, behind `write`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from flower.core.events import Event
from flower.core.handoff import HANDOFF_PROMPT, Handoff, degraded, write_handoff

__all__ = ["SECTIONS", "take_over"]

SECTIONS = ("doing", "decided", "deadends", "next", "scene")
DEGRADED_WHY = "上一代会话没有写出完整的交接(缺少「正在做」或「下一步」)"


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
    emit(Event("handoff", f"上下文 {used}/{window},正在写交接", payload=writing))
    handoff: Handoff | None = None
    if not overflow:
        written = Handoff.parse(await write(HANDOFF_PROMPT.format(used=used, window=window)))
        handoff = written if written.complete() else None
    was_degraded = handoff is None
    if handoff is None:
        handoff = degraded(step, prompt, why=overflow or DEGRADED_WHY)
    handoff.step = step
    path = write_handoff(handoff, notes, step) if notes is not None else None
    done = {
        "phase": "done",
        "degraded": was_degraded,
        "path": str(path) if path else None,
        "sections": [name for name in SECTIONS if getattr(handoff, name)],
        **about,
    }
    emit(Event("handoff", f"交接完成,新会话接手{f':{path}' if path else ''}", payload=done))
    return handoff
