"""Render: Event -> terminal. Changing the UI means replacing this one class.

Main text as it comes; each tool call on one line; subagent lines indented and dimmed; step
headers with index/total; retry, reset and handoff lines; questions with their options and
ids; and a status line (step, elapsed, cost, context) after each turn and as a heartbeat
when nothing was printed for a while, so a long run shows progress, not silence. Unknown
kinds are ignored: the Event kinds grow, and a renderer keeps an else branch.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:  # the SDK (behind events) must not load for `flower --help`
    from flower.core.events import Event

TOOL_RESULT_PREVIEW = 160
HEARTBEAT_S = 30.0


class Render:
    """Prints Events to a rich Console (NO_COLOR and non-terminals are handled by rich)."""

    def __init__(
        self,
        console: Console | None = None,
        *,
        verbose: bool = False,
        answer_hint: str | None = None,
    ) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.verbose = verbose
        # How this UI's user answers a question, `{id}` for its id; None says nothing (a
        # renderer must not promise "type your answer" where nobody reads what is typed).
        self.answer_hint = answer_hint
        self.started = time.monotonic()
        self.last_print = self.started
        self.step = ""
        self.context = 0
        self._costs: dict[str, float] = {}  # session -> its running total (cumulative)

    @property
    def cost(self) -> float:
        return sum(self._costs.values())

    def status_line(self) -> str:
        elapsed = int(time.monotonic() - self.started)
        clock = f"{elapsed // 3600:02d}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}"
        step = f"{self.step} · " if self.step else ""
        return f"· {step}{clock} · ${self.cost:.4f} · context {self.context // 1000}k"

    async def heartbeat(self, every: float = HEARTBEAT_S) -> None:
        """Print the status line whenever nothing was printed for `every` seconds."""
        while True:
            await asyncio.sleep(every / 3)
            if time.monotonic() - self.last_print >= every:
                self._line("", self.status_line(), "dim")

    def __call__(self, event: Event) -> None:
        payload = event.payload
        sub = bool(payload.get("subagent"))
        indent, style = ("    ", "dim") if sub else ("", "")
        if not sub and payload.get("context"):
            self.context = int(payload["context"])
        match event.kind:
            case "text":
                self._line(indent, event.text, style)
            case "tool_call":
                self._line(indent, f"[{event.tool}] {event.text}", style or "cyan")
            case "tool_result" if self.verbose:
                preview = event.text.strip().replace("\n", " ")[:TOOL_RESULT_PREVIEW]
                self._line(indent + "  ", f"→ {preview}", "dim")
            case "denied":
                self._line(indent, f"denied: {event.text.strip()}", "yellow")
            case "error":
                self._line(indent, event.text, "bold red")
            case "retry" | "reset" | "handoff":
                self._line(indent, f"~ {event.kind}: {event.text}", "magenta")
            case "step":
                self.step = event.text
                index, total = payload.get("index", 0), payload.get("total", 0)
                woke = " (resumed)" if payload.get("resumed") else ""
                self.console.rule(f"{event.text} ({index + 1}/{total}){woke}")
                self.last_print = time.monotonic()
            case "ask":
                self._ask(event)
            case "task" if "unverifiable" in payload:
                self._line("", f"! {event.text}: {', '.join(payload['unverifiable'])}", "yellow")
            case "result":
                if payload.get("session_id"):
                    self._costs[payload["session_id"]] = float(payload.get("cost_usd") or 0.0)
                self._line("", self.status_line(), "dim")
            case _:
                pass

    def _ask(self, event: Event) -> None:
        payload = event.payload
        if payload.get("kind") == "mail":
            said = "you said" if payload.get("state") == "sent" else "the agent read"
            self._line("", f"✉ {said}: {event.text}", "green")
            return
        ident, state = payload.get("id", "?"), payload.get("state")
        if state == "asked":
            options = payload.get("options") or []
            choices = f"  [{' / '.join(options)}]" if options else ""
            self._line("", f"?? {ident}: {event.text}{choices}", "bold yellow")
            if self.answer_hint:
                self._line("", f"   ({self.answer_hint.replace('{id}', str(ident))})", "yellow")
        else:
            answer = f": {payload.get('answer')}" if payload.get("answer") else ""
            self._line("", f"   {ident} {state}{answer}", "yellow")

    def _line(self, indent: str, text: str, style: str) -> None:
        body = escape(text)
        self.console.print(f"{indent}[{style}]{body}[/]" if style else f"{indent}{body}")
        self.last_print = time.monotonic()
