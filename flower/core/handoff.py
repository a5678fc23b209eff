"""The handoff: what a session whose context is full leaves to the fresh session taking over.

Runtime asks the full session for it with `handoff_prompt()` (only that session holds the
context), parses the reply with `Handoff.parse`, and falls back to `degraded()` when the reply
is incomplete or the session could not answer at all (`is_overflow`: the context was already
past the window). The new session's first prompt is `prompt_block()`.

On disk it is `<notes>/交接-<step>.md`; a previous one is first archived to
`<notes>/archive/交接/<step>-<timestamp>.md`, so every generation stays readable.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from flower.core.document import Document, Section
from flower.core.lang import text
from flower.core.texts.zh import ZH

__all__ = [
    "HANDOFF_PROMPT",
    "OVERFLOW_WORDINGS",
    "SCENE_CHARS",
    "Handoff",
    "degraded",
    "handoff_path",
    "handoff_prompt",
    "is_overflow",
    "write_handoff",
]

SCENE_CHARS = 1200
"""How much of the original task a degraded handoff carries in its scene."""

OVERFLOW_WORDINGS = (
    "prompt is too long",
    "context length exceeded",
    "context_length_exceeded",
    "maximum context length",
    "too many total text bytes",
    "input length and max_tokens exceed",
    "exceeds the context window",
    "exceed context limit",
    "context window exceeded",
    "model_context_window_exceeded",
)
"""Error texts (matched case-insensitively) that mean the context no longer fits the window."""

_UNSAFE = re.compile(r"[/\\#:*?\"<>|\x00-\x1f]")
_NAME_CHARS = 100


@dataclass
class Handoff(Document):
    """The handoff of one step's session; only `doing` and `next` are required (asking for
    dead ends would make the model invent some). `step` is metadata, not a section."""

    SECTIONS: ClassVar[tuple[Section, ...]] = (
        Section("doing", "正在做", ("Doing", "In progress"), en="Doing"),
        Section("decided", "已定结论", ("Decided", "Decisions"), required=False, en="Decided"),
        Section(
            "deadends",
            "死路",
            ("Dead ends", "Deadends", "走不通的路"),
            required=False,
            en="Dead ends",
        ),
        Section("next", "下一步", ("Next", "Next steps"), en="Next"),
        Section("scene", "现场", ("Scene", "Workspace"), required=False, en="Scene"),
    )
    TITLE: ClassVar[str] = "交接"
    TITLE_EN: ClassVar[str] = "Handoff"
    SUBJECT: ClassVar[str | None] = "step"

    doing: str = ""
    decided: str = ""
    deadends: str = ""
    next: str = ""
    scene: str = ""
    step: str = ""
    path: Path | None = field(default=None, compare=False)

    def prompt_block(self) -> str:
        """The first prompt of the brand-new session that takes the work over."""
        whose = text("handoff.step", step=self.step) if self.step else text("handoff.this_step")
        return text("handoff.resume", whose=whose, block=super().prompt_block())


HANDOFF_PROMPT = ZH["handoff.write"].format(
    used="{used}", window="{window}", skeleton=Handoff.skeleton("zh")
)
"""The seeds' (zh) handoff request, to format with `used` and `window` (tokens);
`handoff_prompt` gives the one in the current language."""


def handoff_prompt(used: int, window: int) -> str:
    """Makes the full session write its own handoff, in the current language."""
    return text("handoff.write", used=used, window=window, skeleton=Handoff.skeleton())


def is_overflow(*texts: str | None) -> bool:
    """Whether any of `texts` says the context overflowed (an error turned into a handoff)."""
    return any(
        wording in text.casefold() for text in texts if text for wording in OVERFLOW_WORDINGS
    )


def degraded(step: str, prompt: str, *, why: str = "") -> Handoff:
    """The handoff built mechanically when the session could not write one: it says so, and
    sends the new session to check the workspace before trusting anything."""
    reason = text("handoff.why", why=why) if why else ""
    return Handoff(
        doing=text("handoff.degraded_doing", why=reason),
        next=text("handoff.degraded_next"),
        scene=prompt[:SCENE_CHARS],
        step=step,
    )


def handoff_path(notes: str | Path, step: str) -> Path:
    """Where the handoff of `step` lives: `<notes>/交接-<step>.md`, with a safe file name."""
    return Path(notes) / f"交接-{_safe_name(step)}.md"


def write_handoff(handoff: Handoff, notes: str | Path, step: str) -> Path:
    """Write `handoff` as the current handoff of `step`, archiving the previous one first."""
    path = handoff_path(notes, step)
    if path.is_file():
        _archive(path, Path(notes) / "archive" / "交接", _safe_name(step))
    return handoff.write(path)


def _archive(path: Path, folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    data = path.read_bytes()
    for n in range(1, 10_000):
        target = folder / (f"{name}-{stamp}.md" if n == 1 else f"{name}-{stamp}-{n}.md")
        try:
            # "x" makes the name ours even against a concurrent archiver; a copy (not a move)
            # keeps the current handoff readable until the new one replaces it atomically.
            with target.open("xb") as f:
                f.write(data)
        except FileExistsError:
            continue
        return target
    raise FileExistsError(f"{folder} already holds 9999 archives of {name} from {stamp}")


def _safe_name(step: str) -> str:
    # Step names like "工作#round2" or "a/b" must stay one file in notes/, never a subfolder.
    name = _UNSAFE.sub("-", step).strip(" .") or "step"
    return name[:_NAME_CHARS]
