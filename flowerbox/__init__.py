"""flowerbox: run flower unattended in a hardened container, credentials kept outside it.

    from flowerbox import BoxOptions, launch
    code = launch(["go", "fix the flaky test"], BoxOptions(workspace=Path("proj"), budget_usd=5))

`launch` is what `flowerbox "ask"` runs (flowerbox.runs.launch); `FlowerboxError` is the base
of what it raises (flowerbox.errors). The names load on first use (PEP 562): the agent's and
the gateway's containers import this package too, and must not pay for the host side.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flower import __version__

_HOMES = {
    "flowerbox.box.options": ("BoxOptions",),
    "flowerbox.errors": ("FlowerboxError",),
    "flowerbox.runs.launch": ("launch",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = ["BoxOptions", "FlowerboxError", "__version__", "launch"]

if TYPE_CHECKING:  # what type checkers and IDEs see
    from flowerbox.box.options import BoxOptions
    from flowerbox.errors import FlowerboxError
    from flowerbox.runs.launch import launch


def __getattr__(name: str) -> Any:
    if name not in _HOME_OF:
        raise AttributeError(f"module 'flowerbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME_OF[name]), name)
    globals()[name] = value
    return value
