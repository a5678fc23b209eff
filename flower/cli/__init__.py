"""The `flower` command line: a thin typer layer over the library.

Pieces public for other front ends (flowerbox re-uses them): `Render`, which turns Events
into terminal lines; `setup`, the typer command that writes the credentials; `write_report`,
which draws a Timeline as the report's page, SVG and PNG (with its options `SvgOut` and
`PngOut`); the `--json` contract (`contract`: documents, the error shape, the schema);
`table_console`, where tables go (never cut off a terminal); `AskRouter` with `HELP_OPTIONS`,
the root group whose first word may be the ask (and `GLOBAL_OPTIONS`, the root's options it
lets stand anywhere); `LangOption`, the root's --lang (it sets
$FLOWER_LANG for everything the command starts); `positive_usd`, the check of a budget
option; and `check_args` / `options_help`, flower's command line checked and described for a
program that runs flower elsewhere.

They are imported here, not on first use: a lazy `setup` would be shadowed by its own
submodule `flower.cli.setup` as soon as anything imported that. It costs `flower --help`
nothing (the app imports every command anyway), and neither imports the SDK.
"""

from flower.cli import contract
from flower.cli.options import LangOption, PngOut, SvgOut, positive_usd
from flower.cli.passthrough import check_args, options_help
from flower.cli.render import Render
from flower.cli.report import write_report
from flower.cli.routing import GLOBAL_OPTIONS, HELP_OPTIONS, AskRouter
from flower.cli.setup import setup
from flower.cli.tables import table_console

__all__ = [
    "GLOBAL_OPTIONS",
    "HELP_OPTIONS",
    "AskRouter",
    "LangOption",
    "PngOut",
    "Render",
    "SvgOut",
    "check_args",
    "contract",
    "options_help",
    "positive_usd",
    "setup",
    "table_console",
    "write_report",
]
