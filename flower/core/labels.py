"""The names attempts are recorded under, and the stable ids read back from them.

A workflow records each attempt under a label built from its step's name: `name` for the
first, `name#round2`... when a rejected attempt is judged again (on_reject), `name#retry1`...
for a fresh start, and `name·判定#1`... for a goal guard's judge rulings. The labels stay as
they are on disk (manifest.json, lineage.json: a resumed run finds its sessions by them);
what machines read (`--json`, reports) is `parse_label`'s split: the step's id, its role and
its round, with the label kept as the display name.

The starter's step names are the seeds' Chinese ones; their ids are English and stable, so a
script keys on `work`, not on `干活#round2`. A user's own workflow's step names are their own
choice and serve as their ids unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from flower.core.lang import current

JUDGE_MARK = "·判定"

# The starter's step names (flower.workflow.starter) and the ids they are known by.
STARTER_STEP_IDS = {"确认需求": "clarify", "设定目标": "goal", "干活": "work"}

Role = Literal["step", "judge"]

_LABEL = re.compile(
    r"^(?P<name>.*?)(?:#(?:round(?P<round>\d+)|retry(?P<retry>\d+)|(?P<ruling>\d+)))?$"
)


@dataclass(frozen=True)
class AttemptLabel:
    """What one attempt's label says: `step` is the id, `round`/`retry` count from 1."""

    label: str
    step: str
    role: Role
    round: int | None
    retry: int | None


def attempt_label(step: str, attempt: int, *, judged_again: bool) -> str:
    """The label of a step's attempt number `attempt` (0 = the first)."""
    if attempt == 0:
        return step
    return f"{step}#round{attempt + 1}" if judged_again else f"{step}#retry{attempt}"


def judge_label(step: str) -> str:
    """The label a goal guard's judge records its rulings under (then `#1`, `#2`...)."""
    return f"{step}{JUDGE_MARK}"


def step_id(name: str) -> str:
    """The stable id of a step name: the starter's English id, else the name itself."""
    return STARTER_STEP_IDS.get(name, name)


def display_name(label: str, *, beside: bool = False) -> str:
    """A recorded label as the user sees it: unchanged in zh; in en the starter's step name
    becomes its id and the judge's mark `·judge` (干活·判定#1 -> work·judge#1), and with
    `beside` the seed's name follows where it differs (work·judge#1 (干活)), so a table read
    in English still matches the files and the other language. What is recorded on disk
    never changes with the language."""
    if current() != "en":
        return label
    seed = None
    for name, ident in STARTER_STEP_IDS.items():
        if label.startswith(name):
            label, seed = ident + label[len(name) :], name
            break
    label = label.replace(JUDGE_MARK, "·judge")
    return f"{label} ({seed})" if beside and seed else label


def parse_label(label: str) -> AttemptLabel:
    """Split a recorded label into the step's id, its role and its round or retry."""
    found = _LABEL.match(label)
    assert found is not None  # the pattern matches every string
    name, ruling = found["name"], found["ruling"]
    role: Role = "step"
    if name.endswith(JUDGE_MARK):
        name, role = name[: -len(JUDGE_MARK)], "judge"
    elif ruling is not None:  # `x#3` on a step that is not a judge: part of its name
        name, ruling = label, None
    rounds = found["round"] or ruling
    return AttemptLabel(
        label=label,
        step=step_id(name) if name else label,
        role=role,
        round=int(rounds) if rounds else None,
        retry=int(found["retry"]) if found["retry"] else None,
    )
