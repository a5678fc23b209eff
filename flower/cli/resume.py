"""`flower resume`: continue the unfinished run in this workspace, whatever stopped it.

The one way to continue after Ctrl+C, SIGTERM, a kill or a crash: the brief and the goal
stay as they are (nothing is amended, nothing set again), each step's session is resumed
from lineage.json, and the coordinator is not told anything new, except the words of a wake
that was stopped before they reached the goal and the coordinator (the starter's wake.json):
those are delivered again, the goal set again from them. `flower "the same ask"` does the
same (the starter recognises an ask it was already given); a different ask amends the run
instead. Whether the run isolated its workers is read from where its workbench is.
"""

from __future__ import annotations

from pathlib import Path

from flower.cli.exits import exit_codes
from flower.cli.go import COMMAND, go
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
    workspace_folder,
)
from flower.core.lang import text
from flower.errors import UsageError


def resume(
    workspace: Workspace = Path("."),
    run_dir: RunDirOption = Path("runs"),
    rounds: Rounds = 3,
    timeout: AnswerTimeout = None,
    model: Model = None,
    budget: Budget = None,
    retries: Retries = None,
    offline_wait: OfflineWait = None,
    verbose: Verbose = False,
    events: Events = None,
    json_out: JsonOut = False,
    finish_as: FinishOption = None,
) -> None:
    """Continue the unfinished run here: its brief, goal and sessions, nothing redone."""
    with exit_codes("flower resume" if json_out else None):
        ws = workspace_folder(workspace)
        isolate = _isolated(ws, run_dir)
    named = COMMAND.set("flower resume")  # the document names this command
    try:
        go(
            "",
            workspace=ws,
            run_dir=run_dir,
            new=False,
            wake=True,
            isolate=isolate,
            clarify_only=False,
            no_goal=False,
            rounds=rounds,
            judge_can_run=False,
            max_asks=None,
            timeout=timeout,
            no_trim=False,
            model=model,
            budget=budget,
            retries=retries,
            offline_wait=offline_wait,
            verbose=verbose,
            events=events,
            json_out=json_out,
            finish_as=finish_as,
        )
    finally:
        COMMAND.reset(named)


def _isolated(ws: Path, run_dir: Path) -> bool:
    """Whether the run to resume isolated its workers (its workbench sits beside the
    repository): the newer of the two when both hold a complete brief.

    A run stopped before its brief was frozen is continued too, with the ask it was started
    with (`flower go` takes it from ask-history.json).

    Raises:
        UsageError: neither does, and no ask is recorded: there is nothing to resume.
    """
    # lazy: the starter loads the SDK, which `flower --help` must not pay for
    from flower.workflow.starter import wake_state

    states = [(wake_state(ws, run_dir=run_dir, isolate=i), i) for i in (False, True)]
    found = [(Path(s["brief"]).stat().st_mtime, i) for s, i in states if s["woke"]]
    # a run stopped before its brief was frozen goes on with its ask (issue 30), in the
    # workbench it has begun (the newer one, if both exist; none yet: in the repository)
    begun = [
        (Path(s["workbench"]).stat().st_mtime if Path(s["workbench"]).is_dir() else 0.0, i)
        for s, i in states
        if s["stopped_ask"]
    ]
    if not (found or begun):
        raise UsageError(text("error.nothing_to_resume", ws=ws))
    # the newer; at a tie (neither workbench made yet) unisolated, as `flower "ask"` runs
    return max(found or begun, key=lambda pair: (pair[0], not pair[1]))[1]
