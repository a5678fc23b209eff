"""`flowerbox demo`'s last line (issue 30): a demo that failed says so and why, never "look
around" as if it had worked (the engine test of a demo that works is tests/docker/test_box.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flowerbox.cli.box import demo_ending


def test_a_demo_that_worked_says_where_to_look(tmp_path: Path) -> None:
    line = demo_ending(0, tmp_path)
    assert line.startswith(f"look around: {tmp_path}")


@pytest.mark.parametrize(
    ("code", "why"),
    [
        (1, "a step failed or the goal was not achieved (exit 1)"),
        (2, "bad input, no Docker engine or no image (exit 2)"),
        (3, "the judge found the goal unreachable and nobody answered (exit 3)"),
        (130, "it was stopped (exit 130)"),
        (137, "the run ended abnormally (exit 137)"),
    ],
)
def test_a_demo_that_failed_says_so_and_why(code: int, why: str, tmp_path: Path) -> None:
    line = demo_ending(code, tmp_path)
    assert line.startswith(f"the demo failed: {why}")
    assert "look around" not in line and str(tmp_path) in line
