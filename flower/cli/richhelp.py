"""typer's help renderer without rich's Markdown and Traceback modules, and without rich's
table of emoji names, until one is used (issue 31).

`typer.rich_utils` draws every help page and usage error, and imports `rich.markdown`
(markdown-it) and `rich.traceback` (pygments, rich.pretty, attrs) on its first line: about
45 ms of CPU, a quarter of `flowerbox --help`, for a help written in rich markup (never
Markdown) and a traceback only a crash shows. `load` imports typer.rich_utils with those
two names standing in for the real classes: calling one (`Markdown(...)`) or reading an
attribute (`Traceback.from_exception`) imports rich's module and hands over to the real
class, so a crash's traceback and a Markdown help are drawn exactly as before. The stand-in
modules are gone from sys.modules once rich_utils is loaded: anything else that imports
`rich.markdown` gets rich's own.

Every text on a help page goes through rich's emoji replacement, which imports its table
of ~4,000 emoji names (`rich._emoji_codes`, ~1.5 ms) to look up any `:name:` in it; none of
our help texts has one. `load` puts a table in its place that imports rich's on its first
lookup and answers from it: a `:name:` is drawn as before.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any

DEFERRED = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}
"""The modules typer.rich_utils imports a name from that a help page never uses."""


class Deferred(type):
    """The class of a stand-in: attributes are the real class's (imported on first use)."""

    def __getattr__(cls, name: str) -> Any:
        return getattr(real(cls), name)


def real(stand_in: type) -> Any:
    """The class `stand_in` stands for, its module imported now."""
    module, name = stand_in.__module__, stand_in.__name__
    return getattr(importlib.import_module(module), name)


def stand_in(module: str, name: str) -> type:
    """A class that makes the real `module`.`name` when called, and reads its attributes."""

    def make(cls: type, *args: Any, **kwargs: Any) -> Any:
        return real(cls)(*args, **kwargs)

    return Deferred(name, (), {"__module__": module, "__new__": make})


EMOJI_CODES = "rich._emoji_codes"


class Emoji(Mapping[str, str]):
    """rich's table of emoji names, imported on the first lookup (then in sys.modules)."""

    def _real(self) -> Mapping[str, str]:
        if getattr(sys.modules.get(EMOJI_CODES), "EMOJI", None) is self:
            del sys.modules[EMOJI_CODES]
        table: Mapping[str, str] = importlib.import_module(EMOJI_CODES).EMOJI
        return table

    def __getitem__(self, name: str) -> str:
        return self._real()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._real())

    def __len__(self) -> int:
        return len(self._real())


def load() -> types.ModuleType:
    """typer.rich_utils, imported without rich's Markdown, Traceback and emoji names
    (idempotent)."""
    if "typer.rich_utils" in sys.modules:
        return sys.modules["typer.rich_utils"]
    if EMOJI_CODES not in sys.modules:  # stays: rich imports it at each replacement
        sys.modules[EMOJI_CODES] = types.ModuleType(EMOJI_CODES)
        sys.modules[EMOJI_CODES].EMOJI = Emoji()  # type: ignore[attr-defined]
    placed = {}
    for module, name in DEFERRED.items():
        if module not in sys.modules:
            placed[module] = types.ModuleType(module)
            setattr(placed[module], name, stand_in(module, name))
            sys.modules[module] = placed[module]
    try:
        return importlib.import_module("typer.rich_utils")
    finally:
        for module, placeholder in placed.items():
            if sys.modules.get(module) is placeholder:
                del sys.modules[module]
