"""A package's `__init__` run only for the names it is asked for: mcp's, in flower's process.

    defer_mcp()        # before anything imports claude_agent_sdk (flower's command line does it)

claude-agent-sdk imports `mcp.types` and `mcp.server.Server`: the types of the tools it serves
in-process and the low-level server that serves them. But `mcp`'s package `__init__` imports
mcp's whole client (httpx, its sessions) and `mcp.server`'s its high-level server, which the
SDK never uses: 7 MiB of a box's flower process (one per run: bench.many --cli) and 0.9 s of
its start on this machine. Deferred, such a package is registered without running its
`__init__`: its submodules import as usual (its `__path__` is set), and a name its `__init__`
binds with `from .sub import name` is taken from that submodule on first use, the very
object the `__init__` would have bound. Any other name (`__all__`, a `*` import) runs the
real `__init__` first, so nothing the package offers is missing, only later.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

DEFERRED = ("mcp", "mcp.server")  # parents first: mcp.server is found through mcp's __path__


def defer_mcp() -> None:
    """Defer the `__init__` of mcp and mcp.server (a no-op once they are imported)."""
    for name in DEFERRED:
        defer_package_init(name)


def defer_package_init(name: str) -> ModuleType | None:
    """Register package `name` with its `__init__` deferred (see the module's docstring);
    the module, or None when it is already imported, not installed, or not a package."""
    if name in sys.modules:
        return None
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return None
    if spec.origin is None:
        return None
    with open(spec.origin, encoding="utf-8") as handle:
        homes = _relative_imports(ast.parse(handle.read()), name)
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(attr: str) -> Any:  # noqa: N807 - a module's own (PEP 562)
        if attr in homes:
            submodule, real = homes[attr]
            value = getattr(importlib.import_module(submodule), real)
            setattr(module, attr, value)
            return value
        del module.__getattr__  # the real __init__ binds everything from now on
        loader.exec_module(module)
        return getattr(module, attr)

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:  # as the import system binds a submodule it imported on its package
        setattr(sys.modules[parent], child, module)
    return module


def _relative_imports(tree: ast.Module, package: str) -> dict[str, tuple[str, str]]:
    """`name -> (submodule, its name there)` for each `from .sub import name [as alias]` at
    the top level of a package's `__init__`."""
    homes: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                if alias.name != "*":
                    homes[alias.asname or alias.name] = (f"{package}.{node.module}", alias.name)
    return homes
