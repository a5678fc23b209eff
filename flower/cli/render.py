"""Render: Event -> terminal. Changing the UI means replacing this one class.

Main text as it comes; each tool call on one line; subagent lines indented and dimmed; step
headers with index/total (and the round, for a step that has several); retry, reset and
handoff lines; questions with their options and ids. And a status line a user reads at a
glance: step i/n, round i/n, elapsed, cost, context as a share of the window, and the
questions waiting for an answer. On a terminal it is a live line below the output (rich
Live), redrawn every second; elsewhere it is printed after each turn and as a heartbeat when
nothing was printed for a while, so a long run shows progress, not silence.

The cost is the run's, as Runtime accounts for it: asked of Runtime itself when it runs in
this process (`spent`), else the latest figure result events carry (`run_cost_usd`, e.g. for
`flowerbox attach`). Unknown kinds are ignored: the Event kinds grow, and a renderer keeps
an else branch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from flower.core.labels import display_name
from flower.core.lang import text

if TYPE_CHECKING:  # the SDK (behind events) must not load for `flower --help`
    from rich.live import Live

    from flower.core.events import Event

TOOL_RESULT_PREVIEW = 160
HEARTBEAT_S = 30.0
LIVE_REFRESH_S = 1.0


class Render:
    """Prints Events to a rich Console (NO_COLOR and non-terminals are handled by rich).

    spent: where the run's cost comes from when Runtime runs in this process
    (`Runtime.spent`); without it, from the events. answer_hint: how this UI's user answers
    a question, `{id}` standing for its id; None says nothing (a renderer must not promise
    "type your answer" where nobody reads what is typed).
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        verbose: bool = False,
        spent: Callable[[], float] | None = None,
        answer_hint: str | None = None,
    ) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.verbose = verbose
        self.spent = spent
        self.answer_hint = answer_hint
        self.started = time.monotonic()
        self.last_print = self.started
        self.step = ""
        self.steps = (0, 0)  # the step's index (from 1) and how many there are
        self.rounds = (0, 0)  # its round and how many it may take; (0, 0): one attempt only
        self.context = 0
        self.window = 0  # the context window Runtime hands off against, once told
        self.waiting: dict[str, None] = {}  # the ids of the questions asked and not answered
        self._cost = 0.0  # the latest figure an event carried
        self._live: Live | None = None

    @property
    def cost(self) -> float:
        return self.spent() if self.spent is not None else self._cost

    def status_line(self, width: int | None = None) -> str:
        """The live line; within `width` cells, the least needed parts go first (the
        context, the clock, the round, the step), never the cost or what waits for you."""
        elapsed = int(time.monotonic() - self.started)
        parts: list[tuple[str, str]] = []
        if self.step:
            index, total = self.steps
            parts.append(("step", f"{self.step} {index}/{total}" if total else self.step))
        if self.rounds[1]:
            parts.append(("round", text("live.round", index=self.rounds[0], total=self.rounds[1])))
        clock = f"{elapsed // 3600:02d}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}"
        parts += [("clock", clock), ("cost", f"${self.cost:.4f}")]
        if self.window:
            share = 100 * self.context / self.window
            amount = f"{share:.0f}%" if share >= 10 else f"{share:.1f}%"
        else:
            amount = f"{self.context // 1000}k"
        context = text("live.context", amount=amount)
        parts.append(("context", context))
        if self.waiting:
            parts.append(("waiting", text("status.waiting_for", ids=", ".join(self.waiting))))
        line = "· " + " · ".join(text for _, text in parts)
        for least in ("context", "clock", "round", "step"):
            if width is None or cell_len(line) < width:
                break
            parts = [part for part in parts if part[0] != least]
            line = "· " + " · ".join(text for _, text in parts)
        return line

    async def heartbeat(self, every: float = HEARTBEAT_S) -> None:
        """Keep the status line in view until cancelled: live below the output on a
        terminal (its last state stays), else printed whenever nothing was for `every` s."""
        import asyncio  # lazy: a run's loop has loaded it; `flower --help` needs none

        if self.console.is_terminal:
            await self._live_line()
            return
        while True:
            await asyncio.sleep(every / 3)
            if time.monotonic() - self.last_print >= every:
                self._line("", self.status_line(), "dim")

    async def _live_line(self) -> None:
        import asyncio  # lazy: as in heartbeat

        from rich.live import Live  # lazy: only a terminal gets the live line

        # Drawn afresh at every refresh: each second, and after each event.
        with Live(console=self.console, auto_refresh=False, get_renderable=self._status) as live:
            self._live = live
            try:
                while True:
                    live.refresh()
                    await asyncio.sleep(LIVE_REFRESH_S)
            finally:
                self._live = None  # Live's last redraw, as it stops, keeps the end state

    def __call__(self, event: Event) -> None:
        payload = event.payload
        sub = bool(payload.get("subagent"))
        indent, style = ("    ", "dim") if sub else ("", "")
        if not sub and (level := _count(payload.get("context"))):
            self.context = level
        if isinstance(payload.get("run_cost_usd"), int | float):  # an event log is data
            self._cost = float(payload["run_cost_usd"])
        match event.kind:
            case "text":
                self._line(indent, event.text, style)
            case "tool_call":
                self._line(indent, f"[{event.tool}] {event.text}", style or "cyan")
            case "tool_result" if self.verbose:
                preview = event.text.strip().replace("\n", " ")[:TOOL_RESULT_PREVIEW]
                self._line(indent + "  ", f"→ {preview}", "dim")
            case "denied":
                self._line(indent, text("live.denied", text=event.text.strip()), "yellow")
            case "error":
                self._line(indent, event.text, "bold red")
            case "retry" | "reset" | "handoff":
                self._line(indent, f"~ {event.kind}: {event.text}", "magenta")
            case "session" if _count(payload.get("window")):
                self.window = payload["window"]
            case "step":
                self._step(event)
            case "ask":
                self._ask(event)
            case "task" if isinstance(payload.get("unverifiable"), list):
                unverifiable = ", ".join(map(str, payload["unverifiable"]))
                self._line("", f"! {event.text}: {unverifiable}", "yellow")
            case "result" if self._live is None:
                self._line("", self.status_line(), "dim")
            case _:
                pass
        if self._live is not None:
            self._live.refresh()  # the line below the output follows every event

    def _status(self) -> Text:
        return Text(self.status_line(self.console.width), style="dim")

    def _step(self, event: Event) -> None:
        payload = event.payload
        self.step = display_name(event.text)
        self.steps = (_count(payload.get("index")) + 1, _count(payload.get("total")))
        self.rounds = (_count(payload.get("round")), _count(payload.get("rounds")))
        title = f"{self.step} ({self.steps[0]}/{self.steps[1]})"
        if self.rounds[1]:
            title += " · " + text("live.round", index=self.rounds[0], total=self.rounds[1])
        if payload.get("resumed"):
            title += text("live.resumed")
        self.console.rule(escape(title))
        self.last_print = time.monotonic()

    def _ask(self, event: Event) -> None:
        payload = event.payload
        if payload.get("kind") == "mail":
            said = "live.you_said" if payload.get("state") == "sent" else "live.agent_read"
            self._line("", f"✉ {text(said, text=event.text)}", "green")
            return
        ident, state = str(payload.get("id", "?")), payload.get("state")
        if state == "asked":
            self.waiting[ident] = None
            options = payload.get("options") if isinstance(payload.get("options"), list) else []
            choices = f"  [{' / '.join(map(str, options))}]" if options else ""
            self._line("", f"?? {ident}: {event.text}{choices}", "bold yellow")
            if self.answer_hint:
                self._line("", f"   ({self.answer_hint.replace('{id}', ident)})", "yellow")
        else:
            self.waiting.pop(ident, None)
            answer = f": {payload.get('answer')}" if payload.get("answer") else ""
            self._line("", f"   {ident} {state}{answer}", "yellow")

    def _line(self, indent: str, text: str, style: str) -> None:
        body = escape(text)
        self.console.print(f"{indent}[{style}]{body}[/]" if style else f"{indent}{body}")
        self.last_print = time.monotonic()


def _count(value: object) -> int:
    """A payload's count as a number to show: anything but a non-negative int is 0 (an event
    log from another process, a box's, is data, never trusted to be well formed)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
