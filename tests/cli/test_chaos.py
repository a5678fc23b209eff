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

from bench.chaos import PHASES, Timeline, phase_first, run_one


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


def test_kills_drawn_phase_first_land_in_every_phase_the_short_last_one_too() -> None:
    """bench.chaosbox's draw: a phase at random, then a delay within its length; the last
    judge's second of a 30 s run is drawn as often as a round's ten (uniform moments over
    the run put 0 of 49 kills there)."""
    timeline = Timeline()
    for at, phase in [(0, "start"), (2, "clarify"), (2.1, "question"), (8, "clarify"),
                      (9, "goal"), (10, "round1"), (20, "judge1"), (21, "round2"),
                      (29, "judge2")]:  # fmt: skip
        timeline.mark(phase, 1000.0 + at)
    windows = timeline.windows(1000.0, 30.0)
    assert ("clarify", 8.0, 9.0) in windows and windows[-1] == ("judge2", 29.0, 30.0)
    rng = random.Random(7)
    drawn = [phase_first(rng, windows) for _ in range(800)]
    hits = {phase: sum(1 for p, _ in drawn if p == phase) for phase in PHASES}
    assert all(70 <= n <= 130 for n in hits.values()), hits  # 100 each, give or take
    assert all(0 <= delay <= 1.0 for phase, delay in drawn if phase == "judge2")
    assert timeline.reached("clarify", 1005.0) == 1008.0 and timeline.reached("x", 0) is None
