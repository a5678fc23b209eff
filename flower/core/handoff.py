"""The handoff: what a session whose context is full leaves to the fresh session taking over.

Runtime asks the full session for it with `HANDOFF_PROMPT` (only that session holds the
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

__all__ = [
    "HANDOFF_PROMPT",
    "OVERFLOW_WORDINGS",
    "SCENE_CHARS",
    "Handoff",
    "degraded",
    "handoff_path",
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
        Section("doing", "正在做", ("Doing", "In progress")),
        Section("decided", "已定结论", ("Decided", "Decisions"), required=False),
        Section("deadends", "死路", ("Dead ends", "Deadends", "走不通的路"), required=False),
        Section("next", "下一步", ("Next", "Next steps")),
        Section("scene", "现场", ("Scene", "Workspace"), required=False),
    )
    TITLE: ClassVar[str] = "交接"
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
        whose = f"步骤「{self.step}」" if self.step else "这个步骤"
        return (
            f"这是{whose}上一代会话留下的交接：它的上下文满了，由你这个全新的会话接着做。"
            "你看不到之前的对话，下面就是它交给你的全部内容。\n\n"
            f"{super().prompt_block()}\n\n"
            "先按「现场」核对工作区的实际状态，再从「下一步」接着做；「死路」里的路不要再走。"
        )


HANDOFF_PROMPT = """\
上下文快满了（已用 {used} / 窗口 {window} tokens）。这个会话到此为止，同一步骤将由一个全新的\
会话接手；它看不到这段对话，只能看到你现在写的交接。

各节写什么：
- 正在做（必填）：手上的活做到哪一步了。
- 已定结论：已经确定、不必再讨论的结论和决定，附上依据。
- 死路：真正试过且走不通的路，以及为什么走不通；没有就留空，不要编。
- 下一步（必填）：接手的会话第一件该做的事，越具体越好。
- 现场：接手需要知道的现场：改过的文件、关键路径、要跑的命令、没跑完的东西。

只输出下面这五个标题行和各自的内容，标题一字不改，每个单独成行；除此之外什么都不要写，\
不要用代码块。

""" + Handoff.skeleton()
"""Makes the full session write its own handoff; format it with `used` and `window` (tokens)."""


def is_overflow(*texts: str | None) -> bool:
    """Whether any of `texts` says the context overflowed (an error turned into a handoff)."""
    return any(
        wording in text.casefold() for text in texts if text for wording in OVERFLOW_WORDINGS
    )


def degraded(step: str, prompt: str, *, why: str = "") -> Handoff:
    """The handoff built mechanically when the session could not write one: it says so, and
    sends the new session to check the workspace before trusting anything."""
    reason = f"（{why}）" if why else ""
    return Handoff(
        doing=f"上一代会话没能写出交接{reason}，它做到了哪一步不得而知。",
        next=(
            "先核对工作区的实际状态（文件、git 状态、工作台的 notes/ 和 artifacts/），"
            "弄清哪些已经做完、哪些做了一半；再接着完成原始任务（开头部分见「现场」）。"
        ),
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
