"""Attempt: what one CLI session yielded, folded from its Events as they arrive.

Runtime starts one Attempt per connection to the CLI (a first try, a resume after a fault or
an interrupt, a new generation after a handoff) and reads from it whether the step is over,
how it ended, what it cost and how full the context is.

What it cost is `spend` (flower.core.spend): every API response of the session or one of its
subagents, priced one call at a time, and the CLI's own figure at each result.

A failure stays data: `error` is the text shown and recorded, `status`, `error_kind` and
`terminal_reason` are what the SDK said (resilience.classify reads them first), and `end`
says why Runtime itself ended the attempt, never mixed into the error text. A CLI that exited
leaves its `exit_code` and the last lines of its stderr (`said`), which the SDK's own error
only points to ("Check stderr output for details"): the cause, when it died at start.
"""

from __future__ import annotations

import sys
from collections import deque
from typing import Any

from flower.core.ends import AttemptEnd
from flower.core.events import Event
from flower.core.spend import Spend

ABORTED = frozenset({"aborted_streaming", "aborted_tools"})
TASK_ENDS = frozenset({"notification", "completed", "failed", "killed", "stopped"})
STDERR_LINES = 20  # the CLI's stderr kept per attempt: enough for a traceback's last lines


class Attempt:
    """The running account of one CLI session (one `ClaudeSDKClient` connection)."""

    def __init__(self, *, baseline: float = 0.0, since: float = 0.0) -> None:
        self.spend = Spend(baseline=baseline, since=since)
        self.session_id: str | None = None
        self.text = ""
        self.error: str | None = None
        self.status: int | None = None  # HTTP status of the failing API call
        self.error_kind: str | None = None  # AssistantMessage.error: "rate_limit", ...
        self.terminal_reason: str | None = None  # "api_error", "max_turns", ...
        self.end: AttemptEnd | None = None
        self.exit_code: int | None = None  # the CLI process's, when it failed
        self.said: deque[str] = deque(maxlen=STDERR_LINES)  # the CLI's last stderr lines
        self.turns = 0
        self.context = 0
        self.results = 0
        self.aborted = False
        self.idle = False
        self.reports_state = False
        self.tasks: set[str] = set()
        self.changes = 0  # bumped whenever usage, cost or the session changed

    @property
    def cost(self) -> float:
        """What this attempt has spent so far (flower.core.spend)."""
        return self.spend.cost

    @property
    def done(self) -> bool:
        """The CLI said idle after a result (or, from a CLI that does not report its state,
        a result arrived with no subagent task still in flight)."""
        if not self.results:
            return False
        return self.idle if self.reports_state else not self.tasks

    @property
    def reached_api(self) -> bool:
        """Whether any API response (or a result) came back in this attempt."""
        return bool(self.spend.api_calls or self.results)

    @property
    def cause(self) -> str:
        """The CLI's last non-empty stderr line, else the error text's first line."""
        lines = [line.strip() for line in self.said if line.strip()]
        return lines[-1] if lines else (self.error or "").strip().split("\n", 1)[0]

    def stderr(self, line: str) -> None:
        """A line the CLI wrote to stderr: kept, and shown where it would have gone (this
        process's stderr, which the CLI shares when nobody reads its own)."""
        self.said.append(line)
        print(line, file=sys.stderr, flush=True)

    def observe(self, event: Event) -> None:
        payload = event.payload
        if event.kind in ("text", "thinking", "tool_call"):
            self.changes += self.spend.event(payload)
        match event.kind:
            case "session":
                known = self.session_id
                self.session_id = payload.get("session_id") or self.session_id
                self.changes += self.session_id != known
            case "text" | "thinking" | "tool_call" if not payload.get("subagent"):
                self.context = payload.get("context") or self.context
            case "reset":
                self.context = int(payload.get("post_tokens") or 0)
            case "error" if payload.get("synthetic") and not payload.get("subagent"):
                self.error = event.text
                self.error_kind = payload.get("error") or self.error_kind
            case "task":
                self._track_task(payload)
            case "status" if "state" in payload:
                self.reports_state = True
                self.idle = payload["state"] == "idle"
            case "result":
                self._result(event.text, payload)

    def observe_entries(self, entries: list[dict[str, Any]]) -> None:
        """Transcript entries the SDK mirrored to the store (a response's final usage)."""
        self.changes += self.spend.entries(entries)

    def _result(self, text: str, payload: dict[str, Any]) -> None:
        self.results += 1
        self.changes += 1
        self.session_id = payload.get("session_id") or self.session_id
        self.spend.settle(float(payload.get("cost_usd") or 0.0))
        self.turns += int(payload.get("num_turns") or 0)
        self.aborted = payload.get("terminal_reason") in ABORTED
        if payload.get("is_error"):
            status = payload.get("api_error_status")
            self.status = status if isinstance(status, int) else self.status
            self.terminal_reason = payload.get("terminal_reason") or self.terminal_reason
            self.error = (
                self.error
                or "; ".join(payload.get("errors") or [])
                or f"the CLI ended with {self.terminal_reason or 'an error'}"
            )
        else:
            self.error = self.status = self.error_kind = self.terminal_reason = None
            self.text = text or self.text

    def _track_task(self, payload: dict[str, Any]) -> None:
        task_id = payload.get("task_id")
        if not task_id:
            return
        if payload.get("status") == "started" and payload.get("task_type") == "local_agent":
            self.tasks.add(task_id)
        elif payload.get("status") in TASK_ENDS:
            self.tasks.discard(task_id)
