"""Render: Event -> terminal. Changing the UI means replacing this one class.

Main text as it comes; each tool call on one line; subagent lines indented and dimmed;
errors, retries, resets and handoffs on lines of their own; a one-line summary per result.
Unknown kinds are ignored (the Event kinds grow; a renderer keeps an else branch).
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from flower.core.events import Event

TOOL_RESULT_PREVIEW = 160


class Render:
    """Prints Events to a rich Console (NO_COLOR and non-terminals are handled by rich)."""

    def __init__(self, console: Console | None = None, *, verbose: bool = False) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.verbose = verbose

    def __call__(self, event: Event) -> None:
        sub = bool(event.payload.get("subagent"))
        indent, style = ("    ", "dim") if sub else ("", "")
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
                index, total = event.payload.get("index", 0), event.payload.get("total", 0)
                self.console.rule(f"{event.text} ({index + 1}/{total})")
            case "result":
                self._result(event)
            case _:
                pass

    def _line(self, indent: str, text: str, style: str) -> None:
        body = escape(text)
        self.console.print(f"{indent}[{style}]{body}[/]" if style else f"{indent}{body}")

    def _result(self, event: Event) -> None:
        p = event.payload
        state = "[red]failed[/]" if p.get("is_error") else "[green]done[/]"
        self.console.print(
            f"{state} · {p.get('num_turns', 0)} turns · ${float(p.get('cost_usd') or 0):.4f}",
            style="dim",
        )
