"""A flower command line checked, and described, for a program that runs flower elsewhere.

flowerbox passes the options it does not know to `flower COMMAND` inside a box. Checked
only there, a typo (`--timout 0`) was reported after containers had started; `check_args`
parses the command line here, with flower's own parser and checks, and runs nothing.
`options_help` lists flower's options for the wrapper's own --help.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import typer.main
from typer import _click  # typer >= 0.26 vendors click; its commands speak these types
from typer.core import TyperGroup
from typer.exceptions import Exit

from flower.cli import helplang
from flower.core.lang import current, text
from flower.errors import UsageError


def check_args(command: str, args: Sequence[str], *, fixed: Collection[str] = ()) -> None:
    """Parse `flower COMMAND ARGS...` as flower would, without running it.

    Args:
        fixed: flower's parameter names (`run_dir`, `events`...) the caller sets itself;
            one given in `args` is refused rather than silently overridden.

    Raises:
        UsageError: what flower would refuse (an unknown option, a bad value), in its words.
    """
    found = _command(command)
    try:
        with found.make_context(f"flower {command}", list(args)) as ctx:
            given = [
                param.opts[0]
                for param in found.get_params(ctx)
                if param.name in fixed
                and ctx.get_parameter_source(param.name) is _click.core.ParameterSource.COMMANDLINE
            ]
    except Exit:
        return  # --help (after `--`): flower's help was printed, and it refuses nothing
    except _click.exceptions.ClickException as exc:
        said = (helplang.usage_error(exc) if current() == "zh" else exc).format_message()
        raise UsageError(text("cli.passthrough_refused", command=command, problem=said)) from exc
    if given:
        raise UsageError(text("cli.passthrough_fixed", options=", ".join(given), command=command))


def options_help(command: str, *, leave_out: Collection[str] = ()) -> str:
    """flower COMMAND's options (but those named in `leave_out`), one `--opt: help` line each
    in Markdown list form, for the wrapper's --help."""
    found = _command(command)
    ctx = _click.Context(found, info_name=f"flower {command}")
    lines = []
    for param in found.get_params(ctx):
        if param.param_type_name != "option" or param.name in leave_out or param.name == "help":
            continue
        if (record := param.get_help_record(ctx)) is None:
            continue
        names, text = record
        lines.append(f"* {names}: {text}")
    return "\n".join(lines)


def _command(name: str) -> _click.Command:
    # lazy: the app imports every command of flower's CLI, which this package's __init__
    # must not do at its own import (it would import itself through them)
    from flower.cli.app import app

    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    return group.commands[name]
