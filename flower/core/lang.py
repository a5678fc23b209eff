"""The language flower speaks: to the user (UI lines, step display names) and to the model
(rule texts, prompts, the documents' headings).

Resolved in this order: `--lang` (both CLIs put it into $FLOWER_LANG, so a box and every
child process speak it too), $FLOWER_LANG, the locale (the first of LC_ALL, LC_MESSAGES and
LANG that is set: `zh...` means zh), else en. The zh texts are the seeds' own, byte for byte;
the en texts say the same in English. Both tables (flower.core.texts) have the same keys and
the same placeholders, which a test checks.

What is on disk does not follow the language: the starter's step names (the labels runs are
recorded and resumed under) and the documents' file names (需求.md, 目标.md...) are the seeds'
in both, so a run resumes across a change of language (docs/documents.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from flower.core.texts.en import EN
from flower.core.texts.zh import ZH
from flower.errors import UsageError

__all__ = ["LANG_ENV", "LANGS", "Lang", "LangError", "current", "resolve", "text", "word"]

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")
LANG_ENV = "FLOWER_LANG"
_LOCALE = ("LC_ALL", "LC_MESSAGES", "LANG")
_TABLES: dict[Lang, Mapping[str, str]] = {"en": EN, "zh": ZH}


class LangError(UsageError):
    """A language flower does not speak, from `--lang` or $FLOWER_LANG."""

    fix = "pass --lang en or --lang zh (or set FLOWER_LANG to one of them)"

    def __init__(self, value: str, source: str) -> None:
        super().__init__(f"{source} is {value!r}, a language flower does not speak: {self.fix}")
        self.value = value


def resolve(flag: str | None = None, environ: Mapping[str, str] | None = None) -> Lang:
    """The language of this process: `flag` (from --lang), else $FLOWER_LANG, else the locale,
    else en. An empty $FLOWER_LANG counts as unset; any other unknown value is a LangError."""
    env = os.environ if environ is None else environ
    for value, source in ((flag, "--lang"), (env.get(LANG_ENV) or None, LANG_ENV)):
        if value is not None:
            chosen = value.strip().lower()
            if chosen not in LANGS:
                raise LangError(value, source)
            return chosen
    for name in _LOCALE:
        if locale := env.get(name):
            return "zh" if locale.lower().startswith("zh") else "en"
    return "en"


def current() -> Lang:
    """The language now (read each time: a CLI's --lang sets $FLOWER_LANG before any run)."""
    return resolve()


def text(key: str, /, **fields: object) -> str:
    """The text `key` in the current language, its `{placeholders}` filled from `fields`."""
    template = _TABLES[current()][key]
    return template.format(**fields) if fields else template


def word(group: str, value: str) -> str:
    """`value` (an outcome, a run's status: an identifier the JSON keeps) as a person reads it:
    the text `group.value`, or `value` itself where the table has none."""
    table = _TABLES[current()]
    return table.get(f"{group}.{value}", value)
