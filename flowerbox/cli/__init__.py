"""The `flowerbox` command line: typer only, on top of the library. Nothing imports it.

`main` is the console script's entry: `flowerbox --version` alone is answered before typer,
rich and the commands load (a fifth of a second of imports, for one line); every other
command line goes to the typer app (flowerbox.cli.app), which prints the same line for
`--version` among other options.
"""

import gc
import sys

from flowerbox import __version__


def main() -> None:
    """Console-script entry point."""
    if sys.argv[1:] == ["--version"]:
        print(f"flowerbox {__version__}")
        return
    gc.disable()  # while the command line starts: on again once its command is found
    # (flower.cli.collector, which cannot be imported before flower.cli's own imports)
    # lazy: the typer app and its commands cost what `--version` alone does not need
    from flower.cli import defer_params
    from flowerbox.cli.app import app

    defer_params()  # before typer builds the root's own commands (setup, version) too
    app()
