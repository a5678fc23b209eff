"""Exit codes CI can use, and the one place that maps failures to them.

A FlowerError (flower.errors) is flower refusing something and saying why: its message and
exit 2. Anything else is a bug, in flower or in the user's workflow, and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum

import typer
from rich.console import Console
from rich.markup import escape

from flower.cli.contract import emit, refusal
from flower.core import lang
from flower.errors import FlowerError

# Messages are never hard-wrapped: they end up in CI logs and get grepped.
STDERR = Console(stderr=True, highlight=False, soft_wrap=True)


class Exit(IntEnum):
    """What a flower command's exit status means."""

    OK = 0  # the goal was achieved / the step succeeded
    FAILED = 1  # the step failed or the goal was not achieved
    USAGE = 2  # bad arguments, bad paths, missing credentials: a FlowerError
    NEEDS_HUMAN = 3  # stopped waiting for a human (unreachable goal, nobody answered)
    INTERRUPTED = 130  # stopped by the user (Ctrl+C twice)


@contextmanager
def exit_codes(json_command: str | None = None) -> Iterator[None]:
    """Turn a FlowerError into its message on stderr and exit 2, Ctrl+C into exit 130.
    With `json_command` (the command runs with --json) the refusal is also one JSON
    document on stdout, so a script reading stdout always gets one (flower.cli.contract)."""
    try:
        yield
    except FlowerError as exc:
        STDERR.print(f"[bold red]{lang.text('error.label')}[/] {escape(str(exc))}")
        if json_command is not None:
            emit(refusal(json_command, exc, Exit.USAGE))
        raise typer.Exit(Exit.USAGE) from exc
    except KeyboardInterrupt as exc:
        STDERR.print(f"[yellow]{lang.text('cli.stopped_at_prompt')}[/]")
        raise typer.Exit(Exit.INTERRUPTED) from exc
    except typer.Abort as exc:  # a prompt's Ctrl+C (click turns it into Abort, exit 1)
        if not isinstance(exc.__context__, KeyboardInterrupt):
            raise
        STDERR.print(f"\n[yellow]{lang.text('cli.stopped_at_prompt')}[/]")
        raise typer.Exit(Exit.INTERRUPTED) from exc
