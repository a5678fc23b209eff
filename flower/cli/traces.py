"""A command's run as an OpenTelemetry trace, when OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT asks
for one (docs/deployment.md, "Traces"): checked before the run, sent once it ends, built from
what the run wrote (its events file and manifest rows: flower.core.trace) so that the trace
and `flower report` tell the same story. Unset, nothing of OpenTelemetry is imported.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from flower.core.otlp import (
    check_traces,
    credential_redactor,
    export_trace,
    trace_content_wanted,
    traces_wanted,
)
from flower.core.timeline import read_below
from flower.core.trace import build_trace, read_event_lines, read_run_rows

__all__ = ["send_trace", "traces_checked"]


def traces_checked() -> bool:
    """Whether this run is to be traced; a UsageError (exit 2, before anything is spent) when
    it is and cannot be: the extra missing, a protocol the exporter does not speak."""
    if not traces_wanted():
        return False
    check_traces()
    return True


def send_trace(console: Console, *, run_dir: Path, run_id: str, events: Path) -> None:
    """Export run `run_id`'s trace and say so in a line (its trace id); a receiver that
    refuses it costs a yellow line, never the run's exit code."""
    try:
        rows = read_run_rows(read_below(run_dir), run_id)
        lines = read_event_lines(read_below(events.parent), [events.name])
        content, redact = trace_content_wanted(), credential_redactor()
        sent, line = export_trace(build_trace(run_id, lines, rows, content=content, redact=redact))
    except Exception as exc:  # noqa: BLE001 - the run is over; its trace must not change its exit
        sent, line = False, f"traces: the run's trace was not sent ({type(exc).__name__}: {exc})"
    console.print(line, style="dim" if sent else "yellow", markup=False)
