"""The gateway's prices: flower's price table (flower.PriceTable) plus `--prices FILE`.

The table itself (its tiers, model ids and the matching of real model names) lives in
flower.core.pricing, so the gateway's meter and flower's own accounts of a running attempt
price tokens alike. This module reads a JSON prices file over it (`load_prices`); its `"*"`
entry sets the price of models the table does not know. `Billing` adds what the table leaves
out and a request can ask for: fast mode's prices and US-only inference's factor.

Errors: `PriceError` (a prices file that cannot be read or has a malformed entry).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from flower import DEFAULT_PRICES, Price, PriceTable, text, token_count
from flowerbox.errors import PriceError

UNKNOWN = PriceTable.UNKNOWN
"""The prices file's key whose price applies to models no other entry matches."""

__all__ = [
    "FAST_MODE",
    "UNKNOWN",
    "US_ONLY",
    "Billing",
    "Price",
    "PriceError",
    "PriceTable",
    "load_prices",
    "token_count",
]

FAST_MODE = Price(input=30, output=150, cache_write_5m=37.5, cache_write_1h=60, cache_read=3)
"""What fast mode (`speed: "fast"`) bills, whatever the model: the CLI catalog's fast prices,
6x Opus 4.6's. The shipped table (flower.core.pricing) does not model it."""
US_ONLY = 1.1
"""The factor US-only inference (`inference_geo: "us"`) bills on top of the tokens."""


@dataclass(frozen=True)
class Billing:
    """How the API bills a request beside its model: fast mode, US-only inference. Read off
    a request body (what it asks for) or a response's usage (what was billed): both name
    them `speed` and `inference_geo`, and anything but the default is taken as the dearer."""

    fast: bool = False
    us_only: bool = False

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> Billing:
        return cls(
            fast=fields.get("speed") not in (None, "", "standard"),
            us_only=fields.get("inference_geo") not in (None, "", "global"),
        )

    def price(self, price: Price) -> Price:
        """The price its tokens bill at: fast mode's when it is dearer than the model's."""
        return FAST_MODE if self.fast and FAST_MODE.output > price.output else price

    @property
    def factor(self) -> float:
        return US_ONLY if self.us_only else 1.0


def load_prices(path: Path) -> PriceTable:
    """The shipped table with the entries of a JSON prices file laid over it.

    The file is an object of model id -> {"input", "output"[, "cache_write_5m",
    "cache_write_1h", "cache_read", "long_prompt": {"above_prompt_tokens", ...the same
    figures}]}; figures left out follow the API's usual ratios to `input` (x1.25, x2, x0.1).
    The id "*" prices models no entry matches.
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PriceError(text("prices.unreadable", path=path, problem=exc)) from exc
    if not isinstance(raw, dict):
        raise PriceError(text("prices.not_object", path=path))
    prices = dict(DEFAULT_PRICES)
    for model, entry in raw.items():
        prices[model] = _parse(path, model, entry, nested=False)
    return PriceTable(prices)


def _parse(path: Path, model: str, entry: Any, *, nested: bool) -> Price:
    def figure(name: str, default: float | None = None) -> float:
        value = entry.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise PriceError(
                text(
                    "prices.bad_figure",
                    path=path,
                    model=repr(model),
                    name=repr(name),
                    value=repr(value),
                )
            )
        return float(value)

    if not isinstance(entry, dict):
        raise PriceError(text("prices.not_prices", path=path, model=repr(model), entry=repr(entry)))
    base = figure("input")
    price = Price(
        input=base,
        output=figure("output"),
        cache_write_5m=figure("cache_write_5m", base * 1.25),
        cache_write_1h=figure("cache_write_1h", base * 2),
        cache_read=figure("cache_read", base * 0.1),
    )
    long_prompt = entry.get("long_prompt")
    if long_prompt is None or nested:
        return price
    above = long_prompt.get("above_prompt_tokens") if isinstance(long_prompt, dict) else None
    if not isinstance(above, int) or above <= 0:
        raise PriceError(text("prices.long_prompt", path=path, model=repr(model)))
    tier = _parse(path, model, long_prompt, nested=True)
    return replace(price, above_prompt_tokens=above, long_prompt=tier)
