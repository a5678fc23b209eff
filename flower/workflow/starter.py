"""The starter: clarify -> set the goal -> work under a goal guard. What `flower "ask"` runs.

    clarify_step   a clarifier turns the ask into a four-section Brief, frozen on disk
    goal_step      a judge turns the Brief into a Goal and a verdict checklist, frozen too
    with_goal      wraps a work step: after each round a fresh judge rules against the goal;
                   not yet -> the work goes back (same session, the judge's feedback);
                   unreachable -> a human is asked; nobody answers -> StepAbort
    starter_flow   the three assembled, waking a run that already has a complete brief
    wake_state     a read-only look, before starting, at what a run in this folder would do

The documents live in the workbench's notes/ (需求.md, 目标.md, 问答记录.md); with isolation
the workbench sits outside the repository, at <parent>/.flower-<name>.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from flower.core.agent import AgentSpec
from flower.core.brief import Brief
from flower.core.events import Event
from flower.core.goal import Goal, Verdict
from flower.core.human import HumanChannel
from flower.core.inbox import pending_asks
from flower.core.labels import judge_label
from flower.core.lang import text
from flower.core.lineage import Lineage
from flower.core.roles import clarify, coordinator, judge, worker
from flower.core.rundir import RunDir
from flower.core.runtime import Runtime, StepResult
from flower.core.statefile import atomic_write_json, read_json
from flower.core.texts.en import EN
from flower.core.texts.zh import ZH
from flower.core.workbench import Workbench
from flower.core.workspace import BRIEF_NAME, in_git_repository, workbench_location
from flower.errors import UsageError, WorkspaceError
from flower.workflow.base import CTX_KEYS, Ctx, RunState, Step, StepAbort, Workflow
from flower.workflow.wake import PendingWake

# The ctx keys the seeds document for RunState.brief, .missing, .goal, .verdict, .round.
BRIEF_KEY = CTX_KEYS["brief"]
MISSING_KEY = CTX_KEYS["missing"]
GOAL_KEY = CTX_KEYS["goal"]
VERDICT_KEY = CTX_KEYS["verdict"]
ROUND_KEY = CTX_KEYS["round"]

# The options offered on an unreachable goal, recognised in either language.
ACCEPT = (ZH["starter.accept"], EN["starter.accept"])
AMEND = (ZH["starter.amend"], EN["starter.amend"])

__all__ = [
    "clarify_step",
    "goal_step",
    "starter_flow",
    "wake_state",
    "with_goal",
]


def clarify_step(
    channel: HumanChannel,
    *,
    brief_path: str | Path,
    prompt: str | Any,
    name: str = "确认需求",
    spec: AgentSpec | None = None,
    instructions: str = "",
    always_ask: bool = False,
    on_fail: str = "stop",
    retries: int = 0,
    **spec_kw: Any,
) -> Step:
    """Clarify the ask into a Brief; once its four sections are complete, freeze it on disk.

    A complete brief already on disk skips the step (unless `always_ask`), but is still put
    into ctx: the steps after it need it. The next step starts a fresh session that gets
    only the brief, never the questionnaire.
    """
    path = Path(brief_path)

    def when(ctx: Ctx) -> bool:
        if always_ask:
            return True
        brief = Brief.load(path)
        if brief is not None and brief.complete():
            _put_brief(ctx, name, brief)
            return False
        return True

    def gate(result: StepResult, ctx: Ctx) -> bool:
        brief = Brief.parse(result.text)
        if not brief.complete():
            _note_missing(brief.missing())
            return False
        brief.write(path)
        _put_brief(ctx, name, brief)
        _note_missing(None)
        return True

    return Step(
        name,
        spec or clarify(name, channel, instructions=instructions, **spec_kw),
        prompt,
        retries=retries,
        gate=gate,
        on_fail=on_fail,
        when=when,
        resume_prompt=text("starter.clarify_resume"),
        reduce=lambda result, ctx: str(ctx[name]),
    )


def _put_brief(ctx: Ctx, name: str, brief: Brief) -> None:
    """The frozen brief: the run's state holds it, the step's output is its prompt block."""
    if (state := RunState.current()) is not None:
        state.brief = brief
    ctx[name] = brief.prompt_block()


def _put_goal(ctx: Ctx, name: str, goal: Goal) -> None:
    if (state := RunState.current()) is not None:
        state.goal = goal
    ctx[name] = goal.prompt_block()


def _note_missing(missing: list[str] | None) -> None:
    """What the last draft lacked (None once a draft was complete)."""
    if (state := RunState.current()) is not None:
        state.missing = missing


def goal_step(
    channel: HumanChannel,
    *,
    goal_path: str | Path,
    brief_key: str = "确认需求",
    name: str = "设定目标",
    spec: AgentSpec | None = None,
    instructions: str = "",
    always_set: bool = False,
    on_fail: str = "stop",
    retries: int = 0,
    **spec_kw: Any,
) -> Step:
    """The judge reads the brief and writes the goal and its verdict checklist, frozen on
    disk. Checks it marks `[此环境无法验证:…]` are announced at once as an Event("task"):
    their fate is sealed now, not after a whole round of work. (To let the judge run
    commands here, pass can_run=True through spec_kw.)"""
    path = Path(goal_path)

    def when(ctx: Ctx) -> bool:
        if always_set:
            return True
        goal = Goal.load(path)
        if goal is not None and goal.complete():
            _put_goal(ctx, name, goal)
            return False
        return True

    def gate(result: StepResult, ctx: Ctx) -> bool:
        goal = Goal.parse(result.text)
        if not goal.complete():
            _note_missing(goal.missing())
            return False
        goal.write(path)
        _put_goal(ctx, name, goal)
        _note_missing(None)
        unverifiable = goal.unverifiable()
        state = RunState.current()
        if unverifiable and state is not None and state.on_event is not None:
            payload = {"unverifiable": unverifiable, "total": len(goal.checks), "path": str(path)}
            said = text("starter.unverifiable", count=len(unverifiable), total=len(goal.checks))
            state.on_event(Event("task", said, payload=payload))
        return True

    return Step(
        name,
        spec or judge(name, channel, instructions=instructions, **spec_kw),
        lambda ctx: text("starter.goal", brief=ctx.get(brief_key, "")),
        retries=retries,
        gate=gate,
        on_fail=on_fail,
        when=when,
        reduce=lambda result, ctx: str(ctx[name]),
    )


def with_goal(
    step: Step,
    channel: HumanChannel,
    *,
    goal_path: str | Path,
    spec: AgentSpec | None = None,
    rounds: int = 3,
    instructions: str = "",
    can_run: bool = False,
    name: str | None = None,
    **spec_kw: Any,
) -> Step:
    """Put a goal guard on `step`: after each round a fresh judge session rules against the
    frozen goal; the step passes only on "achieved". When isolated workers did the work, the
    judge is told where the run's branch is checked out for it (Worktrees.review). Built
    with dataclasses.replace, so every other field of `step` (resume_prompt included) is
    kept."""
    path = Path(goal_path)
    label = name or judge_label(step.name)
    judger = spec or judge(label, channel, instructions=instructions, can_run=can_run, **spec_kw)

    async def gate(result: StepResult, ctx: Ctx) -> bool:
        state = RunState.current()
        if state is None:
            raise StepAbort(text("starter.no_runtime"))
        state.round += 1
        goal = _current_goal(ctx, path)
        prompt = text("starter.verify", goal=goal.prompt_block(), report=result.text)
        ruling = await state.runtime.run(
            judger,
            prompt + await asyncio.to_thread(_review_note, state.runtime),
            step_name=f"{label}#{state.round}",
            on_event=state.on_event,
        )
        verdict = Verdict.parse(ruling.text)
        state.verdict = verdict
        if verdict.achieved:
            return True
        if not verdict.unreachable:
            if not verdict.ok:
                verdict.reason = verdict.reason or text("starter.ambiguous")  # it is "not yet"
            return False
        return await _ask_about_unreachable(channel, verdict, goal, path, state)

    def on_reject(result: StepResult, ctx: Ctx) -> str:
        state = RunState.current()
        verdict = state.verdict if state is not None else None
        return verdict.feedback() if verdict is not None else ""

    return replace(step, retries=max(0, rounds - 1), gate=gate, on_reject=on_reject)


def _review_note(runtime: Runtime) -> str:
    """Where the judge finds the work of isolated workers (never in the user's checkout)."""
    review = runtime.worktrees.review()
    branch = runtime.worktrees.branch()
    if review is None or branch is None:
        return ""
    return text("starter.review_note", branch=branch.name, path=review)


def _current_goal(ctx: Ctx, path: Path) -> Goal:
    """Seed 000:257: a complete Goal in ctx[GOAL_KEY] (RunState.goal, or one the caller or a
    step put there), else the goal file, else an empty Goal."""
    held = ctx.get(GOAL_KEY)
    if isinstance(held, Goal) and held.complete():
        return held
    return Goal.load(path) or Goal()


async def _ask_about_unreachable(
    channel: HumanChannel, verdict: Verdict, goal: Goal, path: Path, state: RunState
) -> bool:
    """The judge says the goal cannot be reached here: only a human can decide."""
    reason = verdict.reason or text("starter.no_reason")
    options = [text("starter.accept"), text("starter.amend"), text("starter.retry")]
    ask = await channel.ask(text("starter.unreachable", reason=reason), options=options)
    if ask.state != "answered":
        # idling on is the dearest choice
        raise StepAbort(text("starter.unreachable_unanswered"))
    if ask.answer.strip() in ACCEPT:
        return True
    if ask.answer.strip() in AMEND:
        change = await channel.ask(text("starter.new_goal"))
        if change.state != "answered":
            raise StepAbort(text("starter.no_new_goal"))
        amended = goal.amend(change.answer)
        amended.write(path)
        state.goal = amended
        return False
    # "your verdict is wrong"
    verdict.reason = text("starter.human_said", reason=verdict.reason, answer=ask.answer).strip()
    return False


def starter_flow(
    ask: str,
    *,
    workspace: str | Path = ".",
    run_dir: str | Path = "runs",
    new: bool = False,
    isolate: bool = False,
    clarify_only: bool = False,
    goal: bool = True,
    rounds: int = 3,
    judge_can_run: bool = False,
    max_asks: int | None = None,
    timeout_s: float | None = 1800.0,
    instructions: str = "",
    worker_prompt: str | None = None,
    brief_name: str = BRIEF_NAME,
    goal_name: str = "目标.md",
    log_name: str = "问答记录.md",
) -> Workflow:
    """Clarify -> set the goal -> work under the goal guard, ready to run.

    A complete brief on disk means a wake: the new ask lands in three places at once (the
    brief, amended; the goal, set again from it; the coordinator, told directly), and a
    missing one fails silently (it would work by the old criteria, or be judged by them).
    An ask the run was already started or amended with (`run_dir`'s ask-history.json) is no
    new ask: the run continues as it was, as with no ask at all; but a wake's words that have
    not yet reached the goal and the coordinator (a process stopped during the goal's reset,
    `run_dir`'s wake.json) are delivered again by any continuation, with or without an ask.
    `instructions` are the coordinator's own rules, after COORDINATOR_RULES (the seed shows
    "": the default).

    Raises:
        WorkspaceError: isolation outside a git repository (before any money is spent).
        UsageError: no ask when there is nothing to wake.
        (Both are ValueErrors, as the seeds say.)
    """
    ws = Path(workspace).expanduser().resolve()
    if isolate and not in_git_repository(ws):
        raise WorkspaceError(
            ws,
            text("error.not_git", path=ws),
        )
    workbench = Workbench(ws, home=workbench_location(ws, isolate=isolate))
    brief_path = workbench.notes / brief_name
    goal_path = workbench.notes / goal_name
    if new:
        _archive_documents(workbench, brief_path, goal_path)
    existing = Brief.load(brief_path)
    woke = existing is not None and existing.complete()
    said = ask.strip()
    if not woke and not said:
        raise UsageError(text("starter.no_ask"))
    runs = RunDir(Path(run_dir).expanduser())
    if woke and said and repeated_ask(runs.ask_history, said):
        said = ""  # the same ask again: continue the run, never amend it with itself
    if said:
        _record_ask(runs.ask_history, said, fresh=not woke)
    pending = PendingWake(runs.wake)
    if not woke:
        pending.delivered()  # a fresh run owes nothing to an earlier run's wake
    elif said:
        pending.begin(said)
    # a wake's words, this one's or an interrupted one's, until they reached all three places
    words = pending.words() if woke else []
    channel = HumanChannel(
        log_path=workbench.notes / log_name,
        amend_path=brief_path,
        max_asks=max_asks,
        timeout_s=timeout_s,
    )
    for word in words:
        channel.amend(word, label=text("starter.wake_label"))  # place 1: the brief
    steps = [clarify_step(channel, brief_path=brief_path, prompt=text("starter.clarify", ask=said))]
    if not clarify_only:
        if goal:
            # place 2: the goal is set again from the amended brief
            reset = goal_step(
                channel,
                goal_path=goal_path,
                always_set=bool(words) and not pending.goal_set(),
                can_run=judge_can_run,
            )
            steps.append(_noting(reset, pending.goal_done, first=False) if words else reset)
        coder = worker(
            text("role.coder"), worker_prompt or text("role.coder_prompt"), isolate=isolate
        )
        boss = coordinator(
            text("role.coordinator"), instructions, {"coder": coder}, channel=channel
        )
        work = Step(
            "干活",
            boss,
            lambda ctx: text(
                "starter.work", brief=ctx.get("确认需求", ""), goal=ctx.get("设定目标", "")
            ),
            # place 3: the coordinator, whose context holds the old goal, is told directly;
            # with no new words, it carries on (the brief and goal are in its session)
            resume_prompt=text("starter.wake", said="\n".join(words)) if words else _carry_on,
        )
        if goal:
            work = with_goal(
                work, channel, goal_path=goal_path, rounds=rounds, can_run=judge_can_run
            )
        steps.append(_noting(work, pending.delivered, first=True) if words else work)
    return Workflow(steps, name="starter", channel=channel, workbench=workbench, continuous=not new)


def _carry_on(ctx: Ctx) -> str:
    """What a woken coordinator is told, with no new words: carry on, and what the person
    added to the brief (a `flower send`, an answer), whose only copy may be the brief: the
    inbox that held it died with the killed process. Said again on every wake: a repeated
    word is harmless, silence is not."""
    brief = str(ctx.get("确认需求", ""))
    added = [line for line in brief.splitlines() if line.startswith(">")]
    said = text("starter.carry_on")
    return (
        f"{said}\n\n{text('starter.carry_on_added', said=chr(10).join(added))}" if added else said
    )


def _noting(step: Step, note: Callable[[], None], *, first: bool) -> Step:
    """`step`, whose gate also calls `note`: `first`, as soon as a round of the step has
    ended (before the gate rules); else once the gate has passed."""
    inner = step.gate

    async def gate(result: StepResult, ctx: Ctx) -> bool:
        if first:
            note()
        passed = inner(result, ctx) if inner is not None else True
        if inspect.isawaitable(passed):
            passed = await passed
        if passed and not first:
            note()
        return bool(passed)

    return replace(step, gate=gate)


def stopped_ask(run_dir: str | Path) -> str:
    """The ask the run in `run_dir` was last started with (ask-history.json), or "": what a
    continuation with no ask goes on with when the run stopped before its brief was frozen
    (issue 30: its clarifier's session is resumed, its question asked again)."""
    runs = RunDir(Path(run_dir).expanduser())
    given = _given(runs.ask_history)
    if given:
        return given[-1]
    last = read_json(runs.last_ask, "")  # killed before the starter recorded its ask
    return last if isinstance(last, str) else ""


def repeated_ask(history: Path, ask: str) -> bool:
    """Whether `ask` is one this run was already started or amended with (its words, not
    the brief's rewording of them: the clarifier never copies an ask verbatim)."""
    return _words(ask) in {_words(given) for given in _given(history)}


def _record_ask(history: Path, ask: str, *, fresh: bool) -> None:
    """Remember the ask a run starts with (a fresh run forgets the earlier run's), and each
    ask that amended it."""
    given = [] if fresh else _given(history)
    history.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(history, [*given, ask])


def _given(history: Path) -> list[str]:
    given = read_json(history, [])
    return [str(ask) for ask in given] if isinstance(given, list) else []


def _words(text: str) -> str:
    return " ".join(text.split())


def _archive_documents(workbench: Workbench, *paths: Path) -> None:
    """--new: move the frozen documents aside so nothing wakes; they are kept, not deleted."""
    present = [p for p in paths if p.exists()]
    if not present:
        return
    folder = workbench.notes / "archive" / time.strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    for path in present:
        path.rename(folder / path.name)


def wake_state(
    workspace: str | Path = ".",
    *,
    run_dir: str | Path = "runs",
    isolate: bool = False,
    brief_name: str = BRIEF_NAME,
    goal_name: str = "目标.md",
) -> dict[str, Any]:
    """A read-only probe before starting (not a byte is written): will a run here wake or
    start fresh, and of what. The keys:

        woke            a complete brief exists: the run resumes instead of clarifying
        workspace       the workspace's realpath
        workbench       where the workbench is (inside the repo, or beside it if isolate)
        brief, goal     their paths, or None when the file does not exist
        brief_complete, goal_complete
        goal_statement  the frozen goal's statement ("" if none)
        sessions        step name -> session id from lineage.json (what would be resumed)
        handoffs        the handoff documents waiting in notes/ (交接-*.md)
        pending_asks    questions still waiting for a human (asks.json)
        pending_wake    the words of a wake stopped before they reached the goal and the
                        coordinator (wake.json): the next run delivers them again
        stopped_ask     with no complete brief, the ask the run was started with (a run
                        stopped before its brief was frozen goes on with it), else ""
    """
    ws = Path(workspace).expanduser().resolve()
    root = workbench_location(ws, isolate=isolate)
    notes = root / "notes"
    brief = Brief.load(notes / brief_name)
    goal = Goal.load(notes / goal_name)
    runs = RunDir(Path(run_dir).expanduser())
    return {
        "woke": brief is not None and brief.complete(),
        "workspace": str(ws),
        "workbench": str(root),
        "brief": str(notes / brief_name) if brief is not None else None,
        "brief_complete": brief is not None and brief.complete(),
        "goal": str(notes / goal_name) if goal is not None else None,
        "goal_complete": goal is not None and goal.complete(),
        "goal_statement": goal.statement if goal is not None else "",
        "sessions": Lineage(runs.path, ws).sessions() if runs.lineage.exists() else {},
        "handoffs": sorted(str(p) for p in notes.glob("交接-*.md")) if notes.is_dir() else [],
        "pending_asks": pending_asks(runs.path),
        "pending_wake": PendingWake(runs.wake).words(),
        "stopped_ask": "" if brief is not None and brief.complete() else stopped_ask(runs.path),
    }
