"""Attempt labels: what is recorded on disk, and the stable ids documents read from it."""

from __future__ import annotations

import inspect

import pytest

from flower.core.labels import STARTER_STEP_IDS, attempt_label, judge_label, parse_label
from flower.workflow import starter


@pytest.mark.parametrize(
    ("label", "step", "role", "round_", "retry"),
    [
        ("干活", "work", "step", None, None),
        ("干活#round2", "work", "step", 2, None),
        ("干活·判定#3", "work", "judge", 3, None),
        ("确认需求", "clarify", "step", None, None),
        ("设定目标#retry1", "goal", "step", None, 1),
        ("build", "build", "step", None, None),  # a user's step: its name is its id
        ("release #3", "release #3", "step", None, None),  # `#3` without a judge is a name
    ],
)
def test_a_label_splits_into_id_role_and_round(
    label: str, step: str, role: str, round_: int | None, retry: int | None
) -> None:
    parsed = parse_label(label)
    assert (parsed.step, parsed.role, parsed.round, parsed.retry) == (step, role, round_, retry)
    assert parsed.label == label


def test_labels_written_are_labels_read() -> None:
    for attempt in range(4):
        for judged_again in (True, False):
            label = attempt_label("build", attempt, judged_again=judged_again)
            parsed = parse_label(label)
            assert parsed.step == "build" and parsed.role == "step"
            assert (parsed.round or parsed.retry or 0) == (attempt + judged_again if attempt else 0)
    assert parse_label(f"{judge_label('build')}#2").role == "judge"


def test_every_starter_step_has_a_stable_id() -> None:
    defaults = {
        inspect.signature(starter.clarify_step).parameters["name"].default,
        inspect.signature(starter.goal_step).parameters["name"].default,
        "干活",
    }
    assert defaults == set(STARTER_STEP_IDS)
    assert "干活" in inspect.getsource(starter.starter_flow)
