"""Workflow: steps in order, what passes between them (ctx), gates, early exit. No SDK here.

A Step is a declaration; what runs is Runtime.run(step.spec, prompt, ...). Workflow.run walks
the steps, wires sessions between them, retries them through their gate, and returns the
final ctx: each passed step's output under its own name (reduce(result, ctx) if given, else
result.text).

Everything else a run knows (its services and how it went) is a typed RunState carried
alongside ctx: `Workflow.execute()` returns it, and a gate, a `when` or a prompt function
reaches the state of the run it is called in with `RunState.current()`. The seeds document
ctx keys for the same facts, so RunState keeps them in ctx as copies to read (writing one
changes nothing); they start with "_" so they never collide with a step name:

    _runtime    the Runtime (with_goal's gate runs the judge on it)
    _on_event   the event sink given to run() (goal_step warns through it)
    _channel    the HumanChannel, _workbench the Workbench (or None)
    _results    step name -> the StepResult of its last attempt (passed or not)
    _sessions   step name -> its latest session id (also remembered in lineage.json)
    _woke       names of the steps that resumed a session of an earlier process
    _skipped    names of the steps whose `when` said no
    _aborted    the message of a StepAbort raised by a gate
    _failed_at  the step that failed with on_fail="stop" (unset when the run got through)
    _brief, _goal, _verdict, _round, _missing   the starter's (flower.workflow.starter)

A run survives its process (flower.core.progress, `<run_dir>/progress.json`): a step under
way records its attempt index and `RunState.round`, and a woken step carries on from them
(its next label and judge are the ones the killed process would have used, and its retries
count across the kill); a round that began with a judge's feedback keeps it there too, and a
wake says it again if the kill came before it reached the session (flower.core.told); a
woken run's Runtime is told what the run's earlier processes spent (`Runtime.spent_before`,
from their manifest rows), so a budget spans the wake.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from flower.core.agent import AgentSpec
from flower.core.askagain import ask_again
from flower.core.brief import Brief
from flower.core.events import Event
from flower.core.goal import Goal, Verdict
from flower.core.human import HumanChannel
from flower.core.labels import attempt_label
from flower.core.lang import text
from flower.core.lineage import Lineage
from flower.core.manifest import spent
from flower.core.progress import Progress
from flower.core.runtime import EventSink, Runtime, StepResult
from flower.core.told import times_answered
from flower.core.workbench import Workbench
from flower.errors import FlowerError

Ctx = dict[str, Any]

# RunState field -> the ctx key the seeds document for it.
CTX_KEYS = {
    "runtime": "_runtime",
    "on_event": "_on_event",
    "channel": "_channel",
    "workbench": "_workbench",
    "results": "_results",
    "sessions": "_sessions",
    "woke": "_woke",
    "skipped": "_skipped",
    "aborted": "_aborted",
    "failed_at": "_failed_at",
    "brief": "_brief",
    "goal": "_goal",
    "verdict": "_verdict",
    "round": "_round",
    "missing": "_missing",
}
SERVICES = frozenset({"runtime", "on_event", "channel", "workbench"})  # in ctx even if None
# The starter's facts a caller may give in Workflow.context (seed 000:257: a Goal in
# ctx[GOAL_KEY] is with_goal's first source), with the type each must have to be taken.
GIVEN: dict[str, type] = {"brief": Brief, "goal": Goal, "verdict": Verdict, "round": int}
ON_FAIL = ("stop", "continue", "raise")


class StepAbort(FlowerError):
    """Raised by a gate: stop retrying now ("trying again will not change anything"),
    then handle the step as failed through its on_fail. Returning False from a gate means
    "not this time, go another round"."""


class StepFailed(FlowerError):
    """A step with on_fail="raise" did not pass; `result` is its last StepResult."""

    def __init__(self, step: str, result: StepResult) -> None:
        why = result.error or text("step.gate_failed")
        super().__init__(text("step.failed", step=repr(step), why=why))
        self.step = step
        self.result = result


@dataclass
class RunState:
    """What one Workflow.run knows besides the steps' outputs: the services its steps use
    and how it went. Setting a field also sets its documented ctx key (CTX_KEYS); None
    removes the key, except for the services, which are always there. The containers
    (results, sessions, woke, skipped) are the very objects ctx holds.
    """

    ctx: Ctx
    runtime: Runtime
    on_event: EventSink | None = None
    channel: HumanChannel | None = None
    workbench: Workbench | None = None
    results: dict[str, StepResult] = field(default_factory=dict)
    sessions: dict[str, str] = field(default_factory=dict)
    woke: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    aborted: str | None = None  # a gate's StepAbort message
    failed_at: str | None = None  # the step that stopped the run (on_fail="stop")
    # written by with_goal and the starter's steps
    brief: Brief | None = None  # the frozen brief
    goal: Goal | None = None  # the frozen goal
    verdict: Verdict | None = None  # the judge's latest verdict
    round: int = 0  # judged rounds so far
    missing: list[str] | None = None  # sections the last brief or goal draft lacked

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if (key := CTX_KEYS.get(name)) is None:
            return
        if value is None and name not in SERVICES:
            self.ctx.pop(key, None)
        else:
            self.ctx[key] = value

    def adopt(self, given: Ctx) -> None:
        """Take the starter's facts (GIVEN) that `given` holds under their ctx keys."""
        for name, kind in GIVEN.items():
            value = given.get(CTX_KEYS[name])
            if isinstance(value, kind) and not isinstance(value, bool):
                setattr(self, name, value)

    @staticmethod
    def current() -> RunState | None:
        """The state of the Workflow.run this is called from (a gate, a `when`, a prompt
        function), or None outside one."""
        return _current.get()


_current: ContextVar[RunState | None] = ContextVar("flower_run_state", default=None)


@dataclass
class Step:
    """One step. The first three fields are positional: Step("取词", spec, "读 seed.txt …").

    How it connects to earlier sessions of the same run:
        resume_from=None            a fresh session
        resume_from="<step>"        continue that step's session (its whole conversation)
        resume_from=..., fork=True  a new session that starts from a copy of that history

    retries: further attempts after the first one, each judged by `gate`.
    on_reject: given, a rejected attempt's session is resumed with on_reject's return value
        as the prompt (fork off); an empty string, or no session, means a fresh start.
    on_fail: "stop" (the run ends here, RunState.failed_at), "continue" (go on to the next
        step), "raise" (StepFailed).
    resume_prompt: sent instead of `prompt` when the step resumes its own session from an
        earlier process (a woken run), so the full brief is not sent again.
    """

    name: str
    spec: AgentSpec
    prompt: str | Callable[[Ctx], str]

    resume_from: str | None = None
    fork: bool = False

    retries: int = 0
    gate: Callable[[StepResult, Ctx], Any] | None = None
    on_fail: str = "stop"
    when: Callable[[Ctx], bool] | None = None
    on_reject: Callable[[StepResult, Ctx], str] | None = None
    resume_prompt: str | Callable[[Ctx], str] | None = None
    reduce: Callable[[StepResult, Ctx], str] | None = None

    def __post_init__(self) -> None:
        if self.on_fail not in ON_FAIL:
            raise ValueError(
                f"step {self.name!r}: on_fail must be one of {', '.join(ON_FAIL)}, "
                f"not {self.on_fail!r}"
            )


@dataclass
class Workflow:
    """Steps run in order; returns the final ctx. `steps` is positional: Workflow([...]).

    continuous: a step that already has a session in this run dir's lineage (an earlier
    process ran it) resumes it instead of starting over.
    """

    steps: list[Step]
    name: str = "workflow"
    context: Ctx = field(default_factory=dict)
    channel: HumanChannel | None = None
    workbench: Workbench | None = None
    continuous: bool = True

    async def run(
        self,
        runtime: Runtime,
        *,
        on_event: EventSink | None = None,
        on_step: Callable[[Step, StepResult], None] | None = None,
    ) -> Ctx:
        """Run every step (or until one stops the run) and return the ctx."""
        state = await self.execute(runtime, on_event=on_event, on_step=on_step)
        return state.ctx

    async def execute(
        self,
        runtime: Runtime,
        *,
        on_event: EventSink | None = None,
        on_step: Callable[[Step, StepResult], None] | None = None,
    ) -> RunState:
        """run(), returning the typed RunState (its `ctx` is what run() returns)."""
        state = RunState(
            dict(self.context),
            runtime,
            on_event=on_event,
            channel=self.channel,
            workbench=self.workbench,
        )
        state.adopt(self.context)
        if self.channel is not None:
            if on_event is not None and self.channel.on_event is None:
                self.channel.on_event = on_event
            self.channel.attach(runtime.run_dir)
        token = _current.set(state)
        try:
            await self._run_steps(state, on_step)
            return state
        finally:
            _current.reset(token)
            if self.channel is not None:
                await self.channel.aclose()  # the inbox watcher lives as long as the run

    async def _run_steps(
        self, state: RunState, on_step: Callable[[Step, StepResult], None] | None
    ) -> None:
        runtime, ctx, on_event = state.runtime, state.ctx, state.on_event
        lineage = Lineage(runtime.run_dir, runtime.workspace)
        progress = Progress(runtime.run_dir, runtime.workspace)
        woke = self.continuous and bool(lineage.sessions())
        earlier = progress.join(runtime.run_id, woke=woke)
        runtime.spent_before = spent(runtime.manifest_path, earlier) if earlier else 0.0
        for index, step in enumerate(self.steps):
            if step.when is not None and not step.when(ctx):
                state.skipped.append(step.name)
                continue
            result, passed = await self._run_step(state, step, index, lineage, progress)
            if on_step is not None:
                on_step(step, result)
            if passed:
                ctx[step.name] = step.reduce(result, ctx) if step.reduce else result.text
                continue
            if result.error and on_event is not None:  # say why, not only that it ended
                payload = {"step": step.name, "source": "flower"}
                on_event(Event("error", f"{step.name}: {result.error}", payload=payload))
            if step.on_fail == "raise":
                raise StepFailed(step.name, result)
            if step.on_fail == "stop":
                state.failed_at = step.name
                break

    async def _run_step(
        self, state: RunState, step: Step, index: int, lineage: Lineage, progress: Progress
    ) -> tuple[StepResult, bool]:
        """All attempts of one step; the last StepResult and whether the gate passed."""
        runtime, ctx, on_event = state.runtime, state.ctx, state.on_event
        first_prompt = _text(step.prompt, ctx)
        first_resume = _session_of(step.resume_from, state.sessions, lineage)
        prompt, resume, fork = first_prompt, first_resume, step.fork and first_resume is not None
        woken = await self._woken_session(runtime, step, lineage)
        start = 0
        told: tuple[str, int] | None = None  # an attempt's own prompt (feedback), answered before
        if woken is not None:
            state.woke.append(step.name)
            if self.channel is not None:  # a question the kill cut is asked again first
                await ask_again(self.channel, runtime.store, woken)
            prompt = _text(step.resume_prompt, ctx) if step.resume_prompt else first_prompt
            resume, fork = woken, False
            where = progress.step(step.name)  # the round the killed process was in
            start = min(where.get("attempt", 0), step.retries)
            state.round = where.get("round", state.round)
            told = progress.told(step.name)
            if told is not None and await _unheard(runtime, woken, told):
                prompt = f"{prompt}\n\n{told[0]}"  # the kill cut it off: said again
        result = StepResult(step=step.name)
        passed = False
        for attempt in range(start, step.retries + 1):
            if on_event is not None:  # each round of a step that has several is announced
                payload = {
                    "index": index,
                    "total": len(self.steps),
                    "resumed": resume is not None,
                    "woke": int(woken is not None),
                }
                if step.retries:
                    payload.update(round=attempt + 1, rounds=step.retries + 1)
                on_event(Event("step", step.name, payload=payload))
            label = attempt_label(step.name, attempt, judged_again=step.on_reject is not None)
            progress.record(step.name, attempt=attempt, round=state.round, told=told)

            def remember(session_id: str, name: str = step.name) -> None:
                state.sessions[name] = session_id
                lineage.remember(name, session_id)  # a kill mid-step resumes this session

            runtime.on_session = remember
            try:
                result = await runtime.run(
                    step.spec, prompt, step_name=label, resume=resume, fork=fork, on_event=on_event
                )
            finally:
                runtime.on_session = None  # the gate's own runs (a judge) are not this step's
            state.results[step.name] = result
            if result.session_id:
                state.sessions[step.name] = result.session_id
                lineage.remember(step.name, result.session_id)
            try:
                passed = result.ok and await _passes(step, result, ctx)
            except StepAbort as exc:
                state.aborted = str(exc)
                passed = False
                break
            if passed:
                break
            feedback = step.on_reject(result, ctx) if step.on_reject else ""
            if feedback and result.session_id:
                prompt, resume, fork = feedback, result.session_id, False
                told = (
                    feedback,
                    await asyncio.to_thread(times_answered, runtime.store, resume, feedback),
                )
            else:
                prompt, resume = first_prompt, first_resume
                fork = step.fork and first_resume is not None
                told = None
        progress.forget(step.name)  # ended: a later wake starts its rounds afresh
        return result, passed

    async def _woken_session(self, runtime: Runtime, step: Step, lineage: Lineage) -> str | None:
        """The session this step had in an earlier process, if it is in the store (caught
        up first with what the CLI wrote on this machine and the kill kept from the store)."""
        if not self.continuous:
            return None
        session_id = lineage.recall(step.name)
        if session_id is None:
            return None
        await runtime.catch_up(session_id)
        return session_id if runtime.store.summary(session_id) is not None else None


async def _unheard(runtime: Runtime, session_id: str, told: tuple[str, int]) -> bool:
    """Whether the prompt `told` (with how many of the session's prompts held it, answered,
    before it was sent) was never answered in `session_id`: the process was killed before
    the CLI wrote it, or before the model replied to it."""
    said, seen = told
    return await asyncio.to_thread(times_answered, runtime.store, session_id, said) <= seen


def _text(value: str | Callable[[Ctx], str] | None, ctx: Ctx) -> str:
    if value is None:
        return ""
    return value(ctx) if callable(value) else value


def _session_of(step_name: str | None, sessions: dict[str, str], lineage: Lineage) -> str | None:
    if step_name is None:
        return None
    found = sessions.get(step_name)
    return str(found) if found else lineage.recall(step_name)


async def _passes(step: Step, result: StepResult, ctx: Ctx) -> bool:
    """The gate's verdict (a gate may be sync or async); no gate means a good result passes."""
    if step.gate is None:
        return True
    verdict = step.gate(result, ctx)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    return bool(verdict)
