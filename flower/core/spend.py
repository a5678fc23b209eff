"""Spend: what one CLI session has cost so far, one API call at a time.

Every API response is one call, known by its message id and priced with flower's table
(flower.core.pricing, the table the flowerbox gateway meters with) from the best usage known
for it:

1. its transcript entry, which the CLI writes once the response is complete (with the final
   output count) and the SDK mirrors into Runtime's store at once (`entries`), for the main
   thread and every subagent alike;
2. until then, the usage its stream opened with (`event`: message_start's figures, whose
   output count is an undercount).

A result (`settle`) closes the calls made since the previous one with the CLI's own figure
for them: the increase of its running total (`total_cost_usd`, cumulative within one CLI
process, counted from `baseline`), which also covers calls that neither a stream nor a
transcript shows (a compaction's summary). So `cost` is the CLI's figure after each result,
and in between (a running manifest row, the live line, an attempt stopped or killed
mid-turn) it is exact for every call whose transcript entry has arrived.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from flower.core.pricing import PriceTable, token_count
from flower.stores.transcript import is_api_error

__all__ = ["PRICES", "TOKEN_FIELDS", "Spend", "call_cost"]

TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
PRICES = PriceTable()


class Spend:
    """The calls of one CLI session (one `ClaudeSDKClient` connection) and their cost.

    `since` (epoch seconds) is when the session started: a transcript entry written before
    it is a copy of an earlier session's (a fork copies its parent's history), not a call.
    """

    def __init__(self, *, baseline: float = 0.0, since: float = 0.0) -> None:
        self.baseline = baseline  # the CLI's running total when this session started
        self.since = since
        self.last_total = baseline
        self.api_calls = 0
        self.usage: dict[str, int] = dict.fromkeys(TOKEN_FIELDS, 0)
        self._calls: dict[str, tuple[str, dict[str, Any]]] = {}  # id -> (model, usage)
        self._open: set[str] = set()  # the calls since the last result
        self.completed: list[tuple[str, str, dict[str, Any]]] = []
        """(message id, model, usage) of each call whose complete response arrived (or
        changed) since the owner last took them: Runtime reports each as a "call" Event."""

    @property
    def cost(self) -> float:
        """The CLI's figure up to its last result, plus the calls made since, priced."""
        return max(0.0, self.last_total - self.baseline) + sum(
            call_cost(model, usage) for model, usage in (self._calls[i] for i in self._open)
        )

    def event(self, payload: Mapping[str, Any]) -> bool:
        """A response as its stream opened (an Event's payload); True if it is a new call."""
        message_id, usage = payload.get("message_id"), payload.get("usage")
        if not isinstance(message_id, str) or message_id in self._calls:
            return False
        if not isinstance(usage, dict):
            return False
        self._record(message_id, str(payload.get("model") or ""), usage)
        return True

    def entries(self, entries: Iterable[Mapping[str, Any]]) -> bool:
        """Transcript entries as the SDK mirrors them; True if a call was added or its usage
        changed. The complete response's usage replaces what its stream opened with."""
        changed = False
        for entry in entries:
            message = entry.get("message")
            if entry.get("type") != "assistant" or not isinstance(message, dict):
                continue
            message_id, usage = message.get("id"), message.get("usage")
            if is_api_error(entry) or not isinstance(message_id, str):
                continue
            if not isinstance(usage, dict) or _written(entry) < self.since:
                continue
            known = self._calls.get(message_id)
            if known is not None and known[1] == usage:
                continue
            model = str(message.get("model") or "")
            self._record(message_id, model, usage)
            self.completed.append((message_id, model, dict(usage)))
            changed = True
        return changed

    def settle(self, total: float) -> None:
        """A result: the CLI's running total is `total`, every call so far is in it."""
        self.last_total = total
        self._open.clear()

    def _record(self, message_id: str, model: str, usage: dict[str, Any]) -> None:
        known = self._calls.get(message_id)
        if known is None:
            self.api_calls += 1
            self._open.add(message_id)
        for name in TOKEN_FIELDS:
            before = token_count(known[1].get(name)) if known else 0
            self.usage[name] += token_count(usage.get(name)) - before
        self._calls[message_id] = (model, dict(usage))


def call_cost(model: str, usage: Mapping[str, Any]) -> float:
    """One call's cost by flower's price table (the table the flowerbox gateway meters with)."""
    return PRICES.lookup(model)[0].cost(usage)


def _written(entry: Mapping[str, Any]) -> float:
    """When the CLI wrote `entry` (epoch seconds; 0 if it does not say)."""
    stamp = entry.get("timestamp")
    try:
        return datetime.datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return 0.0
