"""Where a box's start goes (issue 31): the moments of the host's side of one start, kept in
the run's record as `start_phases` so that bench.box prints them next to the first API request.

    startclock.mark("gateway listening")
    startclock.moments()  # [("cli ready", 1765100000.12), ...]: epoch seconds, in order

One flowerbox process starts at most one box, so the moments are the process's own.
"""

from __future__ import annotations

import time

__all__ = ["mark", "moments"]

_MOMENTS: list[tuple[str, float]] = []


def mark(name: str) -> None:
    """`name` happened now."""
    _MOMENTS.append((name, time.time()))


def moments() -> list[tuple[str, float]]:
    return list(_MOMENTS)
