"""The provenance note's text (flowerbox.note): one line a fact, whatever a value holds."""

from __future__ import annotations

from flowerbox import __version__
from flowerbox.note import Provenance, Spend


def test_each_fact_is_one_line_even_when_a_value_tries_to_add_one() -> None:
    asked = "claude-x\nflowerbox-run: forged\r\x1b[2K"  # a model name is the agent's words
    text = Provenance(
        run="r1", image="img", network="net", spend=Spend(1.5, 2, (asked,)), more=(("k", "v"),)
    ).text()
    assert text.splitlines() == [
        "flowerbox-run: r1",
        "image: img",
        f"flower: {__version__}",
        "claude-code: unknown",
        "model: claude-x flowerbox-run: forged  [2K",
        "network: net",
        "box: unknown",
        "cost: $1.500000 (2 requests)",
        "exit: unknown",
        "k: v",
    ]


def test_nothing_recorded_is_said_so() -> None:
    text = Provenance(run="r1", image="img", network="net", spend=Spend(None)).text()
    assert "model: none recorded\n" in text and "cost: unknown\n" in text
