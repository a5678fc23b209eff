"""The `flower` command line: a thin typer layer over the library.

Pieces public for other front ends (flowerbox re-uses them): `Render`, which turns Events
into terminal lines; `setup`, the typer command that writes the credentials; and
`AskRouter` with `HELP_OPTIONS`, the root group whose first word may be the ask;
`positive_usd`, the check of a budget option; and `check_args` / `options_help`, flower's
command line checked and described for a program that runs flower elsewhere.

They are imported here, not on first use: a lazy `setup` would be shadowed by its own
submodule `flower.cli.setup` as soon as anything imported that. It costs `flower --help`
nothing (the app imports every command anyway), and neither imports the SDK.
"""

from flower.cli.options import positive_usd
from flower.cli.passthrough import check_args, options_help
from flower.cli.render import Render
from flower.cli.routing import HELP_OPTIONS, AskRouter
from flower.cli.setup import setup

__all__ = [
    "HELP_OPTIONS",
    "AskRouter",
    "Render",
    "check_args",
    "options_help",
    "positive_usd",
    "setup",
]
