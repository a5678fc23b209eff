"""The `flower` command line: a thin typer layer over the library.

Pieces public for other front ends (flowerbox re-uses them): `Render`, which turns Events
into terminal lines; `setup`, the typer command that writes the credentials; `write_report`,
which draws a Timeline as the report's page, SVG and PNG (with its options `SvgOut` and
`PngOut`); the `--json` contract (`contract`: documents, the error shape, the schema);
`table_console`, where tables go (never cut off a terminal); `AskRouter` with `HELP_OPTIONS`,
the root group whose first word may be the ask (and `GLOBAL_OPTIONS`, the root's options it
lets stand anywhere); `LangOption`, the root's --lang (it sets
$FLOWER_LANG for everything the command starts); `positive_usd`, the check of a budget
option; `LazyCommands` (with its `Loader`), a group's commands built on first use, and
`defer_params`, which has typer make each command's parameters when first read; and
`check_args` / `options_help`, flower's command line checked and described for a
program that runs flower elsewhere.

The names load on first use (PEP 562), so a flowerbox command pays only for the pieces it
uses (`flowerbox ps` draws no report, issue 31). `setup` is the exception, imported here: a
lazy `setup` would be shadowed by its own submodule `flower.cli.setup` as soon as anything
imported that. Neither imports the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flower.cli.setup import setup
from flower.exports import lazy_exports

_HOMES = {
    "flower.cli.lazy": ("LazyCommands", "Loader"),
    "flower.cli.lazyparams": ("defer_params",),
    "flower.cli.options": ("LangOption", "PngOut", "SvgOut", "positive_usd"),
    "flower.cli.passthrough": ("check_args", "options_help"),
    "flower.cli.render": ("Render",),
    "flower.cli.report": ("write_report",),
    "flower.cli.routing": ("GLOBAL_OPTIONS", "HELP_OPTIONS", "AskRouter"),
    "flower.cli.tables": ("table_console",),
}
__all__ = [
    "GLOBAL_OPTIONS",
    "HELP_OPTIONS",
    "AskRouter",
    "LangOption",
    "LazyCommands",
    "Loader",
    "PngOut",
    "Render",
    "SvgOut",
    "check_args",
    "contract",
    "defer_params",
    "options_help",
    "positive_usd",
    "setup",
    "table_console",
    "write_report",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)


if TYPE_CHECKING:  # what type checkers and IDEs see
    from flower.cli import contract
    from flower.cli.lazy import LazyCommands, Loader
    from flower.cli.lazyparams import defer_params
    from flower.cli.options import LangOption, PngOut, SvgOut, positive_usd
    from flower.cli.passthrough import check_args, options_help
    from flower.cli.render import Render
    from flower.cli.report import write_report
    from flower.cli.routing import GLOBAL_OPTIONS, HELP_OPTIONS, AskRouter
    from flower.cli.tables import table_console
