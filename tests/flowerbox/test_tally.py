"""The ledger's outcomes as metric labels (flowerbox.broker.tally): a short vocabulary, and
nothing a client sent (a malformed header line may hold a token) ever becomes a label."""

from __future__ import annotations

import pytest

from flowerbox.broker.tally import cause, outcome


@pytest.mark.parametrize(
    ("said", "label"),
    [
        ("refused: no token", "no token"),
        ("refused: not this run's token", "not this run's token"),
        ("malformed (431)", "malformed"),
        ("refused 407", "refused 407"),
        ("too many connections", "too many connections"),
        ("refused: x-api-key : sk-ant-api03-secret", "other"),
        ("refused: " + "a" * 60, "other"),
        ("Refused: No Token", "other"),
        ("", "other"),
    ],
)
def test_a_cause_is_a_plain_word_or_other(said: str, label: str) -> None:
    assert cause(said) == label


def test_each_ledger_row_has_one_outcome() -> None:
    assert outcome(200, None, "POST") == ("forwarded", "")
    assert outcome(529, None, "POST") == ("forwarded", "")  # the upstream's own answer
    assert outcome(200, "no usage arrived: charged its worst case", "POST") == ("forwarded", "")
    assert outcome(403, "refused: budget", "POST") == ("refused", "budget")
    assert outcome(502, "upstream unreachable", "POST") == ("failed", "upstream unreachable")
    # A head that could not be read: no method, and a note quoting what it sent.
    assert outcome(400, "refused: bad header line 'x-api-key : sk-ant-1'", None) == (
        "refused",
        "malformed",
    )
