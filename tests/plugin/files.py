"""The plugin's files read as the CLI reads them: JSON manifest, markdown with YAML front matter."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# The source plugin, whatever PLUGIN_DIR resolves to: the proofs are about these files. The
# seeds' (zh) plugin is at its root, its English twin in en/.
SOURCE = Path(__file__).resolve().parents[2] / "plugin"
ENGLISH = SOURCE / "en"


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


def manifest(root: Path = SOURCE) -> dict[str, Any]:
    data = json.loads((root / ".claude-plugin" / "plugin.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def skills(root: Path = SOURCE) -> list[Page]:
    return [read_page(p) for p in sorted(root.glob("skills/*/SKILL.md"))]


def agents(root: Path = SOURCE) -> list[Page]:
    return [read_page(p) for p in sorted(root.glob("agents/*.md"))]


def skill(name: str, root: Path = SOURCE) -> Page:
    return next(page for page in skills(root) if page.name == name)
