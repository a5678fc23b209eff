"""The `flowerbox` command line: flower in a hardened container."""

from __future__ import annotations

from typing import Annotated

import typer

from flowerbox import __version__

app = typer.Typer(
    name="flowerbox",
    help='Run flower unattended in a hardened container: flowerbox "what you want done"',
    no_args_is_help=True,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"flowerbox {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    """flowerbox runs flower in a container whose only way out is its gateway."""


def main() -> None:
    """Console-script entry point."""
    app()
