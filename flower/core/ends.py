"""Why Runtime ended an attempt itself, kept apart from the SDK: `flower status` reads these
values back from manifest rows without loading the SDK."""

from __future__ import annotations

from enum import Enum


class AttemptEnd(Enum):
    """Why Runtime ended an attempt itself: control flow, not a failure of the CLI. The
    values are the seeds' Runtime constants (STOPPED is what a cancelled step records as its
    StepResult.error)."""

    INTERRUPTED = "interrupted-by-human"  # resume the same session with the human's words
    HANDOFF_DUE = "context-full-handoff"  # the context reached the handoff line
    STOPPED = "stopped-from-outside"  # the step's task was cancelled (SIGTERM, SIGHUP)
