"""Where tables are printed: a terminal's width on a terminal, and off one (CI logs, pipes,
`> file`) a width no row reaches, so no cell is cut to `$0.04…` for want of 80 columns."""

from __future__ import annotations

from rich.console import Console

WIDE = 1000  # columns off a terminal: rows are as long as their cells, never cut


def table_console(*, stderr: bool = False) -> Console:
    """A console for `status`, `analyze`, `ps` tables; never truncating off a terminal."""
    console = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=WIDE)
