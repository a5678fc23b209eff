"""Conformance with seed 000, the Python API page (000_7f88bbb3130c0149.txt).

Each test states one statement of the page as the seed says it, or, where flower keeps a
deviation, as docs/decisions.md ("Seed conformance (issue 22)") records it. The docstring of
each test names the section of the page. Signatures as a whole are pinned by
test_signatures.py.
"""

from __future__ import annotations

import inspect
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import HookMatcher

from flower.core import lang
from flower.core.agent import AgentSpec
from flower.core.brief import Brief
from flower.core.goal import Goal, Verdict
from flower.core.guard import HANDS_ON, delegate_guard
from flower.core.handoff import Handoff
from flower.core.human import HumanChannel
from flower.core.mounting import guards
from flower.core.roles import COORDINATOR_RULES, coordinator, worker
from flower.core.runtime import Runtime
from flower.core.texts.en import EN
from flower.core.workbench import Workbench
from flower.stores import (
    EphemeralPolicy,
    PrunePolicy,
    PruningSessionStore,
    TrimmingSessionStore,
    TrimPolicy,
)
from flower.testing import Always, FakeAPI, When, rules, sequence, text
from flower.testing.demo import ROLE_MARKERS, verdict_reply
from flower.workflow.base import Step, Workflow
from flower.workflow.starter import GOAL_KEY, starter_flow, with_goal

BOSS = coordinator("协调者", "", {"coder": worker("codes", "You code.", isolate=True)})


def matchers(hooks: dict[str, list[HookMatcher]], event: str) -> list[str | None]:
    return [m.matcher for m in hooks.get(event, [])]


async def ruling(matcher: HookMatcher, tool: str, agent_id: str | None = None) -> dict[str, Any]:
    """What the matcher's hook answers the CLI for a call of `tool` (python3 hello.py)
    (from the main thread, or from the subagent `agent_id`)."""
    hook_input: dict[str, Any] = {
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": {"command": "python3 hello.py"},
    }
    if agent_id:
        hook_input["agent_id"] = agent_id
    output = await matcher.hooks[0](hook_input, None, {"signal": None})  # type: ignore[arg-type]
    decided: dict[str, Any] = dict(output.get("hookSpecificOutput", {}))  # type: ignore[call-overload]
    return decided


async def is_delegate_guard(matcher: HookMatcher, artifacts: str) -> bool:
    """000, "delegate_guard()": the main thread's hands-on call is denied with the advice to
    delegate through the Agent tool, long outputs into `artifacts` (a glancing coordinator's
    denial goes on to say what it may run itself); a subagent's passes. (A
    whitelist_guard denies the same tools saying the role has no such tool, and has no
    opinion on a subagent's call.)"""
    main = await ruling(matcher, "Bash")
    sub = await ruling(matcher, "Bash", agent_id="a1")
    said = str(main.get("permissionDecisionReason", ""))
    return (
        matcher.matcher == HANDS_ON
        and main.get("permissionDecision") == "deny"
        and said.startswith(lang.text("guard.delegate", tool="Bash", artifacts=artifacts))
        and "Agent" in said
        and artifacts in said
        and sub.get("permissionDecision") == "allow"
    )


@pytest.mark.anyio
async def test_without_a_workbench_a_coordinator_still_has_its_walls() -> None:
    """000, "Couche hook" (« avec Runtime(workbench=False), workbench_hooks n'est pas installé
    du tout »): as decisions.md records, only the workbench's own hooks (index, spill) go;
    delegate_guard and isolate_guard follow from the role and stay, so a delegate_only
    coordinator never runs without a wall on its main thread, and that wall is
    delegate_guard (« n'installe donc que celui-ci »), not whitelist_guard."""
    without = guards(BOSS, workbench=None, spill_threshold=4000)
    assert matchers(without, "PreToolUse") == [HANDS_ON, "Agent"]
    assert await is_delegate_guard(without["PreToolUse"][0], lang.text("guard.artifacts"))
    assert "PostToolUse" not in without  # no index_guard, no spill_guard


@pytest.mark.anyio
async def test_with_a_workbench_its_hooks_come_on_top(tmp_path: Path) -> None:
    """000, "workbench_hooks()": PreToolUse delegate_guard (+ isolate_guard for a marked
    role), PostToolUse index_guard then spill_guard."""
    workbench = Workbench(tmp_path)
    hooks = guards(BOSS, workbench=workbench, spill_threshold=4000)
    assert matchers(hooks, "PreToolUse") == [HANDS_ON, "Agent"]
    artifacts = f"{workbench.show(workbench.artifacts)}/"
    assert await is_delegate_guard(hooks["PreToolUse"][0], artifacts)
    assert matchers(hooks, "PostToolUse") == [
        "Write|Edit",
        "Bash|Read|Grep|Glob|WebFetch|WebSearch",
    ]


def test_the_store_layers_take_their_policies_positionally(tmp_path: Path) -> None:
    """000, "TrimmingSessionStore" and 003, "PruningSessionStore + PrunePolicy": the seeds'
    signatures are positional, `(path, workspace, policy, ephemeral)` and
    `(path, workspace, policy, prune, ephemeral)`."""
    trim, prune, ephemeral = (
        TrimPolicy(keep_recent=3),
        PrunePolicy(keep_denials=0),
        EphemeralPolicy(),
    )
    trimming = TrimmingSessionStore(tmp_path / "a.db", tmp_path, trim, ephemeral)
    pruning = PruningSessionStore(tmp_path / "b.db", tmp_path, trim, prune, ephemeral)
    try:
        assert (trimming.policy, trimming.ephemeral) == (trim, ephemeral)
        assert (pruning.policy, pruning.prune, pruning.ephemeral) == (trim, prune, ephemeral)
    finally:
        trimming.close()
        pruning.close()


@pytest.mark.anyio
async def test_delegate_guard_may_be_told_the_workbench_its_advice_names(tmp_path: Path) -> None:
    """000, "delegate_guard()": `delegate_guard(*, tools=HANDS_ON, allow_glance=False)`; the
    denial says to delegate through Agent and to write long outputs into artifacts/. As
    decisions.md records, one keyword is added, `workbench=None`, so the denial names the
    real artifacts/ folder instead of a generic one; without it the seed's call is unchanged."""
    parameters = inspect.signature(delegate_guard).parameters
    assert list(parameters) == ["tools", "allow_glance", "workbench"]
    assert all(p.kind is p.KEYWORD_ONLY for p in parameters.values())
    assert parameters["workbench"].default is None
    workbench = Workbench(tmp_path)
    assert await is_delegate_guard(delegate_guard(), lang.text("guard.artifacts"))
    named = f"{workbench.show(workbench.artifacts)}/"
    assert await is_delegate_guard(delegate_guard(workbench=workbench), named)


def test_the_documents_compare_by_content_not_by_where_they_were_read(tmp_path: Path) -> None:
    """000, "Documents": Brief and Handoff declare `path` with compare=False. As decisions.md
    records, Goal's `path` is compare=False too, and Verdict has the same `path` field (all
    four share one base, whose write()/load() set it)."""
    brief = Brief("做 X", "能跑", "只改 src", "无")
    assert Brief.load(brief.write(tmp_path / "需求.md")) == brief  # read back: path set
    assert Brief("做 X", path=tmp_path / "b.md") == Brief("做 X")
    assert Handoff(doing="写", next="测", path=tmp_path / "h.md") == Handoff(doing="写", next="测")
    assert Goal("做 X", ["a"], path=tmp_path / "a.md") == Goal("做 X", ["a"], path=None)
    verdict = Verdict.parse("## 结论\n达成\n## 理由\n都过了")
    assert verdict.path is None and verdict == Verdict("achieved", "都过了", [])
    assert Verdict.load(verdict.write(tmp_path / "v.md")) == verdict


def test_runtime_keeps_the_seeds_constants() -> None:
    """000, "Runtime", "Attributs publics": INTERRUPTED = "interrupted-by-human",
    HANDOFF_DUE = "context-full-handoff", INTERRUPT_NOTE."""
    assert Runtime.INTERRUPTED == "interrupted-by-human"
    assert Runtime.HANDOFF_DUE == "context-full-handoff"
    # « un appel d'outil en vol renvoyant interrupted est un effet de bord normal de
    # l'interruption, pas une panne d'environnement »: the note says each part of that, in
    # the seeds' language as the constant, and in English as the en run is shown it
    note = Runtime.INTERRUPT_NOTE
    for part in ("打断了你", "正在执行的工具调用", "interrupted", "正常副作用", "不是环境故障"):
        assert part in note, part
    assert note == lang.text("runtime.interrupt_note") and note != Runtime.CARRY_ON_NOTE
    english = EN["runtime.interrupt_note"]
    for part in ("interrupted you", "in flight", "normal side effect", "not a failure"):
        assert part in english, part


@pytest.mark.anyio
async def test_an_interrupt_with_no_session_to_resume_ends_the_step_as_interrupted(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """000, "Runtime.run(...)", exit 2: « Sans session_id obtenu, il ne reste qu'à
    s'arrêter ». As decisions.md records, the step then ends with error Runtime.INTERRUPTED
    (never ok), and what the attempt itself reported goes to `errors`. Here the human
    interrupts a step whose session cannot be resumed (the CLI finds no such conversation)."""
    flower_env.script = sequence(text("never asked"))
    runtime = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        runtime.interrupt("stop, use the other file")
        result = await runtime.run(AgentSpec("w", ""), "go", resume=str(uuid.uuid4()))
    finally:
        runtime.close()
    assert not result.ok and result.error == Runtime.INTERRUPTED
    assert result.session_id is None and result.attempts == 1
    assert len(result.errors) == 1 and "No conversation found" in result.errors[0]
    row = json.loads(runtime.manifest_path.read_text())[-1]
    assert (row["ok"], row["error"]) == (False, Runtime.INTERRUPTED)
    assert flower_env.requests == []


def test_starter_flow_keeps_the_asks_of_the_run_under_run_dir(tmp_path: Path) -> None:
    """000, "starter_flow()": `run_dir` is in the seed's signature with no stated use. As
    decisions.md records, it is where the run keeps the asks it was started or amended with
    (ask-history.json), so the same ask given again continues the run instead of amending it."""
    workspace, runs = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    starter_flow("做一个 X", workspace=workspace, run_dir=runs)
    assert json.loads((runs / "ask-history.json").read_text()) == ["做一个 X"]


def test_starter_flow_hands_its_instructions_to_the_coordinator(tmp_path: Path) -> None:
    """000, "starter_flow()": the seed shows the coordinator built with `""` as instructions.
    As decisions.md records, starter_flow's `instructions` go to the coordinator (the role
    that briefs the workers), so a program's own rules steer the work; with the default ""
    the coordinator is the seed's."""
    flow = starter_flow(
        "做一个 X", workspace=tmp_path, run_dir=tmp_path / "r1", instructions="只改 src/ 下的文件"
    )
    boss = flow.steps[-1].spec
    assert boss.delegate_only and boss.instructions.startswith(COORDINATOR_RULES)
    assert boss.instructions.endswith("只改 src/ 下的文件")
    plain = starter_flow("做一个 X", workspace=tmp_path, run_dir=tmp_path / "r2").steps[-1].spec
    assert plain.instructions == COORDINATOR_RULES


def test_a_section_body_may_follow_a_hash_heading_on_its_line() -> None:
    """000, "Brief", parsing rules: « La regex de titre tolère ## 目标 / **目标** / 目标: /
    3. 边界, et tolère aussi que le corps suive directement le titre »: `## 目标 做 X` is
    the heading 目标 with the body 做 X."""
    brief = Brief.parse(
        "## 目标 做一个 X\n## 验收标准 能跑\n更多\n## 边界 只改 src\n## 未知与假设 无"
    )
    assert brief == Brief("做一个 X", "能跑\n更多", "只改 src", "无")


def test_a_word_that_merely_starts_with_a_title_is_no_heading() -> None:
    """000, "Brief", parsing rules, the limits decisions.md records: the body may follow after
    a space only on a `#` heading line; `## 目标管理` (no space) and a numbered line of a
    body (`1. 目标 文件存在`) stay text."""
    brief = Brief.parse("## 验收标准\n1. 目标 文件存在\n## 目标管理\n看板\n## 目标\n做 X")
    assert brief.goal == "做 X"
    assert brief.accept == "1. 目标 文件存在\n## 目标管理\n看板"


@pytest.mark.anyio
async def test_a_goal_given_in_ctx_is_the_one_the_judge_rules_on(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """000:257, with_goal's gate, step 3: « en priorité un Goal complet dans ctx[GOAL_KEY],
    sinon Goal.load(goal_path) ». `Workflow(context={"_goal": Goal(...)})` is that first
    source: the judge's request carries it, though no goal file exists."""
    given = Goal("hello.py 打印 ctx 里给的目标", ["python3 hello.py 输出 hello"])
    flower_env.script = rules(
        (
            When(kind="main", system_contains=ROLE_MARKERS["judge"][0]),
            Always(verdict_reply("达成")),
        ),
        (When(), Always(text("做完了"))),
    )
    channel = HumanChannel()
    work = Step("干活", AgentSpec("w", ""), "写 hello.py")
    step = with_goal(work, channel, goal_path=workspace / "nowhere.md")
    runtime = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        ctx = await Workflow([step], context={GOAL_KEY: given}).run(runtime)
    finally:
        runtime.close()
    judged = [r for r in flower_env.requests if ROLE_MARKERS["judge"][0] in r.system_text]
    assert judged and "ctx 里给的目标" in judged[0].last_user_text
    assert ctx[GOAL_KEY] == given and not (workspace / "nowhere.md").exists()
