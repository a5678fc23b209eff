"""Times as every machine-readable output of flower and flowerbox writes them."""

from __future__ import annotations

import datetime

__all__ = ["iso_utc"]


def iso_utc(epoch: float | None) -> str | None:
    """A Unix time as ISO-8601 UTC with milliseconds (`2026-12-01T23:04:10.123Z`); None for
    a missing or impossible one (what a box-written file may hold)."""
    if not isinstance(epoch, int | float) or isinstance(epoch, bool) or epoch <= 0:
        return None
    try:
        moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
