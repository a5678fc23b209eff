"""Spend: one accounting per API call, the CLI's figure at each result (plain unit tests;
the real CLI's side is tests/cli/test_cost.py)."""

from __future__ import annotations

from typing import Any

import pytest

from flower.core.pricing import PriceTable
from flower.core.spend import Spend

OPUS = PriceTable().lookup("claude-opus-5-5")[0]
START = {"input_tokens": 10_000, "output_tokens": 1, "cache_read_input_tokens": 2_000}
FINAL = {**START, "output_tokens": 3_000}
SINCE = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def streamed(message_id: str, usage: dict[str, int] = START) -> dict[str, Any]:
    """An Event's payload: the response as its stream opened."""
    return {"message_id": message_id, "model": "claude-opus-5-5", "usage": usage}


def written(message_id: str, usage: dict[str, int] = FINAL, **entry: Any) -> dict[str, Any]:
    """A transcript entry as the SDK mirrors it: the complete response."""
    message = {"id": message_id, "model": "claude-opus-5-5", "usage": usage}
    return {
        "type": "assistant",
        "timestamp": "2027-01-15T08:00:01.250Z",
        "message": message,
        **entry,
    }


def test_a_call_is_priced_from_its_stream_until_its_transcript_entry_says_more() -> None:
    spend = Spend(since=SINCE)
    assert spend.event(streamed("m1")) and not spend.event(streamed("m1"))
    assert spend.cost == pytest.approx(OPUS.cost(START))
    assert spend.entries([written("m1"), written("m1")])  # one entry per content block
    assert spend.cost == pytest.approx(OPUS.cost(FINAL))
    assert spend.api_calls == 1 and spend.usage["output_tokens"] == 3_000


def test_a_call_only_the_transcript_shows_is_counted_too() -> None:
    """A foreground subagent's closing text never reaches the stream."""
    spend = Spend(since=SINCE)
    assert spend.entries([written("sub-last")])
    assert spend.api_calls == 1 and spend.cost == pytest.approx(OPUS.cost(FINAL))


def test_a_forked_history_and_failed_calls_are_not_calls() -> None:
    spend = Spend(since=SINCE)
    copied = {**written("old"), "timestamp": "2027-01-15T07:59:59.000Z"}
    failed = written("err", isApiErrorMessage=True)
    failed["message"]["model"] = "<synthetic>"
    assert not spend.entries([copied, failed, {"type": "user", "message": {"id": "u"}}])
    assert spend.api_calls == 0 and spend.cost == 0


def test_a_result_settles_every_call_with_the_clis_own_figure() -> None:
    spend = Spend(baseline=0.5, since=SINCE)  # the CLI's counter started at 0.5
    spend.event(streamed("m1"))
    spend.settle(0.5 + 0.07)  # what the CLI says the turn cost: it wins
    assert spend.cost == pytest.approx(0.07)
    spend.entries([written("m1")])  # late: tokens are corrected, the cost is settled
    assert spend.cost == pytest.approx(0.07) and spend.usage["output_tokens"] == 3_000
    spend.event(streamed("m2"))  # the next turn, under way
    assert spend.cost == pytest.approx(0.07 + OPUS.cost(START))
    spend.settle(0.5 + 0.2)
    assert spend.cost == pytest.approx(0.2) and spend.api_calls == 2
