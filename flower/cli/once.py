"""`flower once "prompt"`: one step with a plain agent, no interactivity."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from flower.cli.exits import STDERR, Exit, exit_codes
from flower.cli.options import (
    Events,
    Model,
    OfflineWait,
    Retries,
    RunDirOption,
    StepBudget,
    Verbose,
    Workspace,
    resilience,
    workspace_folder,
)
from flower.cli.render import Render
from flower.core.env import describe, load_dotenv
from flower.core.runlock import holding_the_run
from flower.errors import UsageError

ONCE_INSTRUCTIONS = "Do the task you are given, then reply with a short summary of what you did."
NO_PROMPT = (
    'an empty prompt: say what the agent should do, e.g. flower once "add a test for parse()"'
)


def once(
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    workspace: Workspace = Path("."),
    run_dir: RunDirOption = Path("runs"),
    model: Model = None,
    budget: StepBudget = None,
    allow: Annotated[
        list[str] | None,
        typer.Option(
            help="Tools the agent may use without asking (repeatable).", show_default=False
        ),
    ] = None,
    retries: Retries = None,
    offline_wait: OfflineWait = None,
    verbose: Verbose = False,
    events: Events = None,
) -> None:
    """Run one step and exit: 0 if it succeeded, 1 if it failed, 2 on bad input."""
    # lazy: these load the SDK, which `flower --help` must not pay for
    from flower.cli.eventlog import EventLog, tee
    from flower.core.agent import AgentSpec
    from flower.core.runtime import Runtime

    console = Console(highlight=False, soft_wrap=True)
    with exit_codes(), contextlib.ExitStack() as held:
        if not prompt.strip():
            raise UsageError(NO_PROMPT)
        if verbose:
            load_dotenv()
            console.print(describe(), style="dim")
        ws = workspace_folder(workspace)
        policy = resilience(retries, offline_wait)
        runtime = Runtime(workspace=ws, run_dir=run_dir, resilience=policy)  # credentials first
        held.enter_context(holding_the_run(runtime.run_dir, ["flower", "once", prompt]))
        spec = AgentSpec(
            "once",
            ONCE_INSTRUCTIONS,
            allowed_tools=allow or ["Read", "Write", "Edit", "Bash"],
            model=model,
            max_budget_usd=budget,
            permission_mode="acceptEdits",
        )
        log = EventLog(events) if events is not None else None
        on_event = tee(Render(console, verbose=verbose), log)
        try:
            result = asyncio.run(runtime.run(spec, prompt, on_event=on_event))
        finally:
            runtime.close()
            if log is not None:
                log.close()
    if not result.ok:
        STDERR.print(f"[bold red]step failed:[/] {escape(str(result.error))}")
    raise typer.Exit(Exit.OK if result.ok else Exit.FAILED)
