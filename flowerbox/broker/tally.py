"""Running totals of what the broker has decided, by a small fixed set of keys: what
`flowerbox broker --metrics` reads at each scrape instead of querying the ledger.

    tally = Tally()
    tally.add(("api", "refused", "budget"))
    tally.snapshot()                    # {("api", "refused", "budget"): 1}

`outcome()` sorts one request of the ledger (its status, note and method) into forwarded,
refused or failed, with a cause; `cause()` turns a refusal's cause as the ledger names it
("refused: no token", "malformed (431)") into a label value. Both map anything outside a
short plain vocabulary to `other`, so a note that quotes what a client sent (a malformed
header line, up to a token) never becomes a label, and the number of keys stays bounded.
"""

from __future__ import annotations

import re
import threading
from collections import Counter

__all__ = ["FAILED", "FORWARDED", "REFUSED", "Tally", "cause", "outcome"]

FORWARDED, REFUSED, FAILED = "forwarded", "refused", "failed"
UNREACHABLE = "upstream unreachable"  # the gateway's note when the upstream cannot be reached
_PLAIN = re.compile(r"[a-z0-9][a-z0-9 '_-]{0,47}")
_MALFORMED = re.compile(r"malformed(?: \(\d{3}\))?")

Key = tuple[str, ...]


def cause(text: str) -> str:
    """A refusal's cause as a label value: `refused: ` dropped, a malformed request's status
    dropped (`malformed`), anything not short plain words `other`."""
    text = text.removeprefix("refused: ").strip()
    if _MALFORMED.fullmatch(text):
        return "malformed"
    return text if _PLAIN.fullmatch(text) else "other"


def outcome(status: int | None, note: str | None, method: str | None) -> tuple[str, str]:
    """One ledger row's outcome and cause ("" when forwarded). A row with no method is a
    request that could not be read (its note quotes what it sent): `malformed`."""
    note = note or ""
    if note == UNREACHABLE:
        return FAILED, UNREACHABLE
    if note.startswith("refused"):
        return REFUSED, "malformed" if method is None else cause(note)
    if status is None:
        return FAILED, "other"
    return FORWARDED, ""


class Tally:
    """A thread-safe count per key."""

    def __init__(self) -> None:
        self._counts: Counter[Key] = Counter()
        self._lock = threading.Lock()

    def add(self, key: Key, count: int = 1) -> None:
        with self._lock:
            self._counts[key] += count

    def snapshot(self) -> dict[Key, int]:
        with self._lock:
            return dict(self._counts)
