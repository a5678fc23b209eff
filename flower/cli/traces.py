"""A command's run as an OpenTelemetry trace, when OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT asks
for one (docs/deployment.md, "Traces"): checked before the run, sent once it ends, built from
what the run wrote (its events file and manifest rows: flower.core.trace) so that the trace
and `flower report` tell the same story. Unset, nothing of OpenTelemetry is imported.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from flower.core import otlp
from flower.core.timeline import read_below
from flower.core.trace import build, read_lines, read_rows

__all__ = ["send_trace", "traces_checked"]


def traces_checked() -> bool:
    """Whether this run is to be traced; a UsageError (exit 2, before anything is spent) when
    it is and cannot be: the extra missing, a protocol the exporter does not speak."""
    if not otlp.wanted():
        return False
    otlp.check()
    return True


def send_trace(console: Console, *, run_dir: Path, run_id: str, events: Path) -> None:
    """Export run `run_id`'s trace; a receiver that refuses it costs one yellow line, never
    the run's exit code."""
    rows = read_rows(read_below(run_dir), run_id)
    lines = read_lines(read_below(events.parent), [events.name])
    spans = build(run_id, lines, rows, content=otlp.content_wanted(), redact=otlp.redactor())
    problem = otlp.export(spans)
    if problem is not None:
        console.print(problem, style="yellow", markup=False)
