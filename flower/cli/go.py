"""`flower "ask"`: the go path. Clarify, set the goal, work under the goal guard.

Exit codes (flower.cli.exits): 0 the goal was achieved (or, with --no-goal, the work step
succeeded; with --clarify-only, the brief is complete); 1 not achieved or a step failed;
2 bad input or missing credentials; 3 stopped waiting for a human (the judge says the goal
is unreachable and nobody answered); 130 stopped (Ctrl+C twice, SIGTERM, SIGHUP), resumable.

With --isolate the workers' work is delivered at the end (flower.core.delivery): the branch,
its commits and files and the command that applies it are the last lines (and the JSON
document's `delivery`). A first run in a git repository offers to keep runs/ (and an inner
workbench) out of `git status` through .git/info/exclude: asked on a terminal, done and said
otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer
from rich.console import Console

from flower.cli import contract
from flower.cli.exits import Exit, exit_codes
from flower.cli.options import (
    AnswerTimeout,
    Budget,
    Events,
    FinishOption,
    JsonOut,
    Model,
    OfflineWait,
    Retries,
    Rounds,
    RunDirOption,
    Verbose,
    Workspace,
    resilience,
    workspace_folder,
)
from flower.cli.render import Render
from flower.cli.report import report_command
from flower.core.env import describe, load_dotenv, require_credentials
from flower.core.inbox import ANSWER_COMMAND_ENV, answer_command
from flower.core.labels import display_name, parse_label
from flower.core.rundir import RunDir
from flower.core.runlock import holding_the_run

if TYPE_CHECKING:  # the real imports load the SDK: done late, so `flower --help` stays fast
    from flower.core.delivery import Delivery, Finish
    from flower.core.runtime import Runtime
    from flower.workflow.base import RunState, Workflow
from flower.core import lang
from flower.core.exclude import git_exclude, git_unexcluded
from flower.errors import UsageError

FINISH_VALUES = ("branch", "merge", "patch")
# The command a --json document names: `flower resume` runs this same path under its own name.
COMMAND: ContextVar[str] = ContextVar("flower_go_command", default="flower go")

ANSWER_WAIT = 1800.0  # seconds a question waits when someone can answer it
NO_TERMINAL = (
    "stdin is not a terminal, so the agents' questions are not waited for (--timeout 0); "
    "to answer them from another terminal with `flower answer`, pass --timeout SECONDS"
)
TYPE_ANSWER = "type your answer and press Enter"


def go(
    ask: Annotated[str, typer.Argument(help="What you want done, in one line.")] = "",
    workspace: Workspace = Path("."),
    run_dir: RunDirOption = Path("runs"),
    new: Annotated[
        bool, typer.Option("--new", help="Start over: archive the brief and goal, wake nothing.")
    ] = False,
    # --continue is what flowerbox resume passes; the ask-history rule makes it a plain ask
    wake: Annotated[
        bool,
        typer.Option(
            "--continue",
            help="Continue the run in this workspace (what `flowerbox resume` runs): an ask "
            "it was already given adds nothing; else start with the ask.",
        ),
    ] = False,
    isolate: Annotated[
        bool,
        typer.Option("--isolate/--no-isolate", help="Workers in their own git worktrees."),
    ] = False,
    clarify_only: Annotated[
        bool, typer.Option("--clarify-only", help="Stop once the brief is frozen.")
    ] = False,
    no_goal: Annotated[
        bool, typer.Option("--no-goal", help="No goal and no judge: just do the work.")
    ] = False,
    rounds: Rounds = 3,
    judge_can_run: Annotated[
        bool, typer.Option("--judge-can-run", help="Let the judge run commands (Bash).")
    ] = False,
    max_asks: Annotated[
        int | None, typer.Option(help="Questions the agents may ask you (0 = none).", min=0)
    ] = None,
    timeout: AnswerTimeout = None,
    no_trim: Annotated[
        bool, typer.Option("--no-trim", help="Do not spill old big tool results on resume.")
    ] = False,
    model: Model = None,
    budget: Budget = None,
    retries: Retries = None,
    offline_wait: OfflineWait = None,
    verbose: Verbose = False,
    events: Events = None,
    json_out: JsonOut = False,
    finish_as: FinishOption = None,
) -> None:
    """Clarify the ask, freeze a goal, and work on it until a judge says it is achieved."""
    console = Console(stderr=json_out, highlight=False, soft_wrap=True)
    command = COMMAND.get()
    with exit_codes(command if json_out else None), contextlib.ExitStack() as held:
        if model:
            os.environ["ANTHROPIC_MODEL"] = model
        load_dotenv()
        if verbose:
            console.print(describe(), style="dim")
        ws = workspace_folder(workspace)
        require_credentials()  # before anything is created here
        _check_finish(finish_as, isolate=isolate)
        note_ask(run_dir, ask)  # before the SDK loads (seconds), in which a kill may come
        # lazy: Runtime and the starter load the SDK, which `flower --help` must not pay for
        from flower.core.runtime import Runtime, usable_run_dir
        from flower.workflow.starter import repeated_ask, starter_flow, wake_state

        run_dir = usable_run_dir(run_dir)
        first = not RunDir(run_dir).holds_a_run()
        state = wake_state(ws, run_dir=run_dir, isolate=isolate)  # reads, writes nothing
        stopped = not ask.strip() and not new and not state["woke"] and state["stopped_ask"]
        if stopped:  # stopped before its brief was frozen: it goes on with its own ask
            ask = state["stopped_ask"]
        if not ask.strip() and (new or not state["woke"]):
            raise UsageError(lang.text("error.no_ask"))  # before the lock or the workbench is made
        held.enter_context(holding_the_run(run_dir, ["flower", "go", ask]))
        if first:
            asks = sys.stdin.isatty() and timeout != 0
            _offer_exclude(ws, [run_dir, Path(state["workbench"])], console, asks=asks)
        repeated = bool(ask.strip()) and repeated_ask(RunDir(run_dir).ask_history, ask)
        said = _describe_wake(state, new=new, ask=ask, repeated=repeated, stopped=bool(stopped))
        console.print(said, style="bold")
        timeout = answer_wait(timeout, say=lambda line: console.print(line, style="yellow"))
        flow = starter_flow(
            ask,
            workspace=ws,
            run_dir=run_dir,
            new=new,
            isolate=isolate,
            clarify_only=clarify_only,
            goal=not no_goal,
            rounds=rounds,
            judge_can_run=judge_can_run,
            max_asks=max_asks,
            timeout_s=timeout,
        )
        runtime = Runtime(
            workspace=ws,
            run_dir=run_dir,
            trim=not no_trim,
            workbench=flow.workbench or False,
            budget_usd=budget,
            resilience=resilience(retries, offline_wait),
        )
        # lazy: only a run needs its event loop; `flower --help` lists this command (issue 31)
        import asyncio

        try:
            ran, stopped = asyncio.run(
                drive(flow, runtime, console, unattended=timeout == 0, events=events)
            )
        finally:
            runtime.close()
    code, status = outcome(ran, stopped=stopped, clarify_only=clarify_only, goal=not no_goal)
    delivery = deliver_work(runtime, finish_as, achieved=code == Exit.OK, console=console)
    finish(console, runtime, command, status, code, state=ran, as_json=json_out, delivery=delivery)


def note_ask(run_dir: Path, ask: str) -> None:
    """Keep `ask` in the run dir's last-ask.json before anything else, so a run killed
    while flower loads is continued with it (starter.stopped_ask). Best effort: a run dir
    that cannot be written is reported later, by the code that needs it."""
    if not ask.strip():
        return
    path = RunDir(run_dir.expanduser().absolute()).last_ask
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{os.getpid()}")
        temp.write_text(json.dumps(ask, ensure_ascii=False), encoding="utf-8")
        os.replace(temp, path)


def _check_finish(finish: str | None, *, isolate: bool) -> None:
    if finish is not None and finish not in FINISH_VALUES:
        values = ", ".join(FINISH_VALUES)
        raise UsageError(lang.text("error.finish_unknown", value=repr(finish), values=values))
    if finish is not None and not isolate:
        raise UsageError(lang.text("error.finish_needs_isolate", value=finish))


def _offer_exclude(ws: Path, folders: list[Path], console: Console, *, asks: bool) -> None:
    """On a repository's first run: keep the run's folders out of `git status` (this clone
    only). Asked on a terminal; done and said otherwise (a CI clone is thrown away)."""
    missing = git_unexcluded(ws, folders)
    if not missing:
        return
    shown = " and ".join(missing)
    if asks and not typer.confirm(
        lang.text("cli.exclude_prompt", shown=shown), default=True, err=True
    ):
        return
    path = git_exclude(ws, missing)
    console.print(lang.text("cli.excluded", shown=shown, path=path))


def deliver_work(
    runtime: Runtime, finish: str | None, *, achieved: bool, console: Console
) -> Delivery | None:
    """The isolated workers' work, delivered as `finish` asks (None: no isolated worker
    ran). A delivery that fails is said, never changes the exit code."""
    # lazy: delivery loads the worktrees' hooks, which load the SDK
    from flower.core.delivery import deliver
    from flower.core.git import GitError

    try:
        how = cast("Finish", finish or "branch")  # _check_finish allowed it
        return deliver(runtime.worktrees, finish=how, achieved=achieved)
    except GitError as exc:
        console.print(lang.text("delivery.failed", problem=exc), markup=False)
        return None


def answer_wait(timeout: float | None, *, say: Callable[[str], None]) -> float:
    """--timeout as given; without it, ANSWER_WAIT when someone can answer (a terminal, or
    $FLOWER_ANSWER_COMMAND: flowerbox's `flowerbox answer`), else 0, said once."""
    if timeout is not None:
        return timeout
    if sys.stdin.isatty() or os.environ.get(ANSWER_COMMAND_ENV):
        return ANSWER_WAIT
    say(NO_TERMINAL)
    return 0.0


async def drive(
    flow: Workflow,
    runtime: Runtime,
    console: Console,
    *,
    unattended: bool,
    events: Path | None = None,
) -> tuple[RunState | None, bool]:
    """Run the workflow with the terminal attached; (its state, or None when stopped, and
    whether it was stopped). Every event is also written as a JSON line to `events`, by
    default the run directory's events/<run id>.jsonl (flower.cli.eventlog; `flower report`
    draws from it)."""
    # lazy: both load the SDK (through Event and Runtime); `flower --help` stays fast
    from flower.cli.eventlog import EventLog
    from flower.cli.interact import Terminal
    from flower.cli.traces import send_trace, traces_checked

    traced = traces_checked()  # a UsageError before anything is spent

    interactive = sys.stdin.isatty() and not unattended
    elsewhere = f"answer from another terminal: {answer_command(runtime.run_dir)}"
    hint = TYPE_ANSWER if interactive else elsewhere
    render = Render(console, spent=runtime.spent, answer_hint=hint)
    terminal = Terminal(
        runtime,
        flow.channel,
        say=lambda line: console.print(line, style="yellow"),
        interactive=interactive,
    )

    log = EventLog(events or RunDir(runtime.run_dir).events(runtime.run_id))

    def on_event(event: Any) -> None:
        terminal.observe(event)
        render(event)
        log(event)

    import asyncio  # lazy: as in go (loaded by then: this runs in its loop)

    heartbeat = asyncio.ensure_future(render.heartbeat())
    try:
        state: RunState = await terminal.run(flow.execute(runtime, on_event=on_event))
    except asyncio.CancelledError:
        console.print(lang.text("end.stopped", by=terminal.stopped_by))
        return None, True
    finally:
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat  # its last status line is drawn before the end line
        log.close()
        if traced:
            send_trace(console, run_dir=runtime.run_dir, run_id=runtime.run_id, events=log.path)
    return state, False


def outcome(
    state: RunState | None, *, stopped: bool, clarify_only: bool, goal: bool
) -> tuple[Exit, str]:
    """The exit code and a one-word status for how the run ended."""
    if stopped or state is None:
        return Exit.INTERRUPTED, "stopped"
    if state.aborted:
        return Exit.NEEDS_HUMAN, "needs_human"
    if state.failed_at:
        return Exit.FAILED, "failed" if not goal or clarify_only else "not_achieved"
    if clarify_only or not goal:
        return Exit.OK, "done"
    achieved = state.verdict is not None and state.verdict.achieved
    return (Exit.OK, "achieved") if achieved else (Exit.FAILED, "not_achieved")


def finish(
    console: Console,
    runtime: Runtime,
    command: str,
    status: str,
    code: Exit,
    *,
    state: RunState | None = None,
    as_json: bool,
    delivery: Delivery | None = None,
) -> NoReturn:
    """End a command that ran steps: its last lines (where the isolated workers' work is, how
    it ended, how to draw it), and with `as_json` its JSON document on stdout; then its exit.
    With --json the console is stderr, so a CI log still ends with the outcome line."""
    drawn = report_command(runtime.run_dir, runtime.workspace)
    for line in delivery.lines() if delivery is not None else []:
        console.print(line, markup=False)
    spent = f"${runtime.spent():.4f}"
    if runtime.spent_before:  # a woken run: the whole job's too
        spent += lang.text("end.with_before", total=f"{runtime.spent_before + runtime.spent():.4f}")
    said = lang.word("outcome", status)
    console.print(lang.text("end.line", status=said, spent=spent, code=int(code)), style="bold")
    console.print(lang.text("end.drawn", command=drawn), style="dim")
    if as_json:
        document = run_document(runtime, command, status, code, state=state)
        delivered = {"delivery": delivery.to_json() if delivery is not None else None}
        contract.emit(document | delivered | {"report": drawn})
    raise typer.Exit(code)


def run_document(
    runtime: Runtime, command: str, status: str, code: Exit, *, state: RunState | None
) -> dict[str, Any]:
    """What a run did, as its `--json` document: the same attempt records `flower status`
    shows, read back from the manifest this run wrote."""
    verdict = state.verdict if state is not None else None
    failed_at = state.failed_at if state is not None else None
    return contract.document(
        command,
        status=status,
        exit_code=int(code),
        run_id=runtime.run_id,
        workspace=str(runtime.workspace),
        run_dir=str(runtime.run_dir),
        cost_usd=runtime.spent(),
        failed_at=None if failed_at is None else parse_label(failed_at).step,
        aborted=state.aborted if state is not None else None,
        verdict=None
        if verdict is None
        else {"state": verdict.state, "reason": verdict.reason, "failed": verdict.failed},
        steps=contract.run_attempts(runtime.run_dir, runtime.run_id),
    )


def _describe_wake(
    state: dict[str, Any], *, new: bool, ask: str, repeated: bool, stopped: bool = False
) -> str:
    if stopped:
        return (
            f"continuing the run in {state['workspace']} that stopped before its brief was "
            f"frozen, with its ask: {ask[:80]}"
        )
    if new or not state["woke"]:
        return f"fresh run in {state['workspace']} (workbench {state['workbench']})"
    parts = [f"waking the run in {state['workspace']}: the brief is complete"]
    if repeated:
        parts.append("the same ask as before, so nothing is added (`flower resume` does this)")
    elif ask.strip():
        parts.append("a new ask: it is added to the brief and the goal is set again from it")
    if state["pending_wake"]:
        parts.append(
            "an earlier wake stopped before its words reached the goal and the coordinator: "
            "they are delivered again"
        )
    if state["goal_complete"]:
        parts.append(f"goal: {state['goal_statement'].splitlines()[0][:80]}")
    if state["sessions"]:
        parts.append(f"resuming {', '.join(map(display_name, state['sessions']))}")
    if state["handoffs"]:
        parts.append(f"{len(state['handoffs'])} handoff(s) waiting")
    if state["pending_asks"]:
        parts.append(f"{len(state['pending_asks'])} question(s) still pending")
    return "; ".join(parts)
