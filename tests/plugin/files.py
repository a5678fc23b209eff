"""The plugin's files read as the CLI reads them: JSON manifest, markdown with YAML front matter."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# The source plugin, whatever PLUGIN_DIR resolves to: the proofs are about these files.
SOURCE = Path(__file__).resolve().parents[2] / "plugin"


@dataclass(frozen=True)
class Page:
    """One SKILL.md or agent file: its front matter and its body (what the model is given)."""

    path: Path
    meta: dict[str, Any]
    body: str

    @property
    def name(self) -> str:
        return str(self.meta.get("name", ""))

    @property
    def description(self) -> str:
        return str(self.meta.get("description", ""))


def read_page(path: Path) -> Page:
    text = path.read_text(encoding="utf-8")
    opening, matter, body = text.split("---\n", 2)
    assert opening == "", f"{path} must start with a --- front matter line"
    meta = yaml.safe_load(matter)
    assert isinstance(meta, dict), f"{path}: the front matter is not a mapping"
    return Page(path, meta, body)


def manifest() -> dict[str, Any]:
    data = json.loads((SOURCE / ".claude-plugin" / "plugin.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def skills() -> list[Page]:
    return [read_page(p) for p in sorted(SOURCE.glob("skills/*/SKILL.md"))]


def agents() -> list[Page]:
    return [read_page(p) for p in sorted(SOURCE.glob("agents/*.md"))]


def skill(name: str) -> Page:
    return next(page for page in skills() if page.name == name)
