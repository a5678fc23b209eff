"""`--events PATH`: a run's Events as JSON lines, for a reader in another process.

flowerbox passes it to the flower inside a box so that `flowerbox logs` and `attach` can render
a detached run from the host. One object per line, flushed as it is written, so a follower
never waits for a buffer and reads at most one unfinished line:

    {"t": 1764470000.12, "kind": "tool_call", "text": "...", "tool": "Bash", "payload": {...}}

`raw` (the SDK object) is never written; a payload value JSON cannot hold becomes its str().
`Event.from_json` reads a line's object back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from flower.core.events import Event
from flower.core.lang import text
from flower.errors import UsageError

EventSink = Callable[[Event], Any]


class EventLog:
    """Appends each Event it is called with to `path` as one JSON line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file: IO[str] = path.open("a", encoding="utf-8")
        except OSError as exc:
            raise UsageError(
                text("cli.events_unwritable", path=path, problem=exc.strerror)
            ) from exc

    def __call__(self, event: Event) -> None:
        self._file.write(
            json.dumps(
                {"t": round(time.time(), 3), **event.to_json()}, ensure_ascii=False, default=str
            )
            + "\n"
        )
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def tee(*sinks: EventSink | None) -> EventSink:
    """One sink that hands each Event to every given sink (None ones skipped)."""
    live = [sink for sink in sinks if sink is not None]

    def each(event: Event) -> None:
        for sink in live:
            sink(event)

    return each
