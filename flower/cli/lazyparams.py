"""A command's parameters made from its function when first read (issue 31).

typer builds a command's parameters when it builds the command: it reads the function's
signature and type hints and makes an option of each, twice over (once for the options,
once for the callback that calls the function). A group's help page lists its commands by
name and help text only, yet `flowerbox --help` paid for all 25 commands' parameters (~13 ms
of CPU, a tenth of its start) and `flowerbox ps` for the nine other commands of its module.
`defer_params` has typer build each command as it does, from a stand-in function that
has the real one's name, docstring and module but no parameters; the command's `params` and
`callback` are made from the real function the first time anything reads either (a
command's own help, a parse, an invocation, `--lang zh` translating its options), by
typer's own code. A group is built as before (its callback's options are its own).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import typer.main
from typer import _click  # typer >= 0.26 vendors click; a command speaks these types
from typer.core import TyperCommand

_BUILD = typer.main.get_command_from_info
_PENDING = "_flower_pending_params"  # on a command: (its function, pretty_exceptions_short)
_ON_MADE = "_flower_on_made"  # on a command: what to do with its parameters once made


class DeferredParams:
    """Mixed into a command class: `params` and `callback` made on first read, or set."""

    @property
    def params(self) -> list[_click.Parameter]:
        self._make_params()
        return self.__dict__["_params"]  # type: ignore[no-any-return]

    @params.setter
    def params(self, value: list[_click.Parameter]) -> None:
        self._make_params()
        self.__dict__["_params"] = value

    @property
    def callback(self) -> Callable[..., Any] | None:
        self._make_params()
        return self.__dict__["_callback"]  # type: ignore[no-any-return]

    @callback.setter
    def callback(self, value: Callable[..., Any] | None) -> None:
        self._make_params()
        self.__dict__["_callback"] = value

    def _make_params(self) -> None:
        """typer's own parameters and callback of the real function (once)."""
        pending = self.__dict__.pop(_PENDING, None)
        if pending is None:
            return
        function, pretty_exceptions_short = pending
        params, context_param_name = typer.main._get_params_name_from_function(function)
        self.__dict__["_params"] = params
        self.__dict__["_callback"] = typer.main.get_callback(
            callback=function,
            params=params,
            context_param_name=context_param_name,
            pretty_exceptions_short=pretty_exceptions_short,
        )
        if (then := self.__dict__.pop(_ON_MADE, None)) is not None:
            then(params)


def when_made(command: _click.Command, then: Callable[[list[_click.Parameter]], None]) -> None:
    """`then(params)` on `command`'s parameters: now if they are made, else once they are
    (the last `then` given wins): `--lang zh` translates a help page's commands without
    making their parameters."""
    if _PENDING in command.__dict__:
        command.__dict__[_ON_MADE] = then
    else:
        then(command.params)


@functools.cache
def deferring(cls: type[_click.Command]) -> type[_click.Command]:
    """`cls` whose parameters are made on first read (one class per command class)."""
    return type(cls.__name__, (DeferredParams, cls), {"__module__": cls.__module__})


def stand_in(function: Callable[..., Any]) -> Callable[..., Any]:
    """A function without parameters that typer names and describes as `function`."""

    def without_parameters() -> None:
        raise AssertionError("a stand-in is never called")  # the real callback replaces it

    for name in ("__name__", "__qualname__", "__module__", "__doc__"):
        setattr(without_parameters, name, getattr(function, name))
    return without_parameters


def get_command_from_info(command_info: Any, **settings: Any) -> _click.Command:
    """typer's command of `command_info`, its parameters made on first read."""
    function = command_info.callback
    if function is None:
        return _BUILD(command_info, **settings)
    shell = copy.copy(command_info)
    shell.callback = stand_in(function)
    shell.cls = deferring(command_info.cls or TyperCommand)
    command = _BUILD(shell, **settings)
    command.__dict__[_PENDING] = (function, settings["pretty_exceptions_short"])
    return command


def defer_params() -> None:
    """Have typer build every command from here on with its parameters deferred
    (idempotent)."""
    typer.main.get_command_from_info = get_command_from_info
