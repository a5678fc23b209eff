"""A workflow of your own: draft a changelog entry, check it with a plain gate, then polish it
under a goal that a fresh judge rules on after every round.

    cd your-project && flower run path/to/changelog.py
    flowerbox run changelog.py            (in the box the file must lie inside the workspace)

What it shows (docs/workflow-design.md walks through it line by line):
    draft   a Step with a gate (a plain function that looks at the workspace) and on_reject
            (a rejected attempt resumes the same session, told what is wrong)
    goal    goal_step without a clarifier: the judge sets the goal from a brief that the
            Workflow's `context` carries in
    polish  with_goal: after each round a fresh judge session rules against the frozen goal;
            "not yet" sends its reasons back into the same session for another round

tests/docs/test_workflow_example.py runs this file against flower.testing.FakeAPI.
"""

from __future__ import annotations

from pathlib import Path

from flower import (
    AgentSpec,
    HumanChannel,
    Step,
    StepResult,
    Workbench,
    Workflow,
    goal_step,
    with_goal,
)
from flower.workflow import Ctx

CHANGELOG = "CHANGELOG.md"
SECTION = "## Unreleased"

BRIEF = """\
Goal: CHANGELOG.md tells users about the new `--json` flag of the `report` command.
Acceptance: the entry sits under `## Unreleased`, says what the flag prints, and names its
pull request (#42).
Bounds: edit CHANGELOG.md only.
"""

# One agent for both writing steps: it may read and edit files without asking (acceptEdits),
# and nothing else: no Bash, no subagents.
WRITER = AgentSpec(
    "writer",
    "You keep this project's CHANGELOG.md. Edit only that file; keep its existing entries.",
    allowed_tools=["Read", "Write", "Edit"],
    tools=["Read", "Write", "Edit"],
    permission_mode="acceptEdits",
)


def has_section(result: StepResult, ctx: Ctx) -> bool:
    """The draft passes once CHANGELOG.md exists and has the Unreleased section."""
    path = ctx["_runtime"].workspace / CHANGELOG
    return path.is_file() and SECTION in path.read_text(encoding="utf-8")


def explain(result: StepResult, ctx: Ctx) -> str:
    """What the rejected draft's session is told before it tries again."""
    return f"{CHANGELOG} has no '{SECTION}' heading yet: add it at the top and the entry under it."


def build(workspace: str | Path = ".") -> Workflow:
    """The workflow, for the project in `workspace` (`flower run` calls build() from there)."""
    workbench = Workbench(Path(workspace))  # .flower/: notes/, artifacts/, INDEX.md
    goal_path = workbench.notes / "changelog-goal.md"
    channel = HumanChannel(log_path=workbench.notes / "changelog-questions.md")
    draft = Step(
        "draft",
        WRITER,
        f"Add an entry for the new `report --json` flag to {CHANGELOG}.",
        retries=2,  # up to three attempts, each judged by the gate
        gate=has_section,
        on_reject=explain,
    )
    goal = goal_step(channel, goal_path=goal_path, brief_key="brief", name="goal")
    polish = with_goal(
        Step(
            "polish",
            WRITER,
            lambda ctx: f"Polish the {CHANGELOG} entry until it meets this goal:\n\n{ctx['goal']}",
        ),
        channel,
        goal_path=goal_path,
        rounds=3,  # judged rounds at most; then the step fails (on_fail="stop")
    )
    return Workflow(
        [draft, goal, polish],
        name="changelog",
        context={"brief": BRIEF},
        channel=channel,
        workbench=workbench,
    )
