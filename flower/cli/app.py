"""The typer application behind the `flower` console script.

`flower "ask"` is the go path; every other first word names a command. A first argument
that is not a command is routed to `go`, so the ask needs no subcommand in front of it, and
`help`, `-h` or nothing at all shows the help (flower.cli.routing).
"""

from pathlib import Path
from typing import Annotated

import typer
from typer import _click  # typer >= 0.26 vendors click; its group speaks these types

from flower import __version__
from flower.cli.analyze import analyze
from flower.cli.answer import answer, send
from flower.cli.contract import JsonRefusals
from flower.cli.demo import demo
from flower.cli.go import go
from flower.cli.once import once
from flower.cli.options import LangOption
from flower.cli.report import report
from flower.cli.resume import resume
from flower.cli.routing import HELP_OPTIONS, AskRouter
from flower.cli.run import run
from flower.cli.setup import setup
from flower.cli.status import status
from flower.core.workspace import BRIEF_NAME, workbench_location

GO = "go"
UNFINISHED_HINT = "This folder holds an unfinished run: `flower resume` continues it."


class AskFirst(JsonRefusals, AskRouter):
    """Routes `flower "some ask" ...` to the go command."""

    ask_command = GO

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        """The help, and below it how to continue when this folder holds an unfinished run
        (bare `flower` prints this)."""
        super().format_help(ctx, formatter)
        if not unfinished_here(Path.cwd()):
            return
        if formatter.getvalue():  # click's plain help: it prints the formatter afterwards
            formatter.write_paragraph()
            formatter.write_text(UNFINISHED_HINT)
        else:  # typer's rich help has printed itself already
            typer.echo(f"\n{UNFINISHED_HINT}")


def unfinished_here(workspace: Path) -> bool:
    """A run's brief is frozen in this folder's workbench (or beside it, isolated), so a
    run can be resumed here. Cheap unless a brief is there: `flower --help` stays fast."""
    briefs = [
        workbench_location(workspace.resolve(), isolate=isolate) / "notes" / BRIEF_NAME
        for isolate in (False, True)
    ]
    if not any(brief.is_file() for brief in briefs):
        return False
    # lazy: the document parser is only worth loading when a brief is there
    from flower.core.brief import Brief

    return any((found := Brief.load(brief)) is not None and found.complete() for brief in briefs)


app = typer.Typer(
    name="flower",
    cls=AskFirst,
    help='Run long-horizon work with Claude Code. Start with: flower "what you want done"',
    add_completion=True,
    context_settings={"help_option_names": HELP_OPTIONS},
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
    lang: LangOption = None,
) -> None:
    """flower runs Claude Code sessions as steps of a workflow."""


app.command(name=GO)(go)
app.command(no_args_is_help=True)(once)
app.command(no_args_is_help=True)(run)
app.command()(resume)
app.command()(demo)
app.command()(setup)
app.command()(status)
app.command()(report)
app.command(no_args_is_help=True)(analyze)
app.command(no_args_is_help=True)(answer)
app.command(no_args_is_help=True)(send)


def main() -> None:
    """Console-script entry point."""
    app()
