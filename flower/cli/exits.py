"""Exit codes CI can use, and the one place that maps failures to them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum

import typer
from rich.console import Console
from rich.markup import escape

# Messages are never hard-wrapped: they end up in CI logs and get grepped.
STDERR = Console(stderr=True, highlight=False, soft_wrap=True)


class Exit(IntEnum):
    """What a flower command's exit status means."""

    OK = 0  # the goal was achieved / the step succeeded
    FAILED = 1  # the step failed or the goal was not achieved
    USAGE = 2  # bad arguments, bad paths, missing credentials
    NEEDS_HUMAN = 3  # stopped waiting for a human (unreachable goal, nobody answered)
    INTERRUPTED = 130  # stopped by the user (Ctrl+C twice)


@contextmanager
def exit_codes() -> Iterator[None]:
    """Turn the errors a command can meet into a message on stderr and the matching code."""
    try:
        yield
    except (ValueError, RuntimeError, OSError) as exc:
        STDERR.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(Exit.USAGE) from exc
    except KeyboardInterrupt as exc:
        STDERR.print("[yellow]interrupted[/]")
        raise typer.Exit(Exit.INTERRUPTED) from exc
