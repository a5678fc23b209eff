"""What the ledger gives the git relay's provenance note of a run (Ledger.spend): its cost
as the team budget counts it, its requests and the models they named."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowerbox.broker.ledger import Ledger
from flowerbox.note import Spend


def test_a_runs_spend_is_its_rows_and_nothing_of_another_runs(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        assert ledger.spend("r1") is None  # no row: the note says `unknown`
        ledger.settle(ledger.begin("r1", 0.5), "r1", {"model": "claude-b", "cost_usd": 0.25})
        ledger.settle(None, "r1", {"model": "claude-a", "status": 429})
        ledger.begin("r1", 0.125)  # begun, not settled: counted at its worst case
        ledger.settle(ledger.begin("r2", 1.0), "r2", {"model": "claude-c", "cost_usd": 1.0})
        spend = ledger.spend("r1")
        assert spend == Spend(pytest.approx(0.375), 3, ("claude-a", "claude-b"))
        assert spend is not None and spend.usd == ledger.spent("r1")
    finally:
        ledger.close()
