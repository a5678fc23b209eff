"""`flower once "prompt"`: one step with a plain agent, no interactivity."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from flower.cli.exits import STDERR, Exit, exit_codes
from flower.cli.go import finish
from flower.cli.options import (
    Events,
    JsonOut,
    Model,
    OfflineWait,
    Retries,
    RunDirOption,
    RunWorkbench,
    StepBudget,
    Verbose,
    Workspace,
    resilience,
    workspace_folder,
)
from flower.cli.render import Render
from flower.core.env import describe, load_dotenv, require_credentials
from flower.core.lang import text
from flower.core.rundir import RunDir
from flower.core.runlock import holding_the_run
from flower.errors import UsageError

ONCE_INSTRUCTIONS = "Do the task you are given, then reply with a short summary of what you did."


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
    workbench: RunWorkbench = False,
    retries: Retries = None,
    offline_wait: OfflineWait = None,
    verbose: Verbose = False,
    events: Events = None,
    json_out: JsonOut = False,
) -> None:
    """Run one step and exit: 0 if it succeeded, 1 if it failed, 2 on bad input."""
    # lazy: these load the SDK, which `flower --help` must not pay for
    from flower.cli.eventlog import EventLog, tee
    from flower.cli.traces import send_trace, traces_checked
    from flower.core.agent import AgentSpec
    from flower.core.runtime import Runtime, usable_run_dir

    console = Console(stderr=json_out, highlight=False, soft_wrap=True)
    with exit_codes("flower once" if json_out else None), contextlib.ExitStack() as held:
        if not prompt.strip():
            raise UsageError(text("error.no_prompt"))
        if verbose:
            load_dotenv()
            console.print(describe(), style="dim")
        # Credentials first, before anything (the workbench too) is created; then the run
        # lock, before Runtime opens the run directory's files a live run is writing.
        ws = workspace_folder(workspace)
        require_credentials()
        run_dir = usable_run_dir(run_dir)
        held.enter_context(holding_the_run(run_dir, ["flower", "once", prompt]))
        runtime = Runtime(
            workspace=ws,
            run_dir=run_dir,
            workbench=workbench,
            resilience=resilience(retries, offline_wait),
        )
        spec = AgentSpec(
            "once",
            ONCE_INSTRUCTIONS,
            allowed_tools=allow or ["Read", "Write", "Edit", "Bash"],
            model=model,
            max_budget_usd=budget,
            permission_mode="acceptEdits",
        )
        traced = traces_checked()  # a UsageError before anything is spent
        log = EventLog(events or RunDir(runtime.run_dir).events(runtime.run_id))
        on_event = tee(Render(console, verbose=verbose, spent=runtime.spent), log)
        import asyncio  # lazy: as in flower.cli.go

        try:
            result = asyncio.run(runtime.run(spec, prompt, on_event=on_event))
        finally:
            runtime.close()
            log.close()
            if traced:
                send_trace(console, run_dir=runtime.run_dir, run_id=runtime.run_id, events=log.path)
    if not result.ok:
        STDERR.print(f"[bold red]{text('say.step_failed')}[/] {escape(str(result.error))}")
    code, status = (Exit.OK, "done") if result.ok else (Exit.FAILED, "failed")
    finish(console, runtime, "flower once", status, code, as_json=json_out)
