"""The `flowerbox` command line: flower in a hardened container.

    flowerbox "ask" [flower options]     the go path, in the box (isolation on by default)
    flowerbox once "prompt"              one step, in the box
    flowerbox run FILE.py                your own Workflow (a file in the workspace), in the box
    flowerbox shell [-- COMMAND...]      a shell (or COMMAND) in the agent's container
    flowerbox build                      build the image from this checkout's Dockerfile
    flowerbox ... --detach               go/once/run in the background: prints the run id
    flowerbox ps | logs | attach | stop | resume | answer | send    (flowerbox.cli.runs)
    flowerbox doctor | selftest          (flowerbox.cli.checks)
    flowerbox ... --on kube              the run commands on Kubernetes (flowerbox.cli.kube);
                                         --on may stand before the command too
    flowerbox kube render | apply-broker the manifests a run (or the broker) applies
    flowerbox setup                      save and check your key (as `flower setup`)
    flowerbox broker                     one credential broker for every run here (flowerbox.broker)

Each command group is a small Typer of its own (box, runs, checks), combined here; a group's
module is imported when one of its commands runs (COMMANDS). Nothing
imports this package: the library under it is flowerbox.runs.launch and friends. The one place
a FlowerboxError becomes a message and exit 2 is FlowerboxGroup; any other exception is a bug
and keeps its traceback.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Annotated, Any

import typer
import typer.main
from rich.console import Console
from rich.markup import escape

from flower import FlowerError, cli_version, text
from flower.cli import (
    GLOBAL_OPTIONS,
    HELP_OPTIONS,
    AskRouter,
    LangOption,
    LazyCommands,
    Loader,
    contract,
    setup,
)
from flowerbox import __version__
from flowerbox.errors import FlowerboxError

STDERR = Console(stderr=True, highlight=False, soft_wrap=True)
COMMANDS = {
    "box": ("go", "once", "run", "shell", "demo", "build"),
    "runs": ("ps", "logs", "report", "attach", "stop", "resume", "answer", "send", "deliver", "rm"),
    "checks": ("doctor", "selftest"),
    "broker": ("broker",),
    "kube": ("kube",),
}
"""Each module of flowerbox.cli with a command group (its `app`), and the commands it holds,
in --help's order: a command imports its own module only (flower.cli.LazyCommands)."""


def commands_of(module: str) -> Loader:
    """The loader of flowerbox.cli.`module`'s commands: its app's own, or the app itself when
    it is a named group (`kube`)."""

    def load() -> Mapping[str, Any]:
        group = typer.main.get_group(importlib.import_module(f"flowerbox.cli.{module}").app)
        return {group.name: group} if group.name else group.commands

    return load


class FlowerboxGroup(contract.JsonRefusals, AskRouter):
    """Every command runs under this: a FlowerboxError is what the user can fix, so it is
    said on stderr (its message says how) and the exit code is 2. So is a FlowerError: the
    host side reads flower's .env files and state files through flower, whose refusals (a
    bad .env, a corrupt record) are the user's to fix too. With --json, the refusal is
    also one error document on stdout (flower.cli.contract). A first argument that names no
    command is the ask of `go`, as with flower (the help words and look-alikes included)."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        loaders = {module: commands_of(module) for module in COMMANDS}
        pending = {name: loaders[module] for module, names in COMMANDS.items() for name in names}
        self.commands = LazyCommands(self.commands, pending)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, on_behind(args))

    def invoke(self, ctx: Any) -> Any:  # typer's own (vendored) click.Context
        try:
            return super().invoke(ctx)
        except (FlowerboxError, FlowerError) as exc:
            STDERR.print(f"[bold red]{text('error.label')}[/] {escape(str(exc))}")
            if self.json_mode:
                command = f"flowerbox {ctx.invoked_subcommand or 'go'}"
                contract.emit(contract.refusal(command, exc, 2))
            raise typer.Exit(2) from exc


def on_behind(args: list[str]) -> list[str]:
    """`--on PLACE` typed before the command (`flowerbox --on kube "ask" --repo URL`,
    `flowerbox --on kube ps`) moved behind it, where the command reads it (before a `--`)."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        if args[i] == "--on" and i + 1 < len(args):
            on, rest = args[i : i + 2], args[:i] + args[i + 2 :]
        elif args[i].startswith("--on="):
            on, rest = args[i : i + 1], args[:i] + args[i + 1 :]
        else:
            i += 2 if args[i] in GLOBAL_OPTIONS else 1
            continue
        cut = rest.index("--") if "--" in rest else len(rest)
        return [*rest[:cut], *on, *rest[cut:]]
    return args


app = typer.Typer(
    name="flowerbox",
    cls=FlowerboxGroup,
    help='Run flower unattended in a hardened container: flowerbox "what you want done"',
    context_settings={"help_option_names": HELP_OPTIONS},
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
    lang: LangOption = None,
) -> None:
    """flowerbox runs flower in a container whose only way out is its gateway."""


# The same command as `flower setup`: flowerbox finds credentials by flower's own lookup, so
# the file it writes is where a box's gateway gets its key from.
app.command(
    help="Save your key to the global .env (0600) that flower and flowerbox read, and check "
    "it: 0 if it works, 2 if not. Inside a box only the gateway ever holds it."
)(setup)


@app.command()
def version() -> None:
    """Print the versions that matter for a run: flowerbox, the SDK and its Claude Code CLI."""
    # lazy: package metadata is a slow import (email parsing), and only this command reads it
    from importlib.metadata import version as installed

    typer.echo(f"flowerbox {__version__}")
    typer.echo(f"claude-agent-sdk {installed('claude-agent-sdk')}")
    typer.echo(f"claude code {cli_version()}")
