"""Token and cost accounting for the gateway: usage read off responses as they stream past,
running totals per model, the budget, and the usage file.

`UsageReader` is fed the response body chunk by chunk, exactly as it is forwarded, and never
holds more than one unfinished line of an event stream (or a JSON body, which is small). `Meter`
is shared by the gateway's threads; every change is written to the usage file at once:

    {"requests": 3, "refused": 0, "budget_usd": 5.0, "total_cost_usd": 0.41, "reserved_usd": 0,
     "models": {"claude-opus-5-5": {"requests": 3, "input_tokens": ..., "output_tokens": ...,
                "cache_read_input_tokens": ..., "cache_creation_input_tokens": ...,
                "cost_usd": 0.41, "priced_as": "claude-opus-5-5"}},
     "client_credentials": {"placeholder": 3},
     "updated_at": "2026-...Z"}

`client_credentials` counts what the requests that reached the gateway carried, by kind
("placeholder", "none", "other"): the proof that the agent's side never held the real key.

A model the price table does not know gets `"priced_as": "unknown model: priced as the most
expensive entry"`.

The budget is admission control (docs/gateway.md, "The budget"): `Meter.admit` reserves a
request's worst case under the lock before it is forwarded, and `Meter.add` replaces the
reservation with what the response really cost. A request is admitted while
spent + reserved + its worst case <= budget, so requests in flight together cannot take the
total past the budget, however many there are. A request admitted `alone` (one whose input
nothing in its body bounds, reserved at a whole context window) may also go in when it does
not fit, but only while nothing else is in flight and nothing is spent past the budget: then
it is the one request that can take the total past the budget, by at most its own bill.

A response that bills far more than its reservation (`past_reservation`: more than twice
it and $0.10 over) shows the upstream bills more than a body can hold: from then on
`overbilled()` is True, and the gateway reserves every request as unbounded. (The slack
keeps a scripted stand-in's round usage numbers on a tiny test body from counting.)
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flower import atomic_write_json, text
from flowerbox.sidecar.pricing import Billing, PriceTable, token_count

__all__ = [
    "TOKEN_FIELDS",
    "Meter",
    "Reservation",
    "UsageReader",
    "Whose",
    "json_object",
    "past_reservation",
]

TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
_UNKNOWN_NOTE = "unknown model: priced as the most expensive entry"
OVERBILL_SLACK_USD = 0.10
WEB_SEARCH_USD = 0.01  # the API's fee per web search ($10 per 1,000), beside the tokens
# Only these two events carry usage; every other data line is skipped without parsing.
_USAGE_EVENTS = (b'"message_start"', b'"message_delta"')
_DELTA = b'"content_block_delta"'


class UsageReader:
    """Collects the model and usage of one response from its body, fed in arbitrary chunks.

    For an event stream: message_start's `message.usage` and `message.model`, then each
    message_delta's `usage`, whose counts are cumulative and so replace earlier ones. For a
    JSON body: its top-level `model` and `usage`. A cut stream keeps what arrived before it.
    """

    def __init__(self, *, streaming: bool, model: str | None = None) -> None:
        self.streaming = streaming
        self.model = model
        self.usage: dict[str, Any] = {}
        self.deltas = 0  # content deltas seen: each carries at least one generated token
        self.text_bytes = 0  # their text's UTF-8 bytes: a token is at least one byte
        self.final = False  # a message_delta's usage arrived: the output count is the bill's
        self._pending = b""

    def feed(self, chunk: bytes) -> None:
        if not self.streaming:
            self._pending += chunk
            return
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            if _DELTA in line:
                self.deltas += 1
                self.text_bytes += _text_bytes(line[5:])
            elif any(e in line for e in _USAGE_EVENTS):
                self._event(line[5:])

    def finish(self) -> None:
        """Read what is left: a JSON body, or a last data line without its newline."""
        rest, self._pending = self._pending, b""
        if not self.streaming:
            data = json_object(rest)
            if isinstance(data.get("usage"), dict):
                self.usage = data["usage"]
                self.model = data.get("model") or self.model
        elif rest.startswith(b"data:"):
            self._event(rest[5:])

    def output_tokens(self) -> int:
        """The output to charge: the usage's count, and at least one token per content delta;
        for a stream cut before its final usage (the client can hang up just before it),
        one per byte of the text that got through, since the API billed all of it."""
        reported = max(token_count(self.usage.get("output_tokens")), self.deltas)
        return reported if self.final or not self.streaming else max(reported, self.text_bytes)

    @property
    def seen(self) -> bool:
        """Whether any usage arrived (an error body or a refused stream carries none)."""
        return bool(self.usage)

    def _event(self, payload: bytes) -> None:
        data = json_object(payload)
        if data.get("type") == "message_start":
            message = data.get("message") or {}
            self.model = message.get("model") or self.model
            self.usage = dict(message.get("usage") or {})
        elif data.get("type") == "message_delta" and isinstance(data.get("usage"), dict):
            self.usage.update({k: v for k, v in data["usage"].items() if v is not None})
            self.final = True


def _text_bytes(payload: bytes) -> int:
    """The bytes of generated text in one content delta (text, thinking, tool input)."""
    delta = json_object(payload).get("delta")
    if not isinstance(delta, dict):
        return 0
    texts = (delta.get(name) for name in ("text", "thinking", "partial_json"))
    return sum(len(text.encode()) for text in texts if isinstance(text, str))


def json_object(raw: bytes) -> dict[str, Any]:
    """`raw` as a JSON object, or {} for anything else (junk, a list, a cut body)."""
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class Whose:
    """Whose budget a meter keeps, as its refusals name it, and how to raise it: the keys of
    both texts (flower.text), read in the language of the moment of the refusal."""

    name: str = "meter.run_budget"
    remedy: str = "meter.run_remedy"


@dataclass(frozen=True)
class Reservation:
    """What one admitted request holds of the budget until it is settled."""

    amount: float


class Meter:
    """Running totals of one run, thread-safe, mirrored to `path` after every change."""

    def __init__(
        self,
        path: Path | None,
        prices: PriceTable,
        *,
        budget: float | None = None,
        spent: float = 0.0,
        whose: Whose | None = None,
    ) -> None:
        """`path` None: no usage file (a broker's team meter: its ledger is the record);
        `spent`: what was already spent before this meter (a restarted broker's ledger);
        `whose`: the budget's name and remedy in a refusal (a run's, by default)."""
        self.path = path
        self.prices = prices
        self.budget = budget
        self.whose = whose or Whose()
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._models: dict[str, dict[str, Any]] = {}
        self._requests = 0
        self._refused = 0
        self._total = spent
        self._reserved = 0.0
        self._in_flight = 0
        self._overbilled = False
        self._client_credentials: dict[str, int] = {}
        self._write()

    @property
    def total(self) -> float:
        with self._lock:
            return self._total

    @property
    def reserved(self) -> float:
        """What the requests in flight hold of the budget."""
        with self._lock:
            return self._reserved

    def spent(self) -> bool:
        """Whether the budget (if any) is used up: further model requests are refused."""
        return self.budget is not None and self.total >= self.budget

    def worst_case(
        self,
        model: str | None,
        *,
        max_tokens: int,
        input_tokens: int,
        billing: Billing | None = None,
    ) -> float:
        """The most a request can cost: `max_tokens` at the output price plus `input_tokens`
        at the dearest input-side price (a 1-hour cache write), in whichever tier is dearer,
        at fast mode's prices and with the US-only factor when `billing` asks for them."""
        billing = billing or Billing()
        price = billing.price(self.prices.lookup(model or "")[0])
        tiers = [price] if price.long_prompt is None else [price, price.long_prompt]
        return billing.factor * max(
            (
                max_tokens * tier.output
                + input_tokens * max(tier.input, tier.cache_write_5m, tier.cache_write_1h)
            )
            / 1_000_000
            for tier in tiers
        )

    def admit(self, amount: float, *, wait: float, alone: bool = False) -> Reservation | str:
        """Reserve `amount` of the budget, or say why not (the refusal's message).

        Admitted while spent + reserved + amount <= budget. When only other requests'
        reservations stand in the way, it waits (up to `wait` seconds) for them to settle;
        when the spent amount alone leaves no room, it is refused at once, unless it may go
        `alone`: then it waits for nothing else to be in flight and goes in, while anything
        of the budget is left (docs/gateway.md, "The budget")."""
        deadline = time.monotonic() + wait
        with self._settled:
            while True:
                budget = self.budget
                if budget is None:
                    return self._reserve(amount)
                if self._total >= budget:
                    return _spent_message(self.whose, budget, self._total)
                if not alone and self._total + amount > budget:
                    return _no_room_message(self.whose, budget, self._total, amount)
                if self._total + self._reserved + amount <= budget or (
                    alone and self._in_flight == 0
                ):
                    return self._reserve(amount)
                left = deadline - time.monotonic()
                if left <= 0:
                    return _busy_message(self.whose, budget, self._total, self._reserved, amount)
                self._settled.wait(left)

    def _reserve(self, amount: float) -> Reservation:
        # Not written yet: the file is rewritten (two fsyncs) when the request settles, off
        # the path between the client and the upstream.
        self._reserved += amount
        self._in_flight += 1
        return Reservation(amount)

    def overbilled(self) -> bool:
        """Whether a response billed more than its reservation (docstring of the module)."""
        with self._lock:
            return self._overbilled

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back unused (the request was never answered with usage)."""
        with self._settled:
            self._unreserve(reservation)
            self._write()
            self._settled.notify_all()

    def add(
        self, model: str, usage: dict[str, Any], *, reservation: Reservation | None = None
    ) -> tuple[dict[str, int], float]:
        """Count one response, settling its reservation; returns its token counts and cost."""
        price, known = self.prices.lookup(model)
        usage = _with_iterations(usage)
        billing = Billing.of(usage)
        cost = billing.price(price).cost(usage) * billing.factor + _server_tool_fees(usage)
        tokens = {name: token_count(usage.get(name)) for name in TOKEN_FIELDS}
        with self._settled:
            if reservation is not None:
                self._unreserve(reservation)
                self._overbilled |= past_reservation(cost, reservation)
                self._settled.notify_all()
            entry = self._entry(model)
            entry["requests"] += 1
            for name, count in tokens.items():
                entry[name] += count
            entry["cost_usd"] += cost
            entry["priced_as"] = model if known else _UNKNOWN_NOTE
            self._requests += 1
            self._total += cost
            self._write()
        return tokens, cost

    def keep(self, reservation: Reservation, model: str) -> float:
        """Charge a whole reservation: the request was answered but its usage never arrived
        (a stream cut before message_start), so it may have cost up to its worst case."""
        with self._settled:
            self._unreserve(reservation)
            entry = self._entry(model)
            entry["requests"] += 1
            entry["cost_usd"] += reservation.amount
            entry["priced_as"] = "no usage arrived: charged its worst case"
            self._requests += 1
            self._total += reservation.amount
            self._write()
            self._settled.notify_all()
        return reservation.amount

    def _unreserve(self, reservation: Reservation) -> None:
        self._in_flight -= 1
        # Sums of floats drift: with nothing in flight, nothing is reserved.
        self._reserved = max(0.0, self._reserved - reservation.amount) if self._in_flight else 0.0

    def _entry(self, model: str) -> dict[str, Any]:
        return self._models.setdefault(
            model, {"requests": 0, **dict.fromkeys(TOKEN_FIELDS, 0), "cost_usd": 0.0}
        )

    def refuse(self) -> None:
        """Count one request refused because the budget is spent."""
        with self._lock:
            self._refused += 1
            self._write()

    def saw_client_credential(self, kind: str) -> None:
        """Count one incoming request by the kind of credential it carried (written with the
        request's settlement: this is on the way to the upstream)."""
        with self._lock:
            self._client_credentials[kind] = self._client_credentials.get(kind, 0) + 1

    def count_unmetered(self) -> None:
        """Count a forwarded request that reported no usage (an error, count_tokens)."""
        with self._lock:
            self._requests += 1
            self._write()

    def _write(self) -> None:
        # Called with the lock held (or from __init__), so writes never interleave.
        if self.path is None:
            return
        atomic_write_json(
            self.path,
            {
                "requests": self._requests,
                "refused": self._refused,
                "budget_usd": self.budget,
                "total_cost_usd": round(self._total, 6),
                "reserved_usd": round(self._reserved, 6),
                "models": {
                    name: {**entry, "cost_usd": round(entry["cost_usd"], 6)}
                    for name, entry in self._models.items()
                },
                "client_credentials": dict(sorted(self._client_credentials.items())),
                "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            },
        )


def _with_iterations(usage: dict[str, Any]) -> dict[str, Any]:
    """`usage` with each token count at least the sum of its `iterations` (the samplings of
    one request: a server-side compaction's, then the message's), which the top-level counts
    may leave out."""
    iterations = usage.get("iterations")
    if not isinstance(iterations, list):
        return usage
    parts = [part for part in iterations if isinstance(part, dict)]
    summed = {name: sum(token_count(part.get(name)) for part in parts) for name in TOKEN_FIELDS}
    return usage | {name: max(token_count(usage.get(name)), summed[name]) for name in summed}


def past_reservation(cost: float, reservation: Reservation) -> bool:
    """Whether a bill is far past what its request reserved (docstring of the module)."""
    return cost > 2 * reservation.amount + OVERBILL_SLACK_USD


def _server_tool_fees(usage: dict[str, Any]) -> float:
    """What a response's server tools cost beside its tokens: its web searches (a request
    reaches them only with --allow-api-fetch)."""
    used = usage.get("server_tool_use")
    searches = token_count(used.get("web_search_requests")) if isinstance(used, dict) else 0
    return searches * WEB_SEARCH_USD


def usd(amount: float) -> str:
    """Dollars with cents, or with four decimals for amounts too small to show in cents."""
    return f"${amount:.2f}" if amount == 0 or amount >= 0.01 else f"${amount:.4f}"


def _spent_message(whose: Whose, budget: float, total: float) -> str:
    return text("meter.spent", **_said(whose, budget, total))


def _no_room_message(whose: Whose, budget: float, total: float, amount: float) -> str:
    return text("meter.no_room", amount=usd(amount), **_said(whose, budget, total))


def _busy_message(whose: Whose, budget: float, total: float, reserved: float, amount: float) -> str:
    said = _said(whose, budget, total)
    return text("meter.busy", amount=usd(amount), reserved=usd(reserved), **said)


def _said(whose: Whose, budget: float, total: float) -> dict[str, str]:
    """What every budget refusal names: whose budget, its size, what is left and used."""
    return {
        "whose": text(whose.name),
        "budget": usd(budget),
        "left": usd(budget - total),
        "total": usd(total),
        "remedy": text(whose.remedy),
    }
