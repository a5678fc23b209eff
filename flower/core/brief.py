"""The brief: what the clarifier settles before any work starts, in exactly four sections.

goal → accept → bounds → unknowns, titled 目标 / 验收标准 / 边界 / 未知与假设 (English
headings are read too). clarify_step parses the clarifier's reply with `Brief.parse`, freezes
a complete one with `write()` (需求.md by default) and hands `prompt_block()` downstream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from flower.core.document import Document, Section

__all__ = ["Brief"]


@dataclass
class Brief(Document):
    """A four-section brief; every section is required."""

    SECTIONS: ClassVar[tuple[Section, ...]] = (
        Section("goal", "目标", ("Goal", "Objective"), en="Goal"),
        Section(
            "accept", "验收标准", ("Acceptance", "Acceptance criteria", "验收"), en="Acceptance"
        ),
        Section("bounds", "边界", ("Bounds", "Scope", "Boundaries", "范围"), en="Bounds"),
        Section(
            "unknowns",
            "未知与假设",
            ("未知", "未知和假设", "假设", "Unknowns", "Unknowns and assumptions", "Assumptions"),
            en="Unknowns",
        ),
    )
    TITLE: ClassVar[str] = "需求"
    TITLE_EN: ClassVar[str] = "Brief"

    goal: str = ""
    accept: str = ""
    bounds: str = ""
    unknowns: str = ""
    path: Path | None = field(default=None, compare=False)
