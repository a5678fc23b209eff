"""The questions a run on a cluster waits on, from its read Job's log (render.read_manifests):
what `ps --on kube` shows, as local ps shows asks.json.

The log is printed by a Pod on the run's claim, which the agent writes: hostile input. It
counts only when its first line is exactly the header of the read the host started (this
run, this read's random tag: another run's or another read's log is no answer), the rest is
at most MAX_ASKS_BYTES of strict JSON, and each question passes the reader local ps uses
(flowerbox.runs.records.pending_of: a dict with a string id, every string cleaned of
terminal controls). Anything else is no question, never an error: a box cannot make ps fail.
"""

from __future__ import annotations

import json
from typing import Any

from flowerbox.box.spec import BoxSpec
from flowerbox.kube.render import asks_header
from flowerbox.runs.records import MAX_ASKS_BYTES, pending_of

__all__ = ["MAX_ASKS_BYTES", "MAX_LOG_BYTES", "pending"]

MAX_LOG_BYTES = MAX_ASKS_BYTES + 1024  # the file, its header, and the one byte that says "cut"


def pending(log: bytes | None, spec: BoxSpec, tag: str) -> list[dict[str, Any]]:
    """The questions in the read Job's `log` (None: it was over MAX_LOG_BYTES)."""
    if log is None:
        return []
    first, _, rest = log.partition(b"\n")
    if first != asks_header(spec, tag).encode() or len(rest) > MAX_ASKS_BYTES:
        return []
    if not rest.strip():
        return []  # no asks.json (or not a regular file): nothing asked
    try:
        value = json.loads(rest.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError included
        return []
    return pending_of(value)
