"""`flower run FILE.py`: run your own Workflow, found as a module-level `workflow` or a
`build()` function returning one. Isolated workers' work is delivered as `flower go` does,
on the run's branch (the checkout untouched)."""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from flower.cli.exits import Exit, exit_codes
from flower.cli.go import answer_wait, deliver_work, drive, finish, outcome
from flower.cli.options import (
    AnswerTimeout,
    Events,
    JsonOut,
    OfflineWait,
    Retries,
    RunDirOption,
    RunWorkbench,
    Workspace,
    resilience,
    workspace_folder,
)
from flower.core.env import require_credentials
from flower.core.lang import text
from flower.core.runlock import holding_the_run
from flower.errors import UsageError


def run(
    file: Annotated[Path, typer.Argument(help="A Python file defining `workflow` or `build()`.")],
    workspace: Workspace = Path("."),
    run_dir: RunDirOption = Path("runs"),
    workbench: RunWorkbench = False,
    timeout: AnswerTimeout = None,
    retries: Retries = None,
    offline_wait: OfflineWait = None,
    events: Events = None,
    json_out: JsonOut = False,
) -> None:
    """Run a user's Workflow: 0 if every step passed, 1 if one failed, 3 if it stopped
    waiting for a human, 130 if stopped."""
    # lazy: loads the SDK (`flower --help`)
    from flower.core.runtime import Runtime, usable_run_dir

    console = Console(stderr=json_out, highlight=False, soft_wrap=True)
    with exit_codes("flower run" if json_out else None), contextlib.ExitStack() as held:
        ws = workspace_folder(workspace)
        require_credentials()  # before the file runs: its workflow may create folders
        flow = load_workflow(file)
        run_dir = usable_run_dir(run_dir)  # the lock before Runtime opens what a run writes
        held.enter_context(holding_the_run(run_dir, ["flower", "run", str(file)]))
        runtime = Runtime(
            workspace=ws,
            run_dir=run_dir,
            workbench=flow.workbench or workbench,
            resilience=resilience(retries, offline_wait),
        )
        timeout = answer_wait(timeout, say=lambda line: console.print(line, style="yellow"))
        import asyncio  # lazy: as in flower.cli.go

        try:
            ran, stopped = asyncio.run(
                drive(flow, runtime, console, unattended=timeout == 0, events=events)
            )
        finally:
            runtime.close()
    code, status = outcome(ran, stopped=stopped, clarify_only=False, goal=False)
    delivery = deliver_work(runtime, None, achieved=code == Exit.OK, console=console)
    finish(
        console, runtime, "flower run", status, code, state=ran, as_json=json_out, delivery=delivery
    )


def load_workflow(file: Path) -> Any:
    """The Workflow a file defines, or a UsageError that says what the file must define."""
    from flower.workflow import Workflow  # lazy: loads the SDK (`flower --help`)

    path = file.expanduser().resolve()
    if not path.is_file():
        raise UsageError(text("error.not_a_file", file=file))
    spec = importlib.util.spec_from_file_location(f"flower_user_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise UsageError(text("error.not_python", file=file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = getattr(module, "workflow", None)
    if found is None and callable(getattr(module, "build", None)):
        found = module.build()
    if not isinstance(found, Workflow):
        raise UsageError(text("error.no_workflow", file=file))
    return found
