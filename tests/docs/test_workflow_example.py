"""examples/workflows/changelog.py, the workflow docs/workflow-design.md walks through, runs
as documented: against the fake Messages API, on the real Claude Code CLI, in-process and
through `flower run`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from flower.core.goal import Goal
from flower.core.runtime import Runtime
from flower.testing import FakeAPI, Reply, Request, When, rules, text, tool, working_directory

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workflows" / "changelog.py"
PR = "(#42)"
DRAFT = "# Changelog\n\n- report has a --json flag\n"
SECTIONED = "# Changelog\n\n## Unreleased\n\n- `report --json` prints the report as JSON.\n"
POLISHED = f"# Changelog\n\n## Unreleased\n\n- `report --json` prints the report as JSON {PR}.\n"
GOAL = (
    "## Goal\nCHANGELOG.md announces `report --json` under Unreleased\n\n"
    f"## Checklist\n- the entry is under ## Unreleased\n- the entry names its pull request {PR}"
)


def writer(request: Request) -> Reply:
    """One Write per prompt, then a short report. What it writes depends on what it was told:
    the first draft forgets the section, the first polish forgets the pull request."""
    last = request.messages[-1].get("content") if request.messages else None
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return text("CHANGELOG.md is updated.")  # the Write has run
    said = request.prompt
    if "the pull request is not named" in said:  # the judge's reason, sent back
        content = POLISHED
    elif "heading yet" in said or "Polish" in said:  # on_reject's text, or the polish step
        content = SECTIONED
    else:
        content = DRAFT
    path = f"{working_directory(request)}/CHANGELOG.md"
    return tool("Write", {"file_path": path, "content": content})


def cast(workspace: Path) -> Callable[[Request], Reply]:
    def verdict(request: Request) -> Reply:
        if PR in (workspace / "CHANGELOG.md").read_text(encoding="utf-8"):
            return text("## Verdict\nachieved\n\n## Reason\nboth checks hold")
        return text(
            "## Verdict\nnot yet\n\n## Reason\nthe pull request is not named\n\n"
            f"## Failed checks\n- the entry names its pull request {PR}"
        )

    return rules(
        (
            When(kind="main", system_contains="你是裁判", contains="设定目标和验收清单"),
            lambda r: text(GOAL),
        ),
        (When(kind="main", system_contains="你是裁判", contains="独立判定"), verdict),
        (When(kind="main", system_contains="CHANGELOG.md"), writer),
    )


async def test_the_example_drafts_gates_and_polishes_under_the_goal(
    flower_env: FakeAPI,
    workspace: Path,
    load_file: Callable[[Path], ModuleType],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flower_env.script = cast(workspace)
    monkeypatch.chdir(workspace)
    flow = load_file(EXAMPLE).build()
    runtime = Runtime(workspace=workspace, run_dir=workspace / "runs", workbench=flow.workbench)
    try:
        ctx = await flow.run(runtime)
    finally:
        runtime.close()

    assert "_failed_at" not in ctx and "_aborted" not in ctx, (
        ctx.get("_failed_at"),
        [(r.step, r.ok, r.error, r.text[:200]) for r in runtime.results],
    )
    assert (workspace / "CHANGELOG.md").read_text(encoding="utf-8") == POLISHED
    goal = Goal.load(workspace / ".flower" / "notes" / "changelog-goal.md")
    assert goal is not None and goal.complete() and len(goal.checks) == 2
    steps = [r.step for r in runtime.results]
    assert steps == [
        "draft",
        "draft#round2",
        "goal",
        "polish",
        "polish·判定#1",
        "polish#round2",
        "polish·判定#2",
    ]
    by_step = {r.step: r for r in runtime.results}
    # on_reject resumed the rejected sessions; the judges were fresh sessions every time
    assert by_step["draft#round2"].session_id == by_step["draft"].session_id
    assert by_step["polish#round2"].session_id == by_step["polish"].session_id
    assert by_step["polish·判定#1"].session_id != by_step["polish·判定#2"].session_id
    told = [r.prompt for r in flower_env.main_requests()]
    assert any("has no '## Unreleased' heading yet" in p for p in told)  # explain()
    assert any("评审认为目标还没有达成" in p and PR in p for p in told)  # the verdict's feedback
    assert any("Goal: CHANGELOG.md tells users" in p for p in told)  # the brief, via context


def test_flower_run_runs_the_example_as_the_docs_say(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    fake_api.script = cast(workspace)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env |= {**fake_api.env(home=claude_home), "XDG_CONFIG_HOME": str(claude_home / ".config")}
    done = subprocess.run(
        [sys.executable, "-m", "flower.cli", "run", str(EXAMPLE), "--timeout", "0"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workspace / "CHANGELOG.md").read_text(encoding="utf-8") == POLISHED
    assert "完成 · $" in done.stdout  # the end line, in the suite's zh
    assert (workspace / "runs" / "manifest.json").is_file()
