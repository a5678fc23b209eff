"""Runtime: one verb, run(spec, prompt) -> StepResult. Everything else happens inside it.

Runtime owns the workspace, the session store (always the pruning layer over sessions.db),
the workbench and the policies. It drives the CLI through ClaudeSDKClient (interrupt needs
it, and query() cuts background work at 600 s), ends a step when the CLI reports itself idle
(the one signal that also covers background subagents waking the session for another turn),
and writes manifest.json with append semantics that are safe across processes.

Errors tree:
    RuntimeError       no credentials (the four-line message of check_credentials)
    ValueError         a workspace that is not a folder, a run_dir that is a file; at run(),
                       an isolated worker in a workspace that is not a git repository

Guards are mounted from the AgentSpec (docs/guards.md): whitelist_guard unless the spec is
delegate_only; delegate_guard and isolate_guard as the role asks, with or without a
workbench; index_guard and spill_guard (and the workbench index in the system prompt) only
when this Runtime has a workbench and the spec wants one.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeSDKClient
from claude_agent_sdk._errors import ClaudeSDKError

from flower.core.agent import AgentSpec, build_options
from flower.core.env import check_credentials, load_dotenv
from flower.core.events import Event, normalize
from flower.core.guard import (
    merge_hooks,
    role_hooks,
    wants_isolation,
    whitelist_guard,
    workbench_hooks,
)
from flower.core.manifest import record_rows
from flower.core.workbench import Workbench
from flower.stores import EphemeralPolicy, PrunePolicy, PruningSessionStore, TrimPolicy

EventSink = Callable[[Event], None]

# The CLI cuts Bash output at 30,000 chars before hooks see it, then persists it itself and
# ignores the spill guard's replacement. Raised to the CLI's own cap (150,000) the hook gets
# the whole output and its pointer is what the model sees; beyond that the CLI's
# <persisted-output> stands. Verified in tests/core/test_guard_cli.py.
SPILL_ENV = {"BASH_MAX_OUTPUT_LENGTH": "150000"}

# Manifest rows are a ledger, not a transcript: the full text lives in sessions.db.
MANIFEST_TEXT_LIMIT = 2000


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


class _Attempt:
    """What one CLI session yielded, folded from its Events as they arrive."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.text = ""
        self.error: str | None = None
        self.last_total = 0.0
        self.turns = 0
        self.context = 0
        self.results = 0
        self.baseline = 0.0
        self.idle = False
        self.reports_state = False
        self.tasks: set[str] = set()

    def observe(self, event: Event) -> None:
        payload = event.payload
        match event.kind:
            case "session":
                self.session_id = payload.get("session_id") or self.session_id
            case "text" | "thinking" | "tool_call" if not payload.get("subagent"):
                self.context = payload.get("context", self.context) or self.context
            case "error" if payload.get("synthetic") and not payload.get("subagent"):
                self.error = event.text
            case "task":
                self._track_task(payload)
            case "status" if "state" in payload:
                self.reports_state = True
                self.idle = payload["state"] == "idle"
            case "result":
                self.results += 1
                self.session_id = payload.get("session_id") or self.session_id
                self.last_total = float(payload.get("cost_usd") or 0.0)
                self.turns += int(payload.get("num_turns") or 0)
                if payload.get("is_error"):
                    self.error = (
                        self.error
                        or "; ".join(payload.get("errors") or [])
                        or (f"the CLI ended with {payload.get('terminal_reason') or 'an error'}")
                    )
                else:
                    self.error = None
                    self.text = event.text or self.text

    def _track_task(self, payload: dict[str, Any]) -> None:
        task_id = payload.get("task_id")
        if not task_id:
            return
        if payload.get("status") == "started" and payload.get("task_type") == "local_agent":
            self.tasks.add(task_id)
        elif payload.get("status") in {"notification", "completed", "failed", "killed", "stopped"}:
            self.tasks.discard(task_id)

    @property
    def done(self) -> bool:
        """The step is over: the CLI said idle after a result (or, from a CLI that does not
        report its state, a result arrived with no subagent task still in flight)."""
        if not self.results:
            return False
        return self.idle if self.reports_state else not self.tasks


class Runtime:
    """Holds the workspace, the store and the policies; runs steps."""

    INTERRUPTED = "interrupted-by-human"
    HANDOFF_DUE = "context-full-handoff"
    INTERRUPT_NOTE = (
        "(The human interrupted you to say the above. If a tool call that was in flight came "
        "back as interrupted or cancelled, that is the normal side effect of the interruption, "
        "not a failure of the environment: redo it if it is still needed.)"
    )

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
        resilience: Any = True,
        handoff: Any = True,
    ) -> None:
        self.workspace = Path(workspace).expanduser().resolve()
        if not self.workspace.is_dir():
            raise ValueError(
                f"workspace {self.workspace} is not a folder: create it or pass an existing one"
            )
        self.run_dir = Path(run_dir).expanduser()
        if not self.run_dir.is_absolute():
            self.run_dir = (Path.cwd() / self.run_dir).resolve()
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise ValueError(f"run_dir {self.run_dir} is a file: pass a folder (or a new path)")
        # Credentials before anything is created: a failed start leaves nothing behind.
        load_dotenv()
        if problem := check_credentials():
            raise RuntimeError(problem)
        self.portable = portable
        self.spill_threshold = spill_threshold
        self.resilience = resilience
        self.handoff = handoff
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.workbench: Workbench | None = (
            Workbench(self.workspace, home=self.run_dir / "workbench")
            if workbench is True
            else workbench or None
        )
        self.store = PruningSessionStore(
            self.run_dir / "sessions.db",
            workspace=self.workspace,
            policy=_policy(trim, TrimPolicy),
            prune=PrunePolicy(keep_denials=keep_denials),
            ephemeral=_policy(ephemeral, EphemeralPolicy),
        )
        self.run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.results: list[StepResult] = []
        self.on_session: Callable[[str], None] | None = None
        self._ctx = 0
        self._warned = False

    @property
    def manifest_path(self) -> Path:
        return self.run_dir / "manifest.json"

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
        """Run one step to its end and account for it (manifest included)."""
        self._require_git_for_isolation(spec)
        result = StepResult(step=step_name or spec.name, started_at=time.time())
        self._ctx, self._warned = 0, False
        attempt = await self._attempt(
            spec, prompt, resume=resume, fork=fork, resume_at=resume_at, on_event=on_event
        )
        self._account(result, attempt)
        result.ended_at = time.time()
        self.results.append(result)
        await asyncio.to_thread(self._write_manifest)
        return result

    async def _attempt(
        self,
        spec: AgentSpec,
        prompt: str,
        *,
        resume: str | None,
        fork: bool,
        resume_at: str | None,
        on_event: EventSink | None,
    ) -> _Attempt:
        """One CLI session, from connect to idle. SDK failures become attempt.error."""
        attempt = _Attempt()
        if resume:
            # total_cost_usd is cumulative per session, across resumes: this step's cost is
            # the increase over what the resumed transcript had recorded before it.
            usage = await asyncio.to_thread(self.store.usage, resume)
            attempt.baseline = (usage.cost_usd or 0.0) if usage else 0.0
        hooks, prelude = self._guards(spec)
        spills = self.spill_threshold and spec.workbench and self.workbench is not None
        env = {**SPILL_ENV, **spec.env} if spills else spec.env
        options = build_options(
            replace(spec, hooks=hooks, env=env),
            cwd=self.workspace,
            session_store=self.store,
            resume=resume,
            fork=fork,
            resume_at=resume_at,
            portable=self.portable,
            prelude=prelude,
        )
        try:
            async with ClaudeSDKClient(options) as client:
                await client.query(prompt)
                async for message in client.receive_messages():
                    for event in normalize(message):
                        self._observe(attempt, event)
                        if on_event is not None:
                            on_event(event)
                    if attempt.done:
                        break
        except ClaudeSDKError as exc:
            attempt.error = f"{type(exc).__name__}: {exc}"
        return attempt

    def _guards(self, spec: AgentSpec) -> tuple[dict[str, list[Any]], str]:
        """The hooks mounted for `spec`, and the workbench block for its system prompt."""
        workbench = self.workbench if spec.workbench else None
        if workbench is not None:
            mounted: dict[str, list[Any]] = workbench_hooks(
                workbench,
                delegate_only=spec.delegate_only,
                spill_threshold=self.spill_threshold,
                agents=spec.agents,
                allow_glance=spec.glance,
            )
        else:
            pre = role_hooks(
                delegate_only=spec.delegate_only, allow_glance=spec.glance, agents=spec.agents
            )
            mounted = {"PreToolUse": pre} if pre else {}
        wall = None if spec.delegate_only else whitelist_guard(spec.allowed_tools, role=spec.name)
        hooks = merge_hooks(spec.hooks, mounted, {"PreToolUse": [wall]} if wall else None)
        return hooks, workbench.prompt_block() if workbench else ""

    def _require_git_for_isolation(self, spec: AgentSpec) -> None:
        """Fail before any money is spent: the Agent tool would only say so mid-run."""
        marked = [name for name, a in (spec.agents or {}).items() if wants_isolation(a)]
        if marked and not in_git_repository(self.workspace):
            raise ValueError(
                f"worker {marked[0]!r} is isolated in a git worktree, but {self.workspace} is "
                "not a git repository: run `git init` there, or drop the isolation "
                "(worker(..., isolate=False) / --no-isolate)"
            )

    def _observe(self, attempt: _Attempt, event: Event) -> None:
        known = attempt.session_id
        attempt.observe(event)
        self._ctx = attempt.context
        if attempt.session_id and attempt.session_id != known and self.on_session is not None:
            self.on_session(attempt.session_id)

    def _account(self, result: StepResult, attempt: _Attempt) -> None:
        """Fold one attempt into the step's result."""
        result.session_id = attempt.session_id or result.session_id
        result.cost_usd += max(0.0, attempt.last_total - attempt.baseline)
        result.num_turns += attempt.turns
        result.context = attempt.context
        result.text = attempt.text
        result.error = attempt.error
        result.ok = attempt.error is None and attempt.results > 0
        if attempt.error:
            result.errors.append(attempt.error)

    def total_cost(self) -> float:
        """Cost of every step this Runtime ran."""
        return sum(r.cost_usd for r in self.results)

    def _write_manifest(self) -> None:
        rows = [manifest_row(r, run=self.run_id) for r in self.results]
        record_rows(self.manifest_path, rows, run=self.run_id)

    def close(self) -> None:
        """Close the session store's connection."""
        self.store.close()


def in_git_repository(path: Path) -> bool:
    """True if `path` is inside a git work tree (`.git` is a folder, or a file in worktrees)."""
    return any((folder / ".git").exists() for folder in (path, *path.parents))


def manifest_row(result: StepResult, *, run: str) -> dict[str, Any]:
    """asdict(StepResult) plus two corrections: the run id, and text capped for the ledger."""
    row = asdict(result)
    row["run"] = run
    row["text"] = result.text[:MANIFEST_TEXT_LIMIT]
    return row


def _policy(value: Any, kind: type[Any]) -> Any:
    """True -> the policy's defaults, False -> disabled, an instance -> itself."""
    if isinstance(value, kind):
        return value
    return kind(enabled=bool(value))
