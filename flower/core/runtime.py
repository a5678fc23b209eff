"""Runtime: one verb, run(spec, prompt) -> StepResult. Everything else happens inside it.

run() loops over attempts (CLI sessions) and leaves the loop by one of four exits (seeds,
"Runtime.run"): success; a human interrupt (resume the same session with the human's words
and INTERRUPT_NOTE, or CARRY_ON_NOTE when they said nothing; not counted as an attempt; with
no session to resume, the step ends with error INTERRUPTED, never ok); a full context (the
session writes its own handoff, budget lifted and no UI events, and a brand-new session
starts from it, capped at max_generations); a retryable failure (Event "retry", wait for the
network, back off, resume the same session with resume_prompt, or send the same start again
when the store holds no reply of it: killed before it stored anything, or every request
refused; but a CLI that exits before any API response twice with the same unclassified
error stops the step at once: waiting does not mend a bad option or a kernel that lacks a
feature). Errors go to StepResult.errors and the manifest, never into the context.

Runtime owns the workspace, the session store (always the pruning layer over sessions.db),
the workbench and the policies. It drives the CLI through ClaudeSDKClient (interrupt needs
it, and query() cuts background work at 600 s), ends a step when the CLI reports itself idle
(the one signal that also covers background subagents waking the session for another turn),
and writes manifest.json with append semantics that are safe across processes: a step's row
is opened when it starts and rewritten as usage streams in (flower.core.manifest), so a
killed process leaves its step's tokens, cost and session behind.

Errors (flower.errors; each is also the RuntimeError or ValueError the seeds name):
    CredentialsError   no credentials (the four-line message of check_credentials)
    WorkspaceError     a workspace that is not a folder or whose name is not UTF-8; at run(),
                       an isolated worker in a workspace that is not a git repository or has
                       no commit yet
    RunDirError        a run_dir that is a file, that cannot be created, or whose name is
                       not UTF-8
    StateFileError     a state file of run_dir that does not parse or has a shape this
                       flower does not write (flower.core.runcheck; sessions.db: StoreError)

Guards are mounted from the AgentSpec (flower.core.mounting; docs/guards.md): whitelist_guard
unless the spec is delegate_only; delegate_guard and isolate_guard as the role asks, with or
without a workbench; index_guard and spill_guard (and the workbench index in the system
prompt) only when this Runtime has a workbench and the spec wants one. Isolated workers work in
worktrees `Runtime.worktrees` makes, stacked on the run's branch (flower.core.worktrees). The
context-full exit's handoff is flower.core.takeover.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeSDKClient, ClaudeSDKError, ProcessError, ResultError

from flower.core import lang
from flower.core.agent import AgentSpec, HandoffPolicy, build_options
from flower.core.attempt import Attempt
from flower.core.catchup import catch_up, salvage
from flower.core.cutwork import cut_work, note
from flower.core.cutwork import hooks as cutwork_hooks
from flower.core.ends import AttemptEnd
from flower.core.env import require_credentials
from flower.core.events import Event, normalize
from flower.core.git import git
from flower.core.guard import merge_hooks, wants_isolation
from flower.core.handoff import Handoff, is_overflow
from flower.core.handoffstop import HandoffStop
from flower.core.leftovers import sweep
from flower.core.manifest import ENDED, RUNNING, ManifestWriter, WriterLock
from flower.core.mounting import session_spec
from flower.core.pricing import token_count
from flower.core.resilience import Kind, Resilience, classify
from flower.core.runcheck import check_state_files
from flower.core.rundir import RunDir, this_run_id
from flower.core.spend import TOKEN_FIELDS, call_cost
from flower.core.takeover import take_over
from flower.core.texts.zh import ZH
from flower.core.workbench import Workbench
from flower.core.workspace import in_git_repository, shown, undecodable
from flower.core.worktrees import Worktrees
from flower.errors import RunDirError, WorkspaceError
from flower.stores import EphemeralPolicy, PrunePolicy, PruningSessionStore, TrimPolicy
from flower.stores.firstturn import fork_point
from flower.stores.transcript import is_api_error

EventSink = Callable[[Event], None]

# Manifest rows are a ledger, not a transcript: the full text lives in sessions.db.
MANIFEST_TEXT_LIMIT = 2000
# How long a stopped step waits for the CLI's own figure after its interrupt: a call in
# flight is billed from its stream's start, which only the CLI has seen (a subagent's
# stream never reaches the SDK), and the CLI's result after an interrupt counts it.
SETTLE_ON_STOP_S = 5.0


@dataclass
class StepResult:
    """The complete account of one finished step."""

    step: str
    session_id: str | None = None
    ok: bool = False
    cost_usd: float = 0.0
    num_turns: int = 0
    text: str = ""
    error: str | None = None
    started_at: float = 0.0
    ended_at: float = 0.0
    attempts: int = 1
    errors: list[str] = field(default_factory=list)
    resumed: bool = False
    retired: list[str] = field(default_factory=list)
    context: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    """Tokens and API calls of every attempt (subagents' included), each response counted
    once: api_calls, input_tokens, output_tokens, cache_read_input_tokens,
    cache_creation_input_tokens (as its transcript entry reports them; as its stream opened,
    output undercounted, until that arrives: flower.core.spend)."""


class Runtime:
    """Holds the workspace, the store and the policies; runs steps.

    Beyond the seeds' parameters, `budget_usd` caps the whole run: each attempt's CLI budget
    is what is left of it, and a step starts no attempt once it is spent. `spent_before` is
    what earlier processes of the same run spent (a woken Workflow sets it from the
    manifest, killed attempts included); the budget counts it.
    """

    # The seeds' constants, as text: what a StepResult may record. Runtime itself branches on
    # Attempt.end (an AttemptEnd), never on these strings.
    INTERRUPTED = AttemptEnd.INTERRUPTED.value
    HANDOFF_DUE = AttemptEnd.HANDOFF_DUE.value
    STOPPED = AttemptEnd.STOPPED.value
    # The seeds' texts (zh), as the other public constants; a resume sends the current
    # language's (lang "runtime.interrupt_note" and "runtime.carry_on_note").
    INTERRUPT_NOTE = ZH["runtime.interrupt_note"]
    CARRY_ON_NOTE = ZH["runtime.carry_on_note"]
    """What resumes the session after an interrupt with nothing said: without it, a model
    told "the user doesn't want to proceed" stops and waits, and its empty reply would end
    the step (and, under a goal, be judged as a round)."""

    def __init__(
        self,
        *,
        workspace: str | Path,
        run_dir: str | Path = "runs",
        portable: bool = True,
        trim: TrimPolicy | bool = False,
        ephemeral: EphemeralPolicy | bool = True,
        keep_denials: int = 1,
        workbench: Workbench | bool = False,
        spill_threshold: int | None = 4000,
        resilience: Resilience | bool = True,
        handoff: HandoffPolicy | bool = True,
        budget_usd: float | None = None,
    ) -> None:
        self.workspace = Path(workspace).expanduser().resolve()
        if not self.workspace.is_dir():
            raise WorkspaceError(
                self.workspace,
                lang.text("error.workspace_missing", path=shown(self.workspace)),
            )
        if undecodable(self.workspace):
            raise WorkspaceError(
                self.workspace,
                lang.text("error.workspace_undecodable", path=shown(self.workspace)),
            )
        self.run_dir = usable_run_dir(run_dir)
        require_credentials()  # before anything is created: a failed start leaves nothing
        check_state_files(self.run_dir, self.workspace)  # before anything is spent
        self.portable = portable
        self.spill_threshold = spill_threshold
        self.resilience = _policy(resilience, Resilience)
        self.handoff = _policy(handoff, HandoffPolicy)
        self.budget_usd = budget_usd
        RunDir(self.run_dir).create()
        self.workbench: Workbench | None = (
            Workbench(self.workspace, home=RunDir(self.run_dir).workbench)
            if workbench is True
            else workbench or None
        )
        self.store = PruningSessionStore(
            RunDir(self.run_dir).sessions,
            workspace=self.workspace,
            policy=_policy(trim, TrimPolicy, pointer=lang.text("stores.spilled")),
            prune=PrunePolicy(keep_denials=keep_denials, orphan_text=lang.text("stores.orphan")),
            ephemeral=_policy(ephemeral, EphemeralPolicy, text=lang.text("stores.expired")),
        )
        self.store.on_append = self._on_append
        # the temp folders of this workspace's killed runs, what the kill kept from the
        # store taken first (flower.core.catchup)
        sweep(self.workspace, salvage=lambda folder: salvage(self.store, self.workspace, folder))
        self.run_id = this_run_id()
        self.worktrees = Worktrees(self.workspace, self.run_dir, self.run_id)
        self.results: list[StepResult] = []
        self.spent_before = 0.0
        self.writer = ManifestWriter(self.manifest_path, run=self.run_id)
        self._writer_lock = WriterLock(RunDir(self.run_dir).writer(self.run_id))
        self._rows: list[dict[str, Any]] = []  # the finished steps' rows
        self._step: StepResult | None = None  # the step under way
        self._inflight: Attempt | None = None  # its attempt under way
        self._changes = 0
        self.on_session: Callable[[str], None] | None = None
        self._ctx = 0
        self._warned = False
        self._lock = threading.Lock()
        self._live: tuple[asyncio.AbstractEventLoop, ClaudeSDKClient] | None = None
        self._said: str | None = None  # the human's words of a pending interrupt
        self._session: str | None = None  # the session of the attempt under way
        self._emit: EventSink = _ignore  # the step's sink, for "call" (the handoff writer's too)

    @property
    def manifest_path(self) -> Path:
        return RunDir(self.run_dir).manifest

    async def run(
        self,
        spec: AgentSpec,
        prompt: str,
        *,
        step_name: str | None = None,
        resume: str | None = None,
        fork: bool = False,
        resume_at: str | None = None,
        on_event: EventSink | None = None,
    ) -> StepResult:
        """Run one step to its end and account for it (manifest included). A step stopped
        from outside (its task cancelled, e.g. on SIGTERM) is still recorded, as STOPPED."""
        self._require_git_for_isolation(spec)
        result = StepResult(step=step_name or spec.name, started_at=time.time())
        self._ctx, self._warned = 0, False
        self._step, self._inflight = result, None
        await asyncio.to_thread(self._open_row)
        try:
            emit = self._emit = _naming(result.step, on_event or _ignore)
            await self._loop(spec, prompt, result, resume, fork, resume_at, emit)
        except asyncio.CancelledError:
            if self._inflight is not None:  # what it streamed before the stop is spent
                self._account(result, self._inflight, final=False)
            result.error = AttemptEnd.STOPPED.value
            result.session_id = self._session or result.session_id
            self._finish(result)
            self._write_manifest()  # synchronously: this task is being cancelled
            raise
        self._finish(result)
        await asyncio.to_thread(self._write_manifest)
        return result

    def _finish(self, result: StepResult) -> None:
        result.ok = result.error is None
        result.ended_at = time.time()
        self.results.append(result)
        self._rows.append(self._row(result, ENDED))
        self._step = self._inflight = None

    async def _loop(
        self,
        spec: AgentSpec,
        prompt: str,
        result: StepResult,
        resume: str | None,
        fork: bool,
        resume_at: str | None,
        emit: EventSink,
    ) -> None:
        """The attempts of one step, until one of the four exits."""
        number = 0
        failed_at_start: str | None = None  # the last attempt's cause, when it died at start
        fresh = prompt, resume, fork, resume_at  # how this generation's session starts anew
        # One system prompt for every session of the step, handoff generations included: a
        # prompt cache then serves tools + system to each (issue 30); what the workbench
        # gained since goes into the new generation's first prompt instead.
        context = self._workbench_context(spec)
        retired: str | None = None  # the session the current generation took over from
        while True:
            number += 1
            result.attempts = number
            budget = self._budget_left()
            if budget is not None and budget <= 0:
                result.error = lang.text("runtime.budget_spent", budget=f"{self.budget_usd:.2f}")
                break
            given, said_first = await self._hand_on(spec, resume, fork=fork, retired=retired)
            attempt = await self._attempt(
                replace(given, max_budget_usd=_smaller(spec.max_budget_usd, budget)),
                f"{said_first}\n\n{prompt}" if said_first else prompt,
                resume=resume,
                fork=fork,
                resume_at=resume_at,
                on_event=emit,
                context=context,
            )
            self._account(result, attempt)
            said = self._take_interrupt()
            if said is not None:
                attempt.end = AttemptEnd.INTERRUPTED
            if attempt.end is AttemptEnd.INTERRUPTED:  # exit 2: the human interrupted
                if attempt.session_id is None:  # nothing to resume: stop, and say why
                    result.errors += [attempt.error] if attempt.error else []
                    result.error = AttemptEnd.INTERRUPTED.value
                    break
                number -= 1
                resume, fork, resume_at = attempt.session_id, False, None
                prompt = (
                    f"{said}\n\n{lang.text('runtime.interrupt_note')}"
                    if said
                    else lang.text("runtime.carry_on_note")
                )
                result.error = None
                continue
            if attempt.error is None and attempt.end is None:  # exit 1: success
                break
            error = attempt.error or ""
            overflow = attempt.terminal_reason == "prompt_too_long" or is_overflow(error)
            if attempt.end is AttemptEnd.HANDOFF_DUE or (
                self.handoff.enabled and attempt.session_id and overflow
            ):  # exit 3: the context is full
                if len(result.retired) >= self.handoff.max_generations:
                    result.error = (
                        f"the context filled up {len(result.retired) + 1} times: gave up after "
                        f"max_generations={self.handoff.max_generations} handoffs"
                    )
                    break
                handoff = await self._hand_off(
                    spec,
                    result,
                    attempt,
                    prompt,
                    emit,
                    overflow=error if overflow else "",
                    context=context,
                )
                retired = str(attempt.session_id)
                result.retired.append(retired)
                resume_at = await self._fork_point(retired)
                resume, fork = (retired, True) if resume_at else (None, False)
                prompt = handoff.prompt_block() + self._desk_news(context)
                if resume_at:  # its first exchange stays above: say what it is
                    prompt = f"{lang.text('handoff.forked')}\n\n{prompt}"
                fresh = prompt, resume, fork, resume_at
                self._ctx, self._warned = 0, False
                number -= 1
                continue
            # exit 4: a failure, retried if it can be
            result.errors.append(error)
            kind = classify(
                error,
                status=attempt.status,
                kind=attempt.error_kind,
                reason=attempt.terminal_reason,
            )
            cause = attempt.cause if kind == "other" and not attempt.reached_api else None
            if cause is not None and cause == failed_at_start:  # it will not heal: say why
                code = "?" if attempt.exit_code is None else attempt.exit_code
                result.error = lang.text("runtime.will_not_heal", code=code, cause=cause)
                break
            failed_at_start = cause
            if not await self._recover(number, kind, emit):
                break
            if attempt.session_id and await self._answered(attempt.session_id):
                resume, fork, resume_at = attempt.session_id, False, None
                prompt = self.resilience.resume_text()
                result.resumed = True
            elif attempt.session_id:  # nothing answered (or stored) yet: the same start again
                prompt, resume, fork, resume_at = fresh

    async def _answered(self, session_id: str) -> bool:
        """Whether the store holds a reply of the session: a CLI killed before its first
        entry was stored left nothing to resume ("No conversation found"), and one whose
        every request failed (four 529s) left only its prompt, which a resume would send
        again behind a synthetic reply and a "you were cut off" note, the cached prefix
        lost; either is a session to redo, the same request again."""
        found = await asyncio.to_thread(self.store.transcript, session_id)
        return found is not None and any(
            e.get("type") == "assistant" and not is_api_error(e) for e in found.main
        )

    async def _hand_on(
        self, spec: AgentSpec, resume: str | None, *, fork: bool, retired: str | None
    ) -> tuple[AgentSpec, str]:
        """A resumed session whose workers were cut short (a kill, a CLI that died), or a
        new generation whose `retired` predecessor's were (a handoff cut them): `spec` with
        the hook that shows their work to the next worker, and the note that tells the
        session itself (flower.core.cutwork); `spec` and "" when there is none."""
        cut_by_handoff = resume is None or resume == retired  # a new generation starts
        if fork and not cut_by_handoff:
            return spec, ""
        source = retired if cut_by_handoff else resume
        if source is None:
            return spec, ""
        cuts = await asyncio.to_thread(cut_work, self.store, source)
        if not cuts:
            return spec, ""
        hooks = cutwork_hooks(cuts, handoff=cut_by_handoff)
        return replace(spec, hooks=merge_hooks(spec.hooks, hooks)), note(
            cuts, handoff=cut_by_handoff
        )

    async def _fork_point(self, retired: str) -> str | None:
        """Where a new generation forks the session it takes over from: after that
        session's first exchange, so that its first request starts with the prefix the old
        one's requests sent (a prompt cache holds it) and the handoff follows; None: a
        brand-new session (flower.stores.firstturn)."""
        found = await asyncio.to_thread(self.store.transcript, retired)
        return None if found is None else fork_point(found.main)

    def _desk_news(self, shown: str) -> str:
        """The workbench's entries a new generation's system prompt (`shown`, the step's
        first) does not list, as a paragraph for its first prompt ("" when none)."""
        added = self.workbench.added_since(shown) if self.workbench and shown else []
        return "\n\n" + lang.text("workbench.added", entries="\n".join(added)) if added else ""

    def _budget_left(self) -> float | None:
        """What the run may still spend, the runs it continues counted (None: no budget)."""
        if self.budget_usd is None:
            return None
        return self.budget_usd - self.spent_before - self.spent()

    async def _recover(self, number: int, kind: Kind, emit: EventSink) -> bool:
        """Whether to try again after failed attempt `number` (a failure of `kind`); waits as
        long as it takes."""
        policy = self.resilience
        if not policy.enabled or number >= policy.max_attempts or kind == "fatal":
            return False
        delay = policy.delay_for(number)
        emit(
            Event(
                "retry",
                f"attempt {number} failed ({kind}); retrying in {delay:.1f}s",
                payload={"attempt": number, "kind": kind, "delay_s": delay, "source": "flower"},
            )
        )
        if kind == "retry":
            probed = {"source": "probe", "attempt": number}
            notice = lambda line: emit(Event("retry", line, payload=dict(probed)))  # noqa: E731
            if not await policy.wait_online(notice):
                return False
        await asyncio.sleep(delay)
        return True

    async def _hand_off(
        self,
        spec: AgentSpec,
        result: StepResult,
        attempt: Attempt,
        prompt: str,
        emit: EventSink,
        *,
        overflow: str,
        context: str,
    ) -> Handoff:
        """The full session writes its handoff (budget lifted, no UI events; its cost is the
        step's); flower.core.takeover does the rest."""

        async def write(handoff_prompt: str) -> str:
            writer = await self._attempt(
                replace(spec, max_budget_usd=None),
                handoff_prompt,
                resume=attempt.session_id,
                on_event=None,
                watch_context=False,
                context=context,
            )
            self._account(result, writer, final=False)
            return writer.text

        return await take_over(
            step=result.step,
            prompt=prompt,
            used=self._ctx,
            window=self.handoff.window,
            overflow=overflow,
            write=write,
            notes=self.workbench.notes if self.workbench is not None else None,
            emit=emit,
        )

    async def _attempt(
        self,
        spec: AgentSpec,
        prompt: str,
        *,
        resume: str | None = None,
        fork: bool = False,
        resume_at: str | None = None,
        on_event: EventSink | None,
        watch_context: bool = True,
        context: str,
    ) -> Attempt:
        """One CLI session, from connect to idle, its system prompt ending with `context`.
        SDK failures become attempt.error."""
        baseline = 0.0
        if resume:
            # total_cost_usd is cumulative per session, across resumes: this attempt costs
            # the increase over what the resumed transcript had recorded before it.
            usage = await asyncio.to_thread(self.store.usage, resume)
            baseline = (usage.cost_usd or 0.0) if usage else 0.0
        attempt = Attempt(baseline=baseline, since=time.time())
        self._inflight = attempt
        stop = HandoffStop() if watch_context and self.handoff.enabled else None
        if stop is not None:  # a handoff lets the response's calls finish (handoffstop)
            spec = replace(spec, hooks=merge_hooks(spec.hooks, stop.hooks()))
        options = build_options(
            self._session_spec(spec),
            cwd=self.workspace,
            session_store=self.store,
            resume=resume,
            fork=fork,
            resume_at=resume_at,
            portable=self.portable,
            context=context,
        )
        options.stderr = attempt.stderr  # the cause, when the CLI dies before it says anything
        handoff_due = False
        try:
            async with ClaudeSDKClient(options) as client:
                self._go_live(client)
                await client.query(prompt)
                try:
                    async for message in client.receive_messages():
                        self._take(message, attempt, on_event)
                        if watch_context and not handoff_due:
                            handoff_due = await self._watch_context(
                                client, attempt, on_event, stop, message
                            )
                        elif stop is not None and stop.overrun(message):
                            await client.interrupt()  # no hook ended the turn: stop it now
                        if attempt.done or (stop is not None and stop.halted and attempt.results):
                            break
                except asyncio.CancelledError:
                    await self._settle_on_stop(client, attempt, on_event)
                    raise
        except ClaudeSDKError as exc:
            attempt.error = f"{type(exc).__name__}: {exc}"  # the text recorded, as before
            if isinstance(exc, ProcessError):
                attempt.exit_code = exc.exit_code
            if isinstance(exc, ResultError):  # and what the SDK knows, kept as data
                attempt.status = exc.api_error_status or attempt.status
                attempt.terminal_reason = exc.terminal_reason or attempt.terminal_reason
        finally:
            with self._lock:
                self._live = None
        if handoff_due and (attempt.aborted or (stop is not None and stop.halted)):
            attempt.end = AttemptEnd.HANDOFF_DUE
        return attempt

    def _take(self, message: Any, attempt: Attempt, on_event: EventSink | None) -> None:
        for event in normalize(message):
            self._observe(attempt, event)
            if on_event is not None:
                on_event(event)

    async def _settle_on_stop(
        self, client: ClaudeSDKClient, attempt: Attempt, on_event: EventSink | None
    ) -> None:
        """The step is being stopped mid-turn: interrupt the CLI and take its result, whose
        running total counts the calls in flight (their input is billed once their stream
        opened), so the accounts hold what the API served. Bounded: a CLI that does not
        answer in SETTLE_ON_STOP_S is stopped all the same."""
        settled = attempt.results + 1
        with contextlib.suppress(TimeoutError, ClaudeSDKError, OSError):
            async with asyncio.timeout(SETTLE_ON_STOP_S):
                await client.interrupt()
                async for message in client.receive_messages():
                    self._take(message, attempt, on_event)
                    if attempt.results >= settled:
                        return

    async def _watch_context(
        self,
        client: ClaudeSDKClient,
        attempt: Attempt,
        on_event: EventSink | None,
        stop: HandoffStop | None,
        message: Any,
    ) -> bool:
        """Emit "near" once per generation at warn_at; at `at`, have the turn end once the
        calls of `message`'s response are done (`stop`), or stop it at once (no `stop`)."""
        policy = self.handoff
        if not policy.enabled:
            return False
        about = {"context": self._ctx, "window": policy.window}
        if self._ctx >= policy.warn_at and not self._warned:
            self._warned = True
            if on_event is not None:
                text = lang.text(
                    "runtime.near_handoff", used=self._ctx, window=policy.window, at=policy.at
                )
                on_event(Event("handoff", text, payload={"phase": "near", **about}))
        if self._ctx < policy.at:
            return False
        if stop is None:
            await client.interrupt()
        else:
            stop.arm(getattr(message, "message_id", None))
        return True

    def interrupt(self, text: str = "") -> None:
        """Stop the running step at the next message boundary and resume the same session
        with `text` (callable from any thread; the empty string just interrupts)."""
        with self._lock:
            self._said = text
            live = self._live
        if live is not None:
            loop, client = live
            asyncio.run_coroutine_threadsafe(client.interrupt(), loop)

    def _go_live(self, client: ClaudeSDKClient) -> None:
        with self._lock:
            self._live = (asyncio.get_running_loop(), client)
            pending = self._said is not None
        if pending:
            asyncio.get_running_loop().create_task(client.interrupt())

    def _take_interrupt(self) -> str | None:
        with self._lock:
            said, self._said = self._said, None
        return said

    def _session_spec(self, spec: AgentSpec) -> AgentSpec:
        return session_spec(
            spec,
            workbench=self.workbench,
            spill_threshold=self.spill_threshold,
            resilience=self.resilience,
            handoff=self.handoff,
            worktrees=self.worktrees,
        )

    def _workbench_context(self, spec: AgentSpec) -> str:
        """The workbench index and rules, for sessions that use the workbench."""
        return self.workbench.prompt_block() if self.workbench and spec.workbench else ""

    def _require_git_for_isolation(self, spec: AgentSpec) -> None:
        """Fail before any money is spent: the Agent tool would only say so mid-run."""
        marked = [name for name, a in (spec.agents or {}).items() if wants_isolation(a)]
        if marked and not in_git_repository(self.workspace):
            raise WorkspaceError(
                self.workspace,
                lang.text("error.isolated_not_git", worker=repr(marked[0]), path=self.workspace),
            )
        if marked and git(self.workspace, "rev-parse", "--verify", "-q", "HEAD").returncode:
            raise WorkspaceError(
                self.workspace,
                lang.text("error.isolated_no_commit", worker=repr(marked[0]), path=self.workspace),
            )

    def _observe(self, attempt: Attempt, event: Event) -> None:
        known = attempt.session_id
        attempt.observe(event)
        self._ctx = attempt.context
        if attempt.session_id and attempt.session_id != known:
            self._session = attempt.session_id
            if self.on_session is not None:
                self.on_session(attempt.session_id)
        self._offer_rows(attempt)
        if event.kind == "result":  # what the run has cost, for whoever shows it
            event.payload["run_cost_usd"] = round(self.spent(), 6)
        elif event.kind == "session":  # what its context fills, for a level in percent
            event.payload["window"] = self.handoff.window

    def _on_append(self, key: Any, entries: list[Any]) -> None:
        """The SDK stored transcript entries: complete responses of the attempt under way."""
        attempt = self._inflight
        if attempt is not None:
            attempt.observe_entries(entries)
            self._offer_rows(attempt)
            self._report_calls(attempt)

    def _report_calls(self, attempt: Attempt) -> None:
        """A "call" Event per API response now complete: its final tokens and exact cost, what
        a trace's model-call span carries (flower.core.trace)."""
        done, attempt.spend.completed = attempt.spend.completed, []
        for message_id, model, usage in done:
            tokens = {name: token_count(usage.get(name)) for name in TOKEN_FIELDS}
            cost = round(call_cost(model, usage), 9)
            payload = {"message_id": message_id, "model": model, "usage": tokens, "cost_usd": cost}
            self._emit(Event("call", f"{model}: ${cost:.6f}", payload=payload))

    def _offer_rows(self, attempt: Attempt) -> None:
        """New usage, a result, a session: have the running row rewritten."""
        if attempt.changes != self._changes:
            self._changes = attempt.changes
            self.writer.offer(self._manifest_rows())

    def _account(self, result: StepResult, attempt: Attempt, *, final: bool = True) -> None:
        """Fold an attempt's cost and turns into the step. A final attempt (not the handoff
        writer) also sets where the step stands: session, context, error, text."""
        result.cost_usd += attempt.cost
        result.num_turns += attempt.turns
        result.usage = _sum_usage(result.usage, attempt)
        if attempt is self._inflight:
            self._inflight = None
        if not final:
            return
        result.session_id = attempt.session_id or result.session_id
        result.context = attempt.context
        result.error = attempt.error
        if attempt.error is None:
            result.text = attempt.text

    def total_cost(self) -> float:
        """Cost of every step this Runtime ran."""
        return sum(r.cost_usd for r in self.results)

    def spent(self) -> float:
        """What this run has cost so far: every step this Runtime ran, and the step under way
        with its attempt in flight. The figure the live line, the end line and the run's
        document show (with `spent_before`, the runs it continues, the budget counts it)."""
        step = self._live_step()
        return self.total_cost() + (step.cost_usd if step else 0.0)

    def _row(self, result: StepResult, state: str) -> dict[str, Any]:
        row = manifest_row(result, run=self.run_id)
        row.update(state=state, pid=os.getpid(), host=_HOST)
        return row

    def _manifest_rows(self) -> list[dict[str, Any]]:
        """The finished steps' rows, then the running step's."""
        live = self._live_step()
        return list(self._rows) if live is None else [*self._rows, self._row(live, RUNNING)]

    def _live_step(self) -> StepResult | None:
        """The step under way as it stands now, the attempt in flight included."""
        step = self._step
        if step is None:
            return None
        live = replace(step)
        attempt = self._inflight
        if attempt is not None:
            live.cost_usd += attempt.cost
            live.num_turns += attempt.turns
            live.usage = _sum_usage(step.usage, attempt)
            live.session_id = attempt.session_id or step.session_id
        return live

    def _open_row(self) -> None:
        """The step's row, written before its first attempt starts (under a writer lock a
        reader can tell dead from alive by)."""
        self._writer_lock.hold()
        self.writer.write(self._manifest_rows())

    def _write_manifest(self) -> None:
        self.writer.write(self._manifest_rows())

    async def catch_up(self, session_id: str) -> None:
        """Copy into the store what the CLI's own transcript of `session_id` (on this
        machine, in its config folder) holds and the store does not: a kill lands before the
        CLI's mirror has sent its latest entries (a question waiting for a human, a tool's
        result), and a wake would resume without them or not at all (issue 30). Entries
        are matched by uuid, so this is safe to repeat; no local transcript, nothing done."""
        await asyncio.to_thread(catch_up, self.store, self.workspace, session_id)

    def close(self) -> None:
        """Close the session store's connection; stop the manifest's background writer."""
        self.writer.close()
        self._writer_lock.release()
        self.store.close()


def usable_run_dir(run_dir: str | Path) -> Path:
    """`run_dir` as an absolute path, or a RunDirError if it cannot be one (it is a file)."""
    path = Path(run_dir).expanduser()
    path = path if path.is_absolute() else (Path.cwd() / path).resolve()
    if undecodable(path):
        raise RunDirError(path, lang.text("error.run_dir_undecodable", path=shown(path)))
    if path.exists() and not path.is_dir():
        raise RunDirError(path, lang.text("error.run_dir_is_file", path=path))
    return path


def manifest_row(result: StepResult, *, run: str) -> dict[str, Any]:
    """asdict(StepResult) plus two corrections: the run id, and text capped for the ledger."""
    row = asdict(result)
    row["run"] = run
    row["text"] = result.text[:MANIFEST_TEXT_LIMIT]
    return row


def _sum_usage(usage: dict[str, int], attempt: Attempt) -> dict[str, int]:
    spend = attempt.spend
    total = {"api_calls": usage.get("api_calls", 0) + spend.api_calls}
    for name in TOKEN_FIELDS:
        total[name] = usage.get(name, 0) + spend.usage[name]
    return total


_HOST = socket.gethostname()


def _smaller(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _ignore(event: Event) -> None:
    """The event sink when the caller gave none."""


def _naming(step: str, sink: EventSink) -> EventSink:
    """`sink`, with the step named in the events Runtime answers for (seed 004: retry carries
    `step, attempt`, handoff `phase, step, context, window`), the CLI's own retries included."""

    def named(event: Event) -> None:
        if event.kind in ("retry", "handoff"):
            event.payload.setdefault("step", step)
        sink(event)

    return named


def _policy(value: Any, kind: type[Any], **texts: str) -> Any:
    """True -> the policy's defaults with `texts` (the model's lines in the current
    language), False -> disabled, an instance -> itself."""
    if isinstance(value, kind):
        return value
    return kind(enabled=bool(value), **texts)
