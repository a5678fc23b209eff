"""What a model's tokens cost: the one price table flower and flowerbox's gateway price with.

Prices are USD per million tokens, per model id, in the shape of the model catalog baked into
the Claude Code CLI that claude-agent-sdk 0.2.189 bundles (CLI 2.1.332): `input`, `output`,
`cache_write_5m`, `cache_write_1h`, `cache_read`, and for some models a `long_prompt` tier
whose prices apply to the whole request once its prompt (input + cache read + cache write)
exceeds `above_prompt_tokens`. The shipped table is that catalog's (its pricing tiers and
model ids, plus the dateless API aliases "claude-opus-4" and "claude-sonnet-4").

Two users: the gateway meters a box's budget with it (flowerbox.sidecar.pricing adds the
`--prices FILE` overrides), and Runtime prices the usage a running attempt has streamed but
the CLI has not yet costed (manifest rows of an attempt killed mid-turn; docs/decisions.md).

A model the table does not know is priced at the most expensive entry's prices (a budget is a
limit: overestimating stops a run early, underestimating lets it overspend). Not modelled:
fast mode, the US-only inference surcharge, web search requests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

__all__ = ["DEFAULT_PRICES", "UNKNOWN", "Price", "PriceTable", "token_count"]

UNKNOWN = "*"
"""The table key whose price applies to models no other entry matches."""


@dataclass(frozen=True, kw_only=True)
class Price:
    """USD per million tokens. `long_prompt` replaces every figure above `above_prompt_tokens`."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    above_prompt_tokens: int | None = None
    long_prompt: Price | None = None

    def cost(self, usage: Mapping[str, Any]) -> float:
        """The USD cost of one response's `usage` block (the Messages API's field names)."""
        read = token_count(usage.get("cache_read_input_tokens"))
        written = token_count(usage.get("cache_creation_input_tokens"))
        prompt = token_count(usage.get("input_tokens")) + read + written
        price = self
        if self.long_prompt is not None and prompt > (self.above_prompt_tokens or 0):
            price = self.long_prompt
        detail = usage.get("cache_creation")
        detail = detail if isinstance(detail, dict) else {}
        one_hour = min(token_count(detail.get("ephemeral_1h_input_tokens")), written)
        total = (
            token_count(usage.get("input_tokens")) * price.input
            + token_count(usage.get("output_tokens")) * price.output
            + read * price.cache_read
            + (written - one_hour) * price.cache_write_5m
            + one_hour * price.cache_write_1h
        )
        return total / 1_000_000


def token_count(value: Any) -> int:
    """A usage field as a count: anything but a positive int (absent, null, junk) is 0."""
    return value if isinstance(value, int) and value > 0 else 0


def _tier(i: float, o: float, w5: float, w1: float, r: float) -> Price:
    return Price(input=i, output=o, cache_write_5m=w5, cache_write_1h=w1, cache_read=r)


# The CLI catalog's pricing tiers (its names), then its model ids mapped onto them.
_T3_15 = _tier(3, 15, 3.75, 6, 0.3)
_T2_10 = _tier(2, 10, 2.5, 4, 0.2)
_T15_75 = _tier(15, 75, 18.75, 30, 1.5)
_T5_25 = _tier(5, 25, 6.25, 10, 0.5)
_T10_50 = _tier(10, 50, 12.5, 20, 1)
_T10_50_R025 = replace(_T10_50, cache_read=0.25)
_T8_40_R020 = _tier(8, 40, 10, 16, 0.2)
_HAIKU_55 = replace(
    _tier(0.1, 0.5, 0.125, 0.2, 0.01),
    above_prompt_tokens=100_000,
    long_prompt=_tier(0.5, 2.5, 0.625, 1, 0.05),
)

DEFAULT_PRICES: dict[str, Price] = {
    "claude-3-5-haiku": _tier(0.8, 4, 1, 1.6, 0.08),
    "claude-haiku-4-5": _tier(1, 5, 1.25, 2, 0.1),
    "claude-haiku-5-5": _HAIKU_55,
    "claude-3-5-sonnet": _T3_15,
    "claude-3-7-sonnet": _T3_15,
    "claude-sonnet-4-0": _T3_15,
    "claude-sonnet-4": _T3_15,
    "claude-sonnet-4-5": _T3_15,
    "claude-sonnet-4-6": _T3_15,
    "claude-sonnet-5": _T2_10,
    "claude-sonnet-5-5": replace(_T2_10, cache_read=0.1),
    "claude-opus-4-0": _T15_75,
    "claude-opus-4": _T15_75,
    "claude-opus-4-1": _T15_75,
    "claude-opus-4-5": _T5_25,
    "claude-opus-4-6": _T5_25,
    "claude-opus-4-7": _T5_25,
    "claude-opus-4-8": _T5_25,
    "claude-opus-5": _T5_25,
    "claude-opus-5-5": _tier(4, 20, 5, 8, 0.2),
    "claude-fable-5": _T10_50,
    "claude-fable-5-1": _T10_50_R025,
    "claude-fable-5-2": _T8_40_R020,
    "claude-mythos-5": _T10_50,
    "claude-mythos-5-1": _T10_50_R025,
    "claude-mythos-5-2": _T8_40_R020,
}

# What may surround a table id in a real model name: a provider prefix ("us.anthropic."),
# a snapshot date, a Bedrock version, a Vertex "@date", the CLI's "[1m]" context suffix.
_PREFIX = r"(?:[\w-]+\.)*"
_SUFFIX = r"(?:-\d{8})?(?:-v\d+(?::\d+)?)?(?:@[\w-]+)?(?:\[\w+\])?"


class PriceTable:
    """Model id -> Price. `lookup` matches a whole id (with the decorations real names carry),
    never a prefix of a longer version: "claude-opus-5-7" is unknown, not "claude-opus-5"."""

    UNKNOWN: ClassVar[str] = UNKNOWN

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        table = dict(DEFAULT_PRICES if prices is None else prices)
        unknown = table.pop(UNKNOWN) if UNKNOWN in table else None
        self.unknown = unknown or max(table.values(), key=lambda p: (p.output, p.input))
        self._patterns = [
            (re.compile(_PREFIX + re.escape(model) + _SUFFIX, re.IGNORECASE), price)
            for model, price in table.items()
        ]

    def lookup(self, model: str) -> tuple[Price, bool]:
        """The price for `model`, and whether the table knew it (False: priced as unknown)."""
        for pattern, price in self._patterns:
            if pattern.fullmatch(model):
                return price, True
        return self.unknown, False
