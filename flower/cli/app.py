"""The typer application behind the `flower` console script.

`flower "ask"` is the go path; every other first word names a command. A first argument
that is not a command is routed to `go`, so the ask needs no subcommand in front of it.
"""

from typing import Annotated

import typer
from typer import _click  # typer >= 0.26 vendors click; its group speaks these types
from typer.core import TyperGroup

from flower import __version__
from flower.cli.analyze import analyze
from flower.cli.answer import answer, send
from flower.cli.demo import demo
from flower.cli.go import go
from flower.cli.once import once
from flower.cli.run import run
from flower.cli.setup import setup
from flower.cli.status import status

GO = "go"


class AskFirst(TyperGroup):
    """Routes `flower "some ask" ...` to the go command."""

    def resolve_command(
        self, ctx: _click.Context, args: list[str]
    ) -> tuple[str | None, _click.Command | None, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = [GO, *args]
        return super().resolve_command(ctx, args)


app = typer.Typer(
    name="flower",
    cls=AskFirst,
    help='Run long-horizon work with Claude Code. Start with: flower "what you want done"',
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


app.command(name=GO)(go)
app.command(no_args_is_help=True)(once)
app.command(no_args_is_help=True)(run)
app.command()(demo)
app.command()(setup)
app.command()(status)
app.command(no_args_is_help=True)(analyze)
app.command(no_args_is_help=True)(answer)
app.command(no_args_is_help=True)(send)


def main() -> None:
    """Console-script entry point."""
    app()
