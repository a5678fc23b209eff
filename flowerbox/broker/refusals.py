"""What a refusal that names no live run costs: a count, never a row or a line of its own.

    refusals = Refusals(ledger, line)
    refusals.count("api", "refused: no token", peer="10.0.3.7", detail="no token; send ...")
    refusals.flush()      # also done at most once a second by `count`, and by `due()`

Anyone who reaches the broker's ports can send requests without a token (or with a revoked
one, or a malformed head) as fast as the network allows. Each is counted in memory per
minute, listener, cause, peer and run (`-` for none), and the counts are added to the
ledger's `refusals` table in one transaction at most once a second: its size grows with the
minutes and the distinct keys, not with the requests. The causes are a fixed vocabulary
(the caller's); at most `PEERS` peers a minute are told apart (the rest count as `other`).
The first refusal of a key in a minute is said on the log, redacted and cut short, up to
`LINES` lines a minute; the first refusal of the next minute brings one line summing up the
minute before.

A refusal counted but not yet flushed is lost with the process (a second at most): unlike
a run's request, no money depends on it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime

from flowerbox.broker.ledger import Ledger

__all__ = ["LINES", "PEERS", "LineBudget", "Refusals"]

PEERS = 64  # peers told apart in a minute
LINES = 20  # first-refusal lines in a minute
FLUSH_EVERY = 1.0  # seconds
Key = tuple[str, str, str, str, str]  # minute, listener, cause, peer, run id


class Refusals:
    """The counts, shared by the broker's listeners (thread-safe)."""

    def __init__(self, ledger: Ledger, line: Callable[[str], None]) -> None:
        self.ledger = ledger
        self.line = line
        self._pending: Counter[Key] = Counter()
        self._minute = ""
        self._seen: set[Key] = set()
        self._peers: set[str] = set()
        self._total = 0
        self._lines = 0
        self._flushed = time.monotonic()
        self._lock = threading.Lock()

    def count(
        self, listener: str, cause: str, *, peer: str, run_id: str = "-", detail: str = ""
    ) -> None:
        """One refusal; `detail` (what the client was told) goes on the log once a key."""
        minute = datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ")
        with self._lock:
            ended = self._roll(minute)
            if peer not in self._peers and len(self._peers) >= PEERS:
                peer = "other"
            self._peers.add(peer)
            key = (minute, listener, cause, peer, run_id)
            self._pending[key] += 1
            self._total += 1
            said = key in self._seen or self._lines >= LINES
            self._seen.add(key)
            self._lines += not said
        if ended:
            self.line(ended)
        if not said:
            shown = f"; {detail}" if detail else ""
            run = "" if run_id == "-" else f" (run {run_id})"
            self.line(f"{listener}: {cause} from {peer}{run}{shown} (more this minute are counted)")
        self.due()

    def due(self) -> None:
        """Flush if the last flush is a second old (the servers' loops call this too)."""
        if time.monotonic() - self._flushed >= FLUSH_EVERY:
            self.flush()

    def pending(self) -> dict[tuple[str, str], int]:
        """The counts not flushed yet, per listener and cause."""
        counted: Counter[tuple[str, str]] = Counter()
        with self._lock:
            for (_, listener, cause, _, _), count in self._pending.items():
                counted[listener, cause] += count
        return dict(counted)

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, Counter()
            self._flushed = time.monotonic()
        if pending:
            self.ledger.count_refusals(dict(pending))

    def _roll(self, minute: str) -> str:
        """Start a new minute (under the lock); the line that sums up the one that ended."""
        if minute == self._minute:
            return ""
        ended = self._minute
        total, self._total = self._total, 0
        self._minute, self._seen, self._peers, self._lines = minute, set(), set(), 0
        if not ended or not total:
            return ""
        return f"{total} requests refused in {ended} without a live run (ledger: refusals)"


class LineBudget:
    """A log's rate limit: `burst` lines at once, then `rate` a second; the lines dropped
    meanwhile are counted and said with the next one let through."""

    def __init__(self, *, rate: float = 10.0, burst: int = 100) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._at = time.monotonic()
        self._dropped = 0
        self._lock = threading.Lock()

    def take(self) -> tuple[bool, int]:
        """Whether a line may go out now, and how many were dropped before it."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens < 1:
                self._dropped += 1
                return False, 0
            self._tokens -= 1
            dropped, self._dropped = self._dropped, 0
            return True, dropped
