"""`flower answer ID "text"` and `flower send "text"`: a human's words for a run, from any
terminal. Each drops one file in the run directory's inbox (flower.core.inbox), which the
run's HumanChannel watches; nothing else is touched. An answer must name a question the run
is waiting on (asks.json), so a typo is caught here rather than moved aside later.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from flower.cli.exits import exit_codes
from flower.cli.options import RunDirOption
from flower.core import lang
from flower.core.inbox import drop_answer, drop_message, pending_asks
from flower.core.rundir import RunDir
from flower.errors import RunDirError, UsageError

OUT = Console(highlight=False, soft_wrap=True)


def answer(
    ask_id: Annotated[str, typer.Argument(help="The question's id, as `flower status` shows.")],
    text: Annotated[str, typer.Argument(help="Your answer.")],
    run_dir: RunDirOption = Path("runs"),
) -> None:
    """Answer a question a run is waiting on."""
    with exit_codes():
        waiting = [str(ask.get("id")) for ask in pending_asks(run_dir)]
        if ask_id not in waiting:
            known = (
                lang.text("error.waiting_ones", ids=", ".join(waiting))
                if waiting
                else lang.text("error.none_waiting")
            )
            raise UsageError(
                lang.text("error.no_such_question", id=ask_id, run_dir=run_dir, known=known)
            )
        path = drop_answer(run_dir, ask_id, text)
    OUT.print(lang.text("say.answered", ask=escape(ask_id), path=escape(str(path))))


def send(
    text: Annotated[str, typer.Argument(help="What to tell the agents.")],
    run_dir: RunDirOption = Path("runs"),
) -> None:
    """Tell a run something it did not ask for; it reaches the agent at its next turn."""
    with exit_codes():
        if not RunDir(run_dir).holds_a_run():
            raise RunDirError(run_dir, lang.text("error.no_run_here", run_dir=run_dir))
        path = drop_message(run_dir, text)
    OUT.print(lang.text("say.sent", path=escape(str(path))))
