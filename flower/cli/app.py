"""The typer application behind the `flower` console script."""

from typing import Annotated

import typer

from flower import __version__
from flower.cli.once import once

app = typer.Typer(
    name="flower",
    help="Run long-horizon work with Claude Code: steps that retry, resume and hand off.",
    no_args_is_help=True,
    add_completion=True,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"flower {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """flower runs Claude Code sessions as steps of a workflow."""


app.command(no_args_is_help=True)(once)


def main() -> None:
    """Console-script entry point."""
    app()
