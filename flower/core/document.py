"""The common shape of the four documents (Brief, Handoff, Goal, Verdict), written once.

A document is a dataclass whose text fields are *sections* of a model's reply: `parse()` reads
them from any text and never raises, `missing()` / `complete()` check the required ones,
`to_markdown()` renders them for humans, `prompt_block()` for the next model, and `write()` /
`load()` keep them on disk.

Parsing rules (docs/documents.md has the examples):

- Fenced blocks (``` or ~~~ at the start of a line) are removed; a fence that is never closed
  drops everything after it, so a truncated reply parses as incomplete.
- A heading is a line naming a section title or alias (case-insensitive), in any of these
  forms: `## 目标` (any `#` level), `**目标**`, `目标:` / `目标：`, `3. 边界` / `3、边界` /
  `3) 边界`, combinations of them (`## 1. **目标**`), or the bare title alone on its line.
- The body may start on the heading line after a colon, after the closing `**` of a bold
  heading, or after a space on a `#` heading (`目标: 做一个 X`, `**目标** 做一个 X`,
  `## 目标 做一个 X`), and runs to the next heading. Elsewhere a line whose first word merely
  starts with a title (`## 目标管理`, a body's `1. 目标 文件存在`) is text.
- Names are tried longest first, so `未知` never swallows `未知与假设`.
- A repeated section keeps its first non-empty body; the placeholder `(未填)` is empty.
- Text before the first heading is ignored.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

from flower.core.lang import Lang, current, text
from flower.core.texts.en import EN
from flower.core.texts.zh import ZH

__all__ = ["PLACEHOLDER", "Document", "Section", "Sections", "split_items", "strip_fences"]

PLACEHOLDER = ZH["document.placeholder"]
"""What `to_markdown()` shows for an empty section in zh (en: `(not filled in)`); either is
parsed back as empty."""

_PLACEHOLDERS = frozenset({PLACEHOLDER, "（未填）", EN["document.placeholder"]})
_FENCE = re.compile(r"^[ \t]*(?P<mark>`{3,}|~{3,})")
_NUMBER = r"(?:\d{1,3}[.、)）][ \t]*)"
_COLONS = ":："
_BULLET = re.compile(rf"^(?:[-*+•·][ \t]+|{_NUMBER})")


@dataclass(frozen=True)
class Section:
    """One section of a document: the dataclass `field` it fills, its heading `title` (the
    documented default, used when rendering in zh), its English heading `en` (used when
    rendering in en) and the other names a heading may use. Every name reads in any language.

    `listed` sections hold a `list[str]`: one item per bullet or numbered entry.
    """

    field: str
    title: str
    aliases: tuple[str, ...] = ()
    required: bool = True
    listed: bool = False
    en: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return (self.title, *self.aliases, *((self.en,) if self.en else ()))

    def heading(self, lang: Lang | None = None) -> str:
        """The heading rendered in `lang` (default: the current language)."""
        return self.en if self.en and (lang or current()) == "en" else self.title


def strip_fences(text: str) -> str:
    """`text` without its fenced blocks; an unclosed fence drops everything from it on."""
    kept: list[str] = []
    closing: str | None = None
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if closing is None:
            if match:
                closing = match["mark"]
            else:
                kept.append(line)
        elif match and match["mark"][0] == closing[0] and len(match["mark"]) >= len(closing):
            closing = None
    # An unclosed fence kept nothing after it: what follows may be half a code dump.
    return "\n".join(kept)


def split_items(body: str) -> list[str]:
    """The entries of a list body: each bullet or numbered line starts one, an indented line
    continues the previous one, any other non-blank line is an entry of its own."""
    items: list[str] = []
    for line in body.split("\n"):
        if not line.strip():
            continue
        if items and line[:1] in " \t" and not _BULLET.match(line.lstrip()):
            items[-1] = f"{items[-1]} {line.strip()}"
            continue
        item = _BULLET.sub("", line.lstrip(), count=1).strip()
        if item:
            items.append(item)
    return items


class Sections:
    """The heading grammar of one document class, compiled once from its sections."""

    def __init__(self, sections: tuple[Section, ...]) -> None:
        owner = {name.casefold(): s.field for s in sections for name in s.names}
        self._owner = owner
        # Longest first: re tries alternatives in order, and 未知 must not win over 未知与假设.
        names = "|".join(re.escape(n) for n in sorted(owner, key=len, reverse=True))
        self._heading = re.compile(
            rf"^[ \t]*(?P<hash>\#{{1,6}}[ \t]*)?(?P<num1>{_NUMBER})?(?P<bold>\*\*)?[ \t]*"
            rf"(?P<num2>{_NUMBER})?(?P<name>{names})[ \t]*(?P<colon>[{_COLONS}])?[ \t]*"
            rf"(?(bold)\*\*)(?P<after>.*)$",
            # ASCII: Unicode case-insensitivity matches "İ" to "i", whose casefold is no key.
            re.IGNORECASE | re.ASCII,
        )

    def heading(self, line: str) -> tuple[str, str] | None:
        """(field, same-line body) when `line` is a heading, else None."""
        match = self._heading.match(line)
        if match is None:
            return None
        after = match["after"].strip()
        if match["hash"] and not after.strip("#"):
            after = ""  # `## 目标 ##`: closing hashes of an ATX heading
        colon = bool(match["colon"])
        if not colon and after.startswith(tuple(_COLONS)):
            after, colon = after[1:].strip(), True
        spaced = bool(match["hash"]) and line[match.end("name") :][:1] in (" ", "\t")
        if after and not (colon or match["bold"] or spaced):
            return None  # `## 目标管理` or `Next steps were...`: a word that merely starts so
        return self._owner[match["name"].casefold()], after

    def read(self, text: str) -> dict[str, str]:
        """Body per field for every heading found (an empty string when only empty ones)."""
        bodies: dict[str, str] = {}
        current: str | None = None
        lines: list[str] = []

        def close() -> None:
            if current is None:
                return
            body = "\n".join(lines).strip()
            if body in _PLACEHOLDERS:
                body = ""
            if not bodies.get(current):  # the first non-empty body wins
                bodies[current] = body

        clean = strip_fences(text.replace("\r\n", "\n").replace("\r", "\n"))
        for line in clean.split("\n"):
            found = self.heading(line)
            if found is None:
                lines.append(line)
                continue
            close()
            current, first = found
            lines = [first]
        close()
        return bodies


class Document:
    """Base of the section documents; subclasses are dataclasses that set the class variables.

    Subclasses declare `SECTIONS` (in rendering order), `TITLE` and `TITLE_EN` (the top
    heading of the Markdown form in zh and in en) and may name a plain text field in
    `SUBJECT`, shown in the top heading (`# 交接 · <step>`) and read back from it. Every
    subclass has `path`, set by `write()` and `load()` and left out of equality.
    """

    SECTIONS: ClassVar[tuple[Section, ...]]
    TITLE: ClassVar[str]
    TITLE_EN: ClassVar[str]
    SUBJECT: ClassVar[str | None] = None
    grammar: ClassVar[Sections]
    path: Path | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.grammar = Sections(cls.SECTIONS)

    @classmethod
    def parse(cls, text: str) -> Self:
        """The document in `text`; any input gives a document (possibly incomplete)."""
        return cls(**cls._values(cls.grammar.read(text), text))

    @classmethod
    def _values(cls, bodies: dict[str, str], text: str) -> dict[str, Any]:
        """Constructor arguments from the bodies found in `text` (a subclass may derive more)."""
        values: dict[str, Any] = {
            s.field: split_items(bodies.get(s.field, "")) if s.listed else bodies.get(s.field, "")
            for s in cls.SECTIONS
        }
        if cls.SUBJECT is not None:
            values[cls.SUBJECT] = cls._subject(text)
        return values

    @classmethod
    def skeleton(cls, lang: Lang | None = None) -> str:
        """The heading lines a prompt asks for, one `## <heading>` each, in `lang` (default:
        the current language): exactly what parse reads."""
        return "\n".join(f"## {s.heading(lang)}" for s in cls.SECTIONS)

    @classmethod
    def title(cls) -> str:
        """The top heading in the current language."""
        return cls.TITLE_EN if current() == "en" else cls.TITLE

    @classmethod
    def _subject(cls, text: str) -> str:
        first = text.lstrip().split("\n", 1)[0].strip()
        for title in (cls.TITLE, cls.TITLE_EN):  # written in either language
            prefix = f"# {title} · "
            if first.startswith(prefix):
                return first[len(prefix) :].strip()
        return ""

    @classmethod
    def load(cls, path: str | Path) -> Self | None:
        """The document stored at `path`, or None when there is no such file.

        A file that exists but does not read (junk, bad UTF-8, a directory) gives an
        incomplete document, never an error: the caller then asks the model again.
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return None
        except OSError:
            text = ""
        doc = cls.parse(text)
        doc.path = path
        return doc

    def body(self, section: Section) -> str:
        """The Markdown body of `section` ("" when empty)."""
        value = getattr(self, section.field)
        if section.listed:
            return "\n".join(f"- {item}" for item in value)
        return str(value)

    def missing(self) -> list[str]:
        """Titles of the required sections that are empty, in document order."""
        return [s.title for s in self.SECTIONS if s.required and not self.body(s).strip()]

    def complete(self) -> bool:
        return not self.missing()

    def to_markdown(self) -> str:
        """The document for humans: every section, an empty one shown as `(未填)` (in en,
        `(not filled in)`)."""
        subject = getattr(self, self.SUBJECT) if self.SUBJECT else ""
        title = self.title()
        top = f"# {title} · {subject}" if subject else f"# {title}"
        parts = [top]
        empty = text("document.placeholder")
        for s in self.SECTIONS:
            parts.append(f"## {s.heading()}\n\n{self.body(s).strip() or empty}")
        return "\n\n".join(parts) + "\n"

    def prompt_block(self) -> str:
        """The document for the next model: its non-empty sections inside a frame."""
        inner = [f"## {s.heading()}\n{self.body(s).strip()}" for s in self.SECTIONS if self.body(s)]
        title = self.title()
        return f"<{title}>\n" + "\n\n".join(inner) + f"\n</{title}>"

    def write(self, path: str | Path) -> Path:
        """Write `to_markdown()` to `path` atomically (parents created); set and return `path`."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(self.to_markdown())
            os.chmod(tmp, 0o644)  # a document for humans, not mkstemp's private 0600
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        self.path = path
        return path
