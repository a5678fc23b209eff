"""bench.chaos at its smallest (issue 30, item 1): the job killed once as a process group at
a random moment of its fault-free duration and continued the documented ways, with replies
held so the kill lands mid-request or mid-tool. Whatever phase the kill lands in, the run
ends achieved with each effect in the ledger exactly once, nothing of the killed run alive
or calling the API after it, and the frozen goal unchanged."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from bench.chaos import run_one


@pytest.mark.parametrize("continuation", ["resume", "go", "ask"])
def test_a_run_killed_at_a_random_moment_finishes_with_every_effect_once(
    continuation: str, tmp_path: Path
) -> None:
    began = time.monotonic()
    clean = run_one(tmp_path / "clean", kill_at=[], kinds=[], hold=None)
    took = time.monotonic() - began
    assert clean.achieved and not clean.duplicated and not clean.lost
    rng = random.Random()
    moment = rng.uniform(0.0, took)
    killed = run_one(
        tmp_path / "killed", kill_at=[moment], kinds=[continuation], hold=random.Random()
    )
    seen = f"killed at {moment:.1f}s of {took:.1f}s, then {continuation}: {killed}"
    assert killed.achieved, seen
    assert (killed.duplicated, killed.lost) == (0, 0), seen
    assert (killed.orphans, killed.late, killed.goal_rewritten) == (0, 0, False), seen
