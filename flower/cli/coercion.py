"""typer's coercion of a parameter's value, without pydantic where it changes nothing (issue 31).

typer (0.29) coerces every parameter's value through a pydantic adapter it builds on first
use, and importing pydantic's adapters costs about 70 ms of CPU: `flowerbox ps` and `flower
status`, which are given nothing but their defaults, paid it for values it hands back as
they are. Two values are settled already: None (typer's coercion returns it, or `()`,
before it uses the adapter) and a parameter's own declared default, which typer's adapter
returns equal and of the same type (tests/cli/test_coercion.py checks that for every
parameter of both command lines). Those skip the adapter; any value a person typed, read
from the environment or computed still goes through typer's own coercion, unchanged.
"""

from __future__ import annotations

from typing import Any

from typer import _click  # typer >= 0.26 vendors click; a parameter speaks its types
from typer._coercion import RuntimeParam
from typer.core import _TyperParameter

_COERCE = _TyperParameter.process_value


class Settled(RuntimeParam):
    """The runtime coercion of a value that needs none: itself (None never gets here)."""

    def _coerce_value(self, value: Any, param: Any, ctx: _click.Context) -> Any:
        return value


def settled(param: _TyperParameter, value: Any) -> bool:
    """`value` is one typer's adapter would hand back unchanged: None, or the parameter's
    own declared default (the same object, not one equal to it)."""
    return value is None or value is param.default


def process_value(self: _TyperParameter, ctx: _click.Context, value: Any) -> Any:
    """typer's own processing of the value (its required check, its callback), with a
    coercion that builds no adapter when the value is settled."""
    if self._runtime_param is not None or not settled(self, value):
        return _COERCE(self, ctx, value)
    descriptor = self.type_descriptor
    self._runtime_param = Settled(descriptor.parameter_info, descriptor.annotation)
    try:
        return _COERCE(self, ctx, value)
    finally:
        self._runtime_param = None  # a later value of this parameter gets typer's own


def settle_defaults() -> None:
    """Make every typer parameter skip the adapter for a settled value (idempotent)."""
    _TyperParameter.process_value = process_value  # type: ignore[method-assign]
