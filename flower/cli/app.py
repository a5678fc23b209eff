"""The typer application behind the `flower` console script.

`flower "ask"` is the go path; every other first word names a command. A first argument
that is not a command is routed to `go`, so the ask needs no subcommand in front of it, and
`help`, `-h` or nothing at all shows the help (flower.cli.routing).
"""

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.main
from typer import _click  # typer >= 0.26 vendors click; its group speaks these types

from flower import __version__
from flower.cli import collector
from flower.cli.contract import JsonRefusals
from flower.cli.lazy import LazyCommands, Loader
from flower.cli.options import LangOption
from flower.cli.routing import HELP_OPTIONS, AskRouter
from flower.core.lazyinit import defer_mcp
from flower.core.workspace import BRIEF_NAME, workbench_location

GO = "go"
UNFINISHED_HINT = "This folder holds an unfinished run: `flower resume` continues it."
COMMANDS = {
    GO: ("go", False),
    "once": ("once", True),
    "run": ("run", True),
    "resume": ("resume", False),
    "demo": ("demo", False),
    "setup": ("setup", False),
    "status": ("status", False),
    "report": ("report", False),
    "analyze": ("analyze", True),
    "answer": ("answer", True),
    "send": ("answer", True),
}
"""Each command (a function of its name), the module of flower.cli it lives in, and whether
no arguments show its help, in --help's order: a command imports its own module only."""


def command_of(name: str) -> Loader:
    """The loader of command `name`: its module imported, its function made a command."""
    module, no_args_is_help = COMMANDS[name]

    def load() -> Mapping[str, Any]:
        function = getattr(importlib.import_module(f"flower.cli.{module}"), name)
        one = typer.Typer()
        one.command(name=name, no_args_is_help=no_args_is_help)(function)
        return typer.main.get_group(one).commands

    return load


class AskFirst(JsonRefusals, AskRouter):
    """Routes `flower "some ask" ...` to the go command."""

    ask_command = GO

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.commands = LazyCommands(self.commands, {name: command_of(name) for name in COMMANDS})

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


def main() -> None:
    """Console-script entry point."""
    collector.pause()  # until the command is found (flower.cli.collector)
    defer_mcp()  # before any command imports the SDK: mcp's client and servers stay unloaded
    app()
