"""A package's public names loaded on first use (PEP 562), so that importing the package
costs only what is used: `flower` (whose names pull in the SDK) and `flower.cli` (whose
names pull in typer and rich) both export this way (issue 31).

    _HOMES = {"flower.core.goal": ("Goal",), ...}
    __getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, Iterable[str]], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose names live in the modules of
    `homes` (module -> names); a name loaded once is kept in the package (later lookups skip
    `__getattr__`)."""
    where = {name: module for module, names in homes.items() for name in names}
    listed = list(public)

    def __getattr__(name: str) -> Any:  # noqa: N807 - the name PEP 562 looks for
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return list(listed)

    return __getattr__, __dir__
