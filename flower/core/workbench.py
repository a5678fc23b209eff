"""The workbench: the on-disk desk an agent writes to, and the index that tells it what is there.

Layout (created on construction)::

    <root>/
      INDEX.md      generated; injected into the main session's system prompt
      scripts/      scripts meant to be re-run; a `# desc: ...` line names each in the index
      artifacts/    long outputs (reports, data, logs); the conversation only gets the path
      notes/        decisions, one file per decision
      spill/        oversized tool results written by `spill_guard` (not listed in the index)

`root` is `home` when given, else `<workspace>/<dirname>`. A root outside the workspace is
*external* (worktree isolation needs that: an isolated agent cannot write into the shared
checkout), and then every path shown to the model is absolute.

Errors::

    WorkbenchError   the root or one of its folders cannot be a directory (path and fix given);
                     a FlowerError, and a ValueError as it always was
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from flower.core import lang
from flower.core.workspace import WORKBENCH_DIRNAME
from flower.errors import FlowerError

__all__ = ["ARTIFACT_CHARS", "DESC_CHARS", "Workbench", "WorkbenchError"]

ARTIFACT_CHARS = 2000
"""Outputs longer than this belong in artifacts/ (the rule prompt_block states)."""

DESC_CHARS = 100
"""A script's description is cut to this many characters in the index."""

_DESC_LINES = 8
_INDEXED = ("scripts", "artifacts", "notes")
_COMMENT = re.compile(r"^\s*(?:#|//|--)\s?(?P<text>.*)$")
_DESC = re.compile(r"^\s*(?:#|//|--)\s*desc:\s*(?P<text>.*\S)", re.IGNORECASE)
_CODING = re.compile(r"^#.*coding[:=]")
_DOCSTRING = re.compile(r"^\s*[rRuU]?(?P<quote>\"\"\"|''')(?P<text>.*)$")


class WorkbenchError(FlowerError, ValueError):
    """The workbench cannot live at `path`; the message says why and what to do."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path


@dataclass
class Workbench:
    """A workbench rooted at `home`, or at `<workspace>/<dirname>` when `home` is None.

    Construction creates the four folders and INDEX.md (an existing workbench is reused as
    it is). `workspace` and `home` are stored resolved to absolute paths.
    `max_index_entries` caps each section of the index (newest files first).
    """

    FOLDERS: ClassVar[tuple[str, ...]] = (*_INDEXED, "spill")

    workspace: Path
    dirname: str = WORKBENCH_DIRNAME
    max_index_entries: int = 40
    home: Path | None = None

    def __post_init__(self) -> None:
        if self.max_index_entries < 1:
            raise ValueError(f"max_index_entries must be at least 1, got {self.max_index_entries}")
        self.workspace = Path(self.workspace).expanduser().resolve()
        if self.home is not None:
            self.home = Path(self.home).expanduser().resolve()
        for folder in (self.root, *(self.root / name for name in self.FOLDERS)):
            _make_dir(folder)
        if not self.index.exists():
            self.refresh()

    @property
    def root(self) -> Path:
        """The workbench directory (absolute)."""
        return self.home if self.home is not None else self.workspace / self.dirname

    @property
    def external(self) -> bool:
        """True when the root lies outside the workspace."""
        return not self.root.is_relative_to(self.workspace)

    @property
    def index(self) -> Path:
        return self.root / "INDEX.md"

    @property
    def scripts(self) -> Path:
        return self.root / "scripts"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def notes(self) -> Path:
        return self.root / "notes"

    @property
    def spill(self) -> Path:
        return self.root / "spill"

    def show(self, path: Path) -> str:
        """`path` as the model should see it: absolute when external, else workspace-relative."""
        if self.external or not path.is_relative_to(self.workspace):
            return str(path)
        return str(path.relative_to(self.workspace))

    def describe(self, path: Path) -> str:
        """One line saying what the script at `path` does, "" when it says nothing.

        Looks at the first 8 lines: a `# desc:` line (also `// desc:` and `-- desc:`) wins;
        otherwise the first comment with text (shebang and coding lines skipped) or the first
        line of a docstring, whichever comes first. Cut to DESC_CHARS. Undecodable bytes are
        replaced, and an unreadable file describes as "".
        """
        try:
            with path.open(encoding="utf-8", errors="replace") as f:
                head = [line for _, line in zip(range(_DESC_LINES), f, strict=False)]
        except OSError:
            return ""  # deleted or unreadable between listing and reading: say nothing
        for line in head:
            if match := _DESC.match(line):
                return _clip(match["text"])
        return _clip(_first_comment(head))

    def index_text(self) -> str:
        """The index as markdown: scripts with descriptions, artifacts, notes; newest first."""
        lines = [lang.text("workbench.index"), "", lang.text("workbench.generated")]
        for name in _INDEXED:
            folder = self.root / name
            files = _newest_first(folder)
            lines += ["", f"## {self.show(folder)}/"]
            if not files:
                lines.append(lang.text("workbench.empty"))
            for path in files[: self.max_index_entries]:
                desc = self.describe(path) if name == "scripts" else ""
                lines.append(f"- {self.show(path)}" + (f" — {desc}" if desc else ""))
            if len(files) > self.max_index_entries:
                more = len(files) - self.max_index_entries
                lines.append(lang.text("workbench.more", count=more))
        return "\n".join(lines) + "\n"

    def added_since(self, shown: str) -> list[str]:
        """The index's entries that `shown` (an index or prompt block written earlier) does
        not list: what a session whose system prompt is `shown` has not been told."""
        listed = set(shown.splitlines())
        markers = ("- …", lang.text("workbench.empty"))  # "... older files", "(empty)"
        return [
            line
            for line in self.index_text().splitlines()
            if line.startswith("- ") and line not in listed and not line.startswith(markers)
        ]

    def refresh(self) -> None:
        """Rewrite INDEX.md from what is on disk now, atomically (readers never see half)."""
        _replace_bytes(self.index, self.index_text().encode("utf-8"))

    def prompt_block(self) -> str:
        """The text appended to the main session's system prompt: rules, then the index."""
        where = lang.text("workbench.where", root=self.show(self.root))
        if self.external:
            where += lang.text("workbench.external")
        scripts, artifacts, notes = map(self.show, (self.scripts, self.artifacts, self.notes))
        return "\n".join(
            [
                where,
                lang.text("workbench.rules"),
                lang.text("workbench.scripts", scripts=scripts),
                lang.text("workbench.artifacts", chars=ARTIFACT_CHARS, artifacts=artifacts),
                lang.text("workbench.notes", notes=notes),
                "",
                self.index_text(),
            ]
        )

    def spill_text(self, text: str) -> Path:
        """Write `text` to `spill/<sha256[:16]>.txt` (once per content) and return the path.

        Encoded with `surrogatepass`, so any str (lone surrogates from a binary tool
        output included) is written losslessly and never raises.
        """
        data = text.encode("utf-8", errors="surrogatepass")
        path = self.spill / f"{hashlib.sha256(data).hexdigest()[:16]}.txt"
        if not path.exists():
            _replace_bytes(path, data)
        return path


def _make_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise WorkbenchError(path, lang.text("workbench.not_dir", path=path)) from exc
    except OSError as exc:  # a Python caller may also pass Workbench(home=...) elsewhere
        said = lang.text(
            "workbench.cannot_create", path=path, problem=exc.strerror, parent=path.parent
        )
        raise WorkbenchError(path, said) from exc


def _newest_first(folder: Path) -> list[Path]:
    # Hidden names are skipped: they are temp files of an atomic write or editor litter.
    files = [
        p
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    ]
    return sorted(files, key=_mtime, reverse=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0  # removed since it was listed; sorts last and is shown once more at most


def _first_comment(head: list[str]) -> str:
    for i, line in enumerate(head):
        stripped = line.strip()
        if stripped.startswith("#!") or _CODING.match(stripped):
            continue
        if match := _DOCSTRING.match(line):
            text = match["text"].split(match["quote"])[0].strip()
            if text:
                return text
            return next((rest.strip() for rest in head[i + 1 :] if rest.strip()), "")
        # A comment counts when it has a word in it: "# ----" rulers and "---" fences do not.
        if (match := _COMMENT.match(line)) and re.search(r"\w", match["text"]):
            return match["text"].strip()
    return ""


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= DESC_CHARS else text[: DESC_CHARS - 1] + "…"


def _replace_bytes(path: Path, data: bytes) -> None:
    # Temp file in the same folder, then rename: concurrent hooks and readers of INDEX.md or
    # a spill file see the old content or the new one, never a torn write.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
