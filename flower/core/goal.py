"""The frozen goal and the judge's verdict on each round.

`Goal` is what goal_step freezes (目标.md by default): the statement and the checklist the
judge rules on. A check marked `[此环境无法验证:…]` cannot be verified here (`unverifiable()`),
which goal_step reports as soon as the goal is set.

`Verdict` is one round's ruling, read in the seeds' five steps (see `Verdict.parse`); its
state is one of `ACHIEVED`, `NOT_YET`, `UNREACHABLE`, or "" when nothing was recognised.
`UNREACHABLE` stops and asks a human; anything else that is not `ACHIEVED` sends the work
back with `feedback()`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from flower.core import lang
from flower.core.document import Document, Section, strip_fences

__all__ = ["ACHIEVED", "NOT_YET", "STATE_WORDS", "UNREACHABLE", "Goal", "Verdict"]

ACHIEVED = "achieved"
NOT_YET = "not_yet"
UNREACHABLE = "unreachable"

STATE_WORDS: dict[str, tuple[str, ...]] = {
    ACHIEVED: (
        "达成",
        "已达成",
        "通过",
        "已通过",
        "已完成",
        "achieved",
        "pass",
        "passed",
        "yes",
        "done",
    ),
    NOT_YET: (
        "未达成",
        "没达成",
        "没有达成",
        "未完成",
        "没完成",
        "未通过",
        "没通过",
        "没有通过",
        "不通过",
        "继续",
        "not yet",
        "not_yet",
        "not achieved",
        "not pass",
        "not passed",
        "not done",
        "fail",
        "failed",
        "no",
    ),
    UNREACHABLE: (
        "无法达成",
        "不能达成",
        "不可能达成",
        "不可达",
        "不可能",
        "无法验证",
        "没法验证",
        "验证不了",
        "无法判定",
        "unverifiable",
        "unreachable",
        "unachievable",
        "impossible",
        "cannot verify",
        "cannot be verified",
    ),
}
"""The words a conclusion may use, per state. The judge is asked for the first Chinese word
of each; matching is case-insensitive, longest first, English words whole words only."""

_STATE_OF = {" ".join(w.split()).casefold(): s for s, words in STATE_WORDS.items() for w in words}


def _word(word: str) -> str:
    pattern = r"\s+".join(re.escape(part) for part in word.split())
    # Chinese has no word boundaries; English must not match inside words ("no" in "know").
    return rf"(?<![a-z0-9_]){pattern}(?![a-z0-9_])" if word.isascii() else pattern


# Longest first: at one position 未达成 must win over 达成 and 不通过 over 通过.
_STATE_WORD = re.compile(
    "|".join(_word(w) for w in sorted(_STATE_OF, key=len, reverse=True)),
    re.IGNORECASE | re.ASCII,  # as the heading grammar: "İ" must not match "i"
)
_RENDERED = {ACHIEVED: "达成", NOT_YET: "未达成", UNREACHABLE: "无法达成"}
_RENDERED_EN = {ACHIEVED: "achieved", NOT_YET: "not achieved", UNREACHABLE: "unreachable"}
_UNVERIFIABLE = re.compile(
    r"[\[【]\s*(?:此环境无法验证|本环境无法验证|unverifiable here|unverifiable in this environment)"
    r"\s*[:：]",
    re.IGNORECASE,
)


@dataclass
class Goal(Document):
    """The statement and the verdict checklist; complete with a statement and one check."""

    SECTIONS: ClassVar[tuple[Section, ...]] = (
        Section("statement", "目标", ("Goal", "Objective", "Statement"), en="Goal"),
        Section(
            "checks",
            "验收清单",
            ("判定清单", "Checks", "Checklist", "Acceptance checklist", "Verdict checklist"),
            listed=True,
            en="Checks",
        ),
    )
    TITLE: ClassVar[str] = "冻结的目标"
    TITLE_EN: ClassVar[str] = "Frozen goal"

    statement: str = ""
    checks: list[str] = field(default_factory=list)
    path: Path | None = field(default=None, compare=False)

    def unverifiable(self) -> list[str]:
        """The checks marked `[此环境无法验证:…]` (or `[unverifiable here: …]`)."""
        return [check for check in self.checks if _UNVERIFIABLE.search(check)]

    def amend(self, text: str, *, when: datetime | None = None) -> Goal:
        """A new Goal with the human's change recorded under a dated 修订 line of the statement.

        The checks are kept: the revision says it prevails, and the judge reads both. The
        change is quoted (`> `) so that no line of it can read as a heading of the goal.
        """
        if not text.strip():
            return replace(self, checks=list(self.checks))
        stamp = (when or datetime.now().astimezone()).strftime("%Y-%m-%d %H:%M")
        quoted = "\n".join(f"> {line}".rstrip() for line in text.strip().split("\n"))
        revision = lang.text("goal.revision", stamp=stamp, quoted=quoted)
        statement = f"{self.statement}\n\n{revision}" if self.statement else revision
        return replace(self, statement=statement, checks=list(self.checks))


@dataclass
class Verdict(Document):
    """One round's ruling: conclusion, reason, and the checks that failed."""

    SECTIONS: ClassVar[tuple[Section, ...]] = (
        Section("state", "结论", ("判定", "Verdict", "Conclusion"), en="Verdict"),
        Section("reason", "理由", ("Reason", "Reasons", "Why"), en="Reason"),
        Section(
            "failed",
            "未通过项",
            ("Failed checks", "Failed items", "Failures"),
            required=False,
            listed=True,
            en="Failed checks",
        ),
    )
    TITLE: ClassVar[str] = "判定结果"
    TITLE_EN: ClassVar[str] = "Ruling"

    state: str = ""
    reason: str = ""
    failed: list[str] = field(default_factory=list)
    path: Path | None = field(default=None, compare=False)

    @classmethod
    def _values(cls, bodies: dict[str, str], text: str) -> dict[str, Any]:
        """The state is recognised in five steps, in this order:

        1. the conclusion is the 结论 / 判定 section;
        2. with no such section, the whole stripped text fully matching `1|true` is achieved,
           `0|false` not yet, and otherwise the whole text is the conclusion;
        3. the first word of `STATE_WORDS` found in the conclusion (longest first);
        4. an isolated `1` (achieved), else an isolated `0` (not yet);
        5. nothing: state "" (`ok` is False).
        """
        values = super()._values(bodies, text)
        conclusion = bodies.get("state")
        if conclusion is None:
            whole = strip_fences(text).strip().casefold()
            if re.fullmatch(r"1|true", whole):
                values["state"] = ACHIEVED
                return values
            if re.fullmatch(r"0|false", whole):
                values["state"] = NOT_YET
                return values
            conclusion = whole
        values["state"] = _recognise(conclusion)
        return values

    def body(self, section: Section) -> str:
        if section.field == "state":
            return (_RENDERED_EN if lang.current() == "en" else _RENDERED).get(
                self.state, self.state
            )
        return super().body(section)

    @property
    def ok(self) -> bool:
        """A state was recognised."""
        return bool(self.state)

    @property
    def achieved(self) -> bool:
        return self.state == ACHIEVED

    @property
    def unreachable(self) -> bool:
        return self.state == UNREACHABLE

    def feedback(self) -> str:
        """What the worker is told when the round is sent back: not yet, and why."""
        parts = [lang.text("goal.feedback")]
        if self.reason:
            parts.append(lang.text("goal.feedback_reason", reason=self.reason))
        if self.failed:
            items = "\n".join(f"- {item}" for item in self.failed)
            parts.append(lang.text("goal.feedback_failed", items=items))
        return "\n\n".join(parts)


def _recognise(conclusion: str) -> str:
    if match := _STATE_WORD.search(conclusion):
        return _STATE_OF[" ".join(match.group().split()).casefold()]
    if re.search(r"\b1\b", conclusion):
        return ACHIEVED
    if re.search(r"\b0\b", conclusion):
        return NOT_YET
    return ""
