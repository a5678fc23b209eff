"""Seed statements docs/conformance.md found with no test of their own (issue 35's fresh
audit). Each docstring names the page:line it checks; each was run once against a hand
mutation of what it checks (docs/conformance.md, "Mutations")."""

from __future__ import annotations

import dataclasses
import inspect
import os
import threading
import time
from pathlib import Path
from typing import Any, get_args

import pytest
from claude_agent_sdk import AgentDefinition

import flower
import flower.workflow
from flower.core import guard, roles
from flower.core.agent import AgentSpec, HandoffPolicy
from flower.core.events import Event
from flower.core.human import Ask, HumanChannel
from flower.core.resilience import Resilience
from flower.core.runtime import Runtime
from flower.core.texts.en import EN
from flower.core.texts.zh import ZH
from flower.core.workbench import Workbench
from flower.stores import (
    EphemeralPolicy,
    PrunePolicy,
    PruningSessionStore,
    SqliteSessionStore,
    TrimmingSessionStore,
    TrimPolicy,
    is_ephemeral,
)
from flower.testing import (
    Always,
    FakeAPI,
    Reply,
    Request,
    Usage,
    When,
    prompt_too_long,
    rules,
    sequence,
    text,
    tool,
)
from flower.testing.demo import ROLE_MARKERS, verdict_reply
from flower.workflow.base import Step, StepAbort, Workflow
from flower.workflow.starter import (
    ACCEPT,
    AMEND,
    BRIEF_KEY,
    MISSING_KEY,
    VERDICT_KEY,
    clarify_step,
    goal_step,
    starter_flow,
    with_goal,
)
from tests.processes import wait_running_below

BRIEF = (
    "## 目标\n写 hello.txt\n\n## 验收标准\n- 文件存在\n\n## 边界\n只动 hello.txt\n\n"
    "## 未知与假设\n无"
)
GOAL = (
    "## 目标\n工作区里有 hello.txt\n\n## 验收清单\n- hello.txt 存在\n"
    "- [此环境无法验证:在 macOS 上能打开]"
)


# -- 000, Runtime --------------------------------------------------------------------------


def test_runtime_builds_the_outermost_store_from_its_parameters(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """000:41 (always PruningSessionStore(run_dir/"sessions.db", workspace, policy,
    ephemeral, prune=PrunePolicy(keep_denials)); rt.store may be overwritten), 003:210
    (trim=False still prunes), 003:220 (keep_denials reaches the prune layer, default 1),
    000:839 (the trimming layer's public attributes)."""
    runs = workspace.parent / "runs"
    rt = Runtime(workspace=workspace, run_dir=runs)
    try:
        store = rt.store
        assert type(store) is PruningSessionStore
        assert Path(store.path) == runs / "sessions.db" and Path(store.workspace) == workspace
        assert store.prune.keep_denials == 1 and store.prune.enabled
        assert not store.policy.enabled and store.ephemeral.enabled  # trim=False, ephemeral=True
        assert store.last_report == {}
        other = SqliteSessionStore(workspace.parent / "other.db")
        rt.store = other
        assert rt.store is other
        other.close()
    finally:
        rt.store = store
        rt.close()
    rt = Runtime(workspace=workspace, run_dir=runs, trim=True, ephemeral=False, keep_denials=3)
    try:
        assert rt.store.policy.enabled and not rt.store.ephemeral.enabled
        assert rt.store.prune.keep_denials == 3
    finally:
        rt.close()


@pytest.mark.anyio
async def test_the_interrupt_note_is_in_the_language_of_the_run(
    flower_env: FakeAPI, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """000:47, INTERRUPT_NOTE after the human's words on the resume: the seeds' text in zh
    (Runtime.INTERRUPT_NOTE), the English one in en, as decisions.md's language rule has
    everything the model is shown follow the setting."""
    monkeypatch.setenv("FLOWER_LANG", "en")
    flower_env.script = rules(
        (When(kind="main", contains="use the other file"), sequence(text("switched files"))),
        (
            When(kind="main"),
            sequence(tool("Bash", {"command": "python3 -c 'import time; time.sleep(20)'"})),
        ),
    )
    rt = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")

    def human() -> None:
        flower_env.wait_for(lambda requests: len(requests) >= 1, timeout=30)
        wait_running_below(os.getpid(), "python3", "time.sleep(20)")  # the tool runs now
        rt.interrupt("use the other file")

    thread = threading.Thread(target=human)
    thread.start()
    try:
        result = await rt.run(AgentSpec("w", "", allowed_tools=["Bash"]), "go")
    finally:
        thread.join()
        rt.close()
    assert result.ok
    last = flower_env.main_requests()[-1].last_user_text
    assert "use the other file" in last and EN["runtime.interrupt_note"] in last
    assert (
        Runtime.INTERRUPT_NOTE not in last
        and ZH["runtime.interrupt_note"] == Runtime.INTERRUPT_NOTE
    )


async def run_with_one_handoff(
    workspace: Path, spec: AgentSpec
) -> tuple[flower.StepResult, Workbench, list[Event]]:
    """`spec` run as step 改 ("改十个文件") by a Runtime with a workbench, a 200k window and
    at most one handoff; the events it emitted."""
    wb = Workbench(workspace)
    rt = Runtime(
        workspace=workspace,
        run_dir=workspace.parent / "runs",
        workbench=wb,
        handoff=HandoffPolicy(window=200_000, max_generations=1),
    )
    seen: list[Event] = []
    try:
        result = await rt.run(spec, "改十个文件", step_name="改", on_event=seen.append)
    finally:
        rt.close()
    return result, wb, seen


@pytest.mark.anyio
async def test_a_context_full_past_max_generations_stops_with_a_diagnosis(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """000:69: « On vérifie d'abord len(result.retired) >= handoff.max_generations ; si
    dépassé, l'erreur est remplacée par un diagnostic et on sort ». With max_generations=1
    the first overflow hands off (000:76: `done` with degraded / path / sections) and the
    second stops the step with the diagnosis, no third session."""
    flower_env.script = Always(text("never", fault=prompt_too_long()))
    result, wb, seen = await run_with_one_handoff(workspace, AgentSpec("w", ""))
    assert not result.ok and len(result.retired) == 1
    assert "max_generations=1" in (result.error or "")
    sessions = {r.headers.get("x-claude-code-session-id") for r in flower_env.main_requests()}
    assert len(sessions) == 2
    [done] = [e for e in seen if e.kind == "handoff" and e.payload.get("phase") == "done"]
    assert done.payload["degraded"] is True
    assert Path(done.payload["path"]) == wb.notes / "交接-改.md"
    assert isinstance(done.payload["sections"], list)


# -- 000, Workflow --------------------------------------------------------------------------


def test_ctx_is_the_workflow_packages_name_not_the_top_levels() -> None:
    """000:107: « Ctx = dict[str, Any] (présent dans flower.workflow.__all__, absent du
    __all__ de premier niveau) »."""
    assert "Ctx" in flower.workflow.__all__ and "Ctx" not in flower.__all__
    assert flower.workflow.Ctx == dict[str, Any]


def test_step_abort_is_an_exception_a_gate_raises() -> None:
    """000:174: `class StepAbort(Exception)`: a program catches it as an Exception."""
    assert issubclass(StepAbort, Exception) and flower.StepAbort is StepAbort


@pytest.mark.anyio
async def test_clarify_step_fills_the_seeds_fields(flower_env: FakeAPI, workspace: Path) -> None:
    """000:202-208: resume_prompt = CLARIFY_RESUME; an incomplete brief writes MISSING_KEY
    and goes another round; a complete one is frozen and put in ctx three ways (BRIEF_KEY,
    ctx[name] = its prompt_block, MISSING_KEY popped); reduce hands on the prompt_block, not
    the raw text; resume_from stays None, so the next step is a fresh session."""
    drafts = iter([text("## 目标\n写 hello.txt"), text("闲话一句,别传下去\n" + BRIEF)])

    def script(request: Request) -> Reply:
        if ROLE_MARKERS["clarify"][0] in request.system_text:
            return next(drafts)  # the first session's draft lacks three sections
        return text("做完了")

    flower_env.script = script
    channel = HumanChannel(timeout_s=0)
    brief_path = workspace / "需求.md"
    ask = clarify_step(channel, brief_path=brief_path, prompt="帮我写 hello.txt", retries=1)
    assert ask.resume_prompt == ZH["starter.clarify_resume"] and ask.resume_from is None
    missing_seen: list[Any] = []

    def work_prompt(ctx: dict[str, Any]) -> str:
        missing_seen.append(ctx.get(MISSING_KEY))
        return "照需求做:" + ctx["确认需求"]

    work = Step("干活", AgentSpec("w", ""), work_prompt)
    judged: list[Any] = []  # what the gate left in ctx[MISSING_KEY] after each draft
    inner = ask.gate
    assert inner is not None

    def gate(result: flower.StepResult, ctx: dict[str, Any]) -> bool:
        passed = bool(inner(result, ctx))
        judged.append((passed, ctx.get(MISSING_KEY)))
        return passed

    rt = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        ctx = await Workflow([dataclasses.replace(ask, gate=gate), work], channel=channel).run(rt)
    finally:
        rt.close()
    assert judged == [(False, ["验收标准", "边界", "未知与假设"]), (True, None)]
    brief = ctx[BRIEF_KEY]
    assert brief.complete() and brief == type(brief).load(brief_path)
    assert ctx["确认需求"] == brief.prompt_block() and MISSING_KEY not in ctx
    assert missing_seen == [None]
    [first_work] = [r for r in flower_env.main_requests() if "照需求做" in r.last_user_text]
    assert "闲话一句" not in first_work.last_user_text
    assert "assistant" not in [m["role"] for m in first_work.messages]  # a fresh session


def test_goal_step_takes_can_run_through_spec_kw_and_has_no_resume_prompt() -> None:
    """000:228 (no can_run parameter; can_run=True through **spec_kw gives the judge Bash)
    and 000:232 (no resume_prompt: setting the goal sends the whole brief again)."""
    channel = HumanChannel(timeout_s=0)
    assert "can_run" not in inspect.signature(goal_step).parameters
    plain = goal_step(channel, goal_path="目标.md")
    running = goal_step(channel, goal_path="目标.md", can_run=True)
    assert "Bash" not in plain.spec.allowed_tools and "Bash" in running.spec.allowed_tools
    assert plain.resume_prompt is None and running.resume_prompt is None


@pytest.mark.anyio
async def test_an_unverifiable_check_is_announced_when_the_goal_is_set(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """000:230: a goal with `[此环境无法验证:…]` entries emits Event("task", payload
    {unverifiable, total, path}) the moment it is set, before any work."""
    flower_env.script = Always(text(GOAL))
    channel = HumanChannel(timeout_s=0)
    goal_path = workspace / "目标.md"
    step = goal_step(channel, goal_path=goal_path)
    seen: list[Event] = []
    rt = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        await Workflow([step], channel=channel, context={"确认需求": BRIEF}).run(
            rt, on_event=seen.append
        )
    finally:
        rt.close()
    [task] = [e for e in seen if e.kind == "task"]
    assert task.payload["total"] == 2 and len(task.payload["unverifiable"]) == 1
    assert "macOS" in task.payload["unverifiable"][0] and task.payload["path"] == str(goal_path)


def test_with_goal_is_a_replace_of_the_step() -> None:
    """000:251 (replace(step, retries=max(0, rounds - 1), gate, on_reject): resume_prompt and
    every other field kept), 000:253 (the gate is async), 000:268 (on_reject is sync and
    returns "" without a verdict)."""
    channel = HumanChannel(timeout_s=0)
    step = Step("干活", AgentSpec("w", ""), "做", resume_prompt="接着做", when=lambda ctx: True)
    guarded = with_goal(step, channel, goal_path="目标.md")
    assert guarded.retries == 2 and with_goal(step, channel, goal_path="g", rounds=0).retries == 0
    for f in dataclasses.fields(Step):
        if f.name not in ("retries", "gate", "on_reject"):
            assert getattr(guarded, f.name) == getattr(step, f.name), f.name
    assert inspect.iscoroutinefunction(guarded.gate)
    assert not inspect.iscoroutinefunction(guarded.on_reject)
    assert guarded.on_reject is not None and guarded.on_reject(None, {}) == ""  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_with_goal_without_a_runtime_aborts() -> None:
    """000:255: « ctx["_runtime"] absent → lève StepAbort. Ne pas faire semblant que ça passe »:
    the gate called outside a Workflow's run has no Runtime."""
    guarded = with_goal(Step("干活", AgentSpec("w", ""), "做"), HumanChannel(), goal_path="g.md")
    assert guarded.gate is not None
    with pytest.raises(StepAbort):
        await guarded.gate(flower.StepResult("干活", ok=True, text="好了"), {})


def unreachable_then_achieved() -> Any:
    """The judge: unreachable in its first session, achieved in every later one; the worker
    answers plainly."""
    judged: list[int] = []

    def script(request: Request) -> Reply:
        if ROLE_MARKERS["judge"][0] not in request.system_text:
            return text("做完了")
        judged.append(request.index)
        if len(judged) > 1:
            return verdict_reply("达成")
        return text("## 结论\n无法达成\n\n## 理由\n这里是 Linux,目标要求 macOS")

    return script


@pytest.mark.anyio
@pytest.mark.parametrize("choice", ["accept", "amend", "free"])
async def test_the_humans_three_answers_to_an_unreachable_goal(
    choice: str, flower_env: FakeAPI, workspace: Path
) -> None:
    """000:264-266: accept → the step passes on that verdict; change the goal → a second
    question, the amended goal written and in ctx, judged next round; anything else → "your
    verdict is wrong", the words in the verdict's reason, sent back with the work."""
    flower_env.script = unreachable_then_achieved()
    channel = HumanChannel(timeout_s=60)
    goal_path = workspace / "目标.md"
    answers = {
        "accept": [ACCEPT[0]],
        "amend": [AMEND[0], "目标改成 hello.txt 在 Linux 上存在"],
        "free": ["你判断错了,这里其实是 macOS"],
    }[choice]
    given: list[str] = []

    def human() -> None:
        for answer in answers:
            flower_env.wait_for(lambda _: bool(channel.pending()), timeout=60)
            ask = channel.pending()[0]
            given.append(ask.question)
            channel.answer(ask.id, answer)
            flower_env.wait_for(
                lambda _, done=ask.id: not channel.pending() or channel.pending()[0].id != done,
                timeout=60,
            )

    from flower.core.goal import Goal

    Goal("工作区里有 hello.txt", ["hello.txt 存在"]).write(goal_path)
    thread = threading.Thread(target=human)
    thread.start()
    step = with_goal(Step("干活", AgentSpec("w", ""), "写 hello.txt"), channel, goal_path=goal_path)
    rt = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        ctx = await Workflow([step], channel=channel).run(rt)
    finally:
        thread.join()
        channel.close()
        rt.close()
    judged = [r for r in flower_env.main_requests() if ROLE_MARKERS["judge"][0] in r.system_text]
    assert "_failed_at" not in ctx and len(given) == len(answers)
    if choice == "accept":
        assert len(judged) == 1 and ctx[VERDICT_KEY].unreachable
    elif choice == "amend":
        assert len(judged) == 2 and "目标改成" in judged[1].last_user_text
        assert "目标改成" in goal_path.read_text()
    else:
        assert len(judged) == 2 and ctx[VERDICT_KEY].achieved
        work = [r for r in flower_env.main_requests() if r not in judged]
        assert "这里其实是 macOS" in work[-1].last_user_text


def test_starter_flow_is_assembled_as_the_seed_shows(tmp_path: Path) -> None:
    """000:292-299 and 004:259: three steps (clarify, set the goal, work under the goal);
    Workflow(name="starter", channel, workbench); the channel logs to
    <notes>/问答记录.md, amends the brief, and carries max_asks and timeout_s; the work is
    coordinator("协调者", ...) over one worker "coder", isolated as asked."""
    flow = starter_flow(
        "做 X", workspace=tmp_path, run_dir=tmp_path / "runs", max_asks=2, timeout_s=5
    )
    notes = tmp_path / ".flower" / "notes"
    assert flow.name == "starter" and [s.name for s in flow.steps] == [
        "确认需求",
        "设定目标",
        "干活",
    ]
    ch = flow.channel
    assert (ch.log_path, ch.amend_path) == (notes / "问答记录.md", notes / "需求.md")
    assert (ch.max_asks, ch.timeout_s) == (2, 5)
    assert flow.workbench.root == tmp_path / ".flower"
    boss = flow.steps[2].spec
    assert boss.name == "协调者" and list(boss.agents) == ["coder"] and boss.delegate_only
    assert flow.steps[2].gate is not None and flow.steps[2].retries == 2  # under the goal
    assert not guard.wants_isolation(boss.agents["coder"])


def test_the_workbench_is_where_the_seed_puts_it(tmp_path: Path, flower_env: FakeAPI) -> None:
    """000:322 and 000:698: the starter's workbench is <ws>/.flower, or
    <ws>.parent/.flower-<ws.name> when isolated; Runtime(workbench=True) uses
    <run_dir>/workbench. Not one directory: do not mix them."""
    import subprocess

    ws = tmp_path / "repo"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    assert (
        starter_flow("做 X", workspace=ws, run_dir=tmp_path / "r1").workbench.root == ws / ".flower"
    )
    isolated = starter_flow("做 X", workspace=ws, run_dir=tmp_path / "r2", isolate=True)
    assert isolated.workbench.root == tmp_path / ".flower-repo"
    rt = Runtime(workspace=ws, run_dir=tmp_path / "r3", workbench=True)
    try:
        assert rt.workbench is not None and rt.workbench.root == tmp_path / "r3" / "workbench"
    finally:
        rt.close()


# -- 000, the roles and the guards ----------------------------------------------------------


def test_the_tool_groups_are_the_seeds_less_what_this_cli_lacks() -> None:
    """000:334-336. WEB_TOOLS is the seed's; COORDINATOR_TOOLS lacks TodoWrite and
    WORKER_TOOLS lacks Glob and Grep, as decisions.md ("The roles' tool groups") records."""
    assert roles.WEB_TOOLS == ["WebFetch", "WebSearch"]
    assert roles.COORDINATOR_TOOLS == ["Agent", "Read"]
    assert roles.WORKER_TOOLS == ["Read", "Write", "Edit", "Bash", "WebFetch", "WebSearch"]
    assert worker("d", "p").tools == roles.WORKER_TOOLS


def worker(description: str, prompt: str, **kw: Any) -> AgentDefinition:
    return roles.worker(description, prompt, **kw)


def test_the_five_roles_and_what_they_give() -> None:
    """000:328 (worker() is an AgentDefinition, the four others AgentSpecs), 000:330 (the
    roles attach no hook), 000:412 (clarify), 000:430 and 000:647 (judge; can_run keeps Bash),
    000:448 (oracle: no channel, the workbench)."""
    ch = HumanChannel(timeout_s=0)
    w = worker("codes", "You code.")
    made = {
        "coordinator": roles.coordinator("c", "", {"coder": w}, channel=ch),
        "clarify": roles.clarify("c", ch),
        "judge": roles.judge("j", ch),
        "oracle": roles.oracle(),
    }
    assert isinstance(w, AgentDefinition) and not isinstance(w, AgentSpec)
    assert all(isinstance(spec, AgentSpec) and spec.hooks is None for spec in made.values())
    clarifier = made["clarify"]
    assert clarifier.allowed_tools == [
        ch.tool_name,
        "Read",
        "Glob",
        "Grep",
        "WebFetch",
        "WebSearch",
    ]
    assert roles.clarify("c", ch, can_read=False).allowed_tools == [ch.tool_name]
    assert list(clarifier.mcp_servers) == list(ch.mcp_servers())
    assert not clarifier.workbench and clarifier.permission_mode == "default"
    judge = made["judge"]
    assert judge.allowed_tools == [ch.tool_name, "Read", "Glob", "Grep"] and not judge.workbench
    assert roles.judge("j", ch, can_run=True).allowed_tools == [
        ch.tool_name,
        "Read",
        "Glob",
        "Grep",
        "Bash",
    ]
    hands_off = guard.whitelist_guard(roles.judge("j", ch, can_run=True).allowed_tools)
    assert hands_off is not None and hands_off.matcher == "Write|Edit|NotebookEdit"
    oracle = made["oracle"]
    assert oracle.allowed_tools == ["Read", "Glob", "Grep"] and oracle.mcp_servers == {}
    assert oracle.workbench and oracle.max_turns == 12 and oracle.max_budget_usd == 0.5


def test_the_five_rule_texts_are_exported() -> None:
    """000:452: « Les cinq constantes sont dans __all__ »."""
    names = ["CLARIFY_RULES", "COORDINATOR_RULES", "JUDGE_RULES", "ORACLE_RULES", "WORKER_RULES"]
    assert set(names) <= set(flower.__all__)
    assert all(isinstance(getattr(flower, n), str) and getattr(flower, n) for n in names)


def test_the_guards_tool_groups_are_the_seeds() -> None:
    """000:626-628."""
    assert guard.HANDS_ON == "Bash|Write|Edit|NotebookEdit"
    assert guard.WRITE_ONLY == "Write|Edit|NotebookEdit"
    assert guard.BULKY == "Bash|Read|Grep|Glob|WebFetch|WebSearch"


# -- 000, the stores --------------------------------------------------------------------------


def test_the_store_layers_inherit_in_the_seeds_order() -> None:
    """000:771: SqliteSessionStore ← TrimmingSessionStore ← PruningSessionStore."""
    assert PruningSessionStore.__mro__[1:3] == (TrimmingSessionStore, SqliteSessionStore)


def test_the_two_spill_folders_differ_when_the_workbench_moves(tmp_path: Path) -> None:
    """000:793 and 003:132: spill_guard writes <workbench.root>/spill/, TrimPolicy
    <workspace>/.flower/spill/; the same folder by default, two once the workbench moves."""
    ws = tmp_path / "ws"
    ws.mkdir()
    inside = Workbench(ws)
    moved = Workbench(ws, home=tmp_path / "runs" / "workbench")
    trim = ws / TrimPolicy().spill_dirname
    assert TrimPolicy().spill_dirname == ".flower/spill"
    assert inside.root / "spill" == trim
    assert moved.root / "spill" == tmp_path / "runs" / "workbench" / "spill" != trim


@pytest.mark.parametrize(
    ("cmd", "expected", "rule"),
    [
        ("", False, "000:816 empty"),
        ("   ", False, "000:816 blank"),
        ("ls $(pwd)", False, "000:817 substitution"),
        ("ls `pwd`", False, "000:817 backticks"),
        ("diff <(ls a) <(ls b)", False, "000:817 process substitution"),
        ("sed -i s/a/b/ f", False, "000:817 a write"),
        ("git status 2>&1", True, "000:818 a safe redirection"),
        ("ls > out.txt", False, "000:818 a redirection left"),
        ("cat < in.txt", False, "000:818 an input redirection left"),
        ("ls &", False, "000:819 background"),
        ("git status && ls -la | wc -l", True, "000:820 each segment whitelisted"),
        ("git status; rm -rf x", False, "000:820 one segment off the list"),
    ],
)
def test_is_ephemeral_decides_in_the_seeds_order(cmd: str, expected: bool, rule: str) -> None:
    """000:814-820, the decision order of is_ephemeral."""
    assert is_ephemeral(cmd) is expected, rule


def test_the_store_policies_keep_the_seeds_defaults() -> None:
    """000:786-802: TrimPolicy, EphemeralPolicy and PrunePolicy's defaults as built."""
    assert (TrimPolicy().keep_recent, TrimPolicy().min_chars, TrimPolicy().enabled) == (
        20,
        2000,
        True,
    )
    e = EphemeralPolicy()
    assert (e.enabled, e.keep_recent, e.max_chars) == (True, 6, 2000)
    assert PrunePolicy().keep_denials == 1


# -- 003 --------------------------------------------------------------------------------------


def test_the_go_path_trims_unless_told_not_to(
    flower_env: FakeAPI, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """003:211: « trim=True. Le CLI du chemin go l'active déjà par défaut ; --no-trim le
    désactive. » The go command's Runtime, as it is built (stopped right after)."""
    import flower.core.runtime as runtime_module
    from flower.cli.go import go

    built: list[bool] = []

    class Built(Exception):
        pass

    class Recording(Runtime):
        def __init__(self, **kw: Any) -> None:
            built.append(bool(kw.get("trim")))
            raise Built

    monkeypatch.setattr(runtime_module, "Runtime", Recording)
    monkeypatch.chdir(workspace)
    for no_trim in (False, True):
        with pytest.raises(Built):
            go(
                ask="做 X",
                workspace=workspace,
                run_dir=workspace.parent / f"runs-{no_trim}",
                timeout=0,
                no_trim=no_trim,
            )
    assert built == [True, False]


def test_resilience_waits_as_the_seed_says() -> None:
    """003:238-251 (Resilience's defaults, the table lost: decisions.md "Resilience
    defaults."; the offline wait 60 minutes as the outage line says) and 003:265 (the
    resume prompt holds no error detail)."""
    r = Resilience()
    assert (r.enabled, r.max_attempts, r.base_delay, r.max_delay) == (True, 8, 4.0, 120.0)
    assert (r.max_offline_wait, r.probe_interval) == (3600.0, 15.0)
    for said in (ZH["resilience.resume"], EN["resilience.resume"]):
        assert not any(w in said for w in ("ENOTFOUND", "503", "{error}", "API Error"))


def test_the_credentials_probe_is_one_small_message(flower_env: FakeAPI) -> None:
    """003:253: « POST <BASE_URL>/v1/messages avec max_tokens=16, timeout de 20 secondes par
    défaut »."""
    import os

    from flower.cli.setup import probe_credentials

    assert inspect.signature(probe_credentials).parameters["timeout"].default == 20.0
    flower_env.script = Always(text("ok"))
    probe_credentials(
        base_url=os.environ["ANTHROPIC_BASE_URL"],
        secret=os.environ.get("ANTHROPIC_API_KEY") or os.environ["ANTHROPIC_AUTH_TOKEN"],
        bearer="ANTHROPIC_API_KEY" not in os.environ,
        model="claude-x",
    )
    [probe] = flower_env.requests
    assert probe.path == "/v1/messages" and probe.body["max_tokens"] == 16


# -- 004 --------------------------------------------------------------------------------------


def test_event_kind_has_the_fifteen_kinds() -> None:
    """004:212-216: EventKind's 15 values, ask/retry/handoff/step among them (made outside
    normalize()); the other eleven as decisions.md ("The 15 kinds") lists them, and the 16th,
    `call` (issue 33: one API response complete, for the traces)."""
    kinds = get_args(flower.EventKind)
    assert len(kinds) == 16 == len(set(kinds)) and kinds[-1] == "call"
    assert {
        "ask",
        "retry",
        "step",
        "handoff",
        "text",
        "tool_call",
        "error",
        "reset",
        "task",
    } <= set(kinds)
    assert {"thinking", "tool_result", "denied", "session", "result", "status"} <= set(kinds)


def test_waited_s_has_one_decimal() -> None:
    """004:242: « сколько секунд ждал, один знак после запятой »."""
    ask = Ask("q1", "?", asked_at=time.time() - 1.26)
    assert ask.waited_s in (1.3, 1.4) and round(ask.waited_s, 1) == ask.waited_s


@pytest.mark.anyio
async def test_the_channel_is_wired_to_the_workflows_sink_only_when_it_has_none(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """004:77-79: Workflow.run wires channel.on_event only if its on_event is not None and
    the channel's is still None; a sink the caller wired stays."""
    flower_env.script = Always(text("好"))
    step = Step("一步", AgentSpec("w", ""), "说好")
    mine: list[Event] = []
    own = HumanChannel(on_event=mine.append)
    bare = HumanChannel()
    seen: list[Event] = []
    rt = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        await Workflow([step], channel=own).run(rt, on_event=seen.append)
        await Workflow([step], channel=bare).run(rt, on_event=seen.append)
    finally:
        rt.close()
    assert own.on_event == mine.append
    assert bare.on_event is not None and bare.on_event == seen.append


@pytest.mark.anyio
async def test_on_step_is_called_after_every_step_failed_ones_too(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """004:81: on_step(step, result) once after each step, a failed one included, with the
    full StepResult."""
    flower_env.script = Always(text("好"))
    fails = Step("不过", AgentSpec("w", ""), "说好", gate=lambda r, c: False, on_fail="continue")
    passes = Step("过", AgentSpec("w", ""), "说好")
    called: list[tuple[str, bool, str]] = []
    rt = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        await Workflow([fails, passes]).run(
            rt, on_step=lambda step, result: called.append((step.name, result.ok, result.text))
        )
    finally:
        rt.close()
    assert [(name, text) for name, _, text in called] == [("不过", "好"), ("过", "好")]


@pytest.mark.anyio
async def test_the_pages_minimal_program_runs_as_it_is(
    flower_env: FakeAPI, workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """004:22-67: « Ниже подключено всё, код запускается как есть »: the page's sink and
    answerer, its starter_flow and Runtime, rt.close() in finally; the run ends with no
    `_failed_at` and a cost."""
    from flower.testing import starter_cast

    flower_env.script = starter_cast()
    monkeypatch.chdir(workspace)

    def sink(ev: Event) -> None:
        if ev.kind == "step":
            print(f"\n=== {ev.text} ({ev.payload['index']}/{ev.payload['total']}) ===")
        elif ev.kind == "text" and not ev.payload.get("subagent"):
            print(ev.text)

    async def answerer(ch: HumanChannel) -> None:
        while True:
            ask = await ch.next_ask()
            if ask is None:
                continue
            ch.answer(ask.id, "按你的判断来")

    import asyncio

    wf = flower.starter_flow("帮我做一个 X", workspace=".", run_dir="runs", timeout_s=60)
    rt = flower.Runtime(workspace=".", run_dir="runs", workbench=wf.workbench)
    task = asyncio.create_task(answerer(wf.channel))
    try:
        ctx = await wf.run(rt, on_event=sink)
    finally:
        task.cancel()
        rt.close()
    assert ctx.get("_failed_at") is None and rt.total_cost() > 0
    assert "=== " in capsys.readouterr().out
    # the ctx the program prints from is the run's (each step's result under its name), not
    # the one the workflow started with: else a run stopped halfway could not show its
    # `_failed_at` there, as the page tells the reader to check
    assert [step.name for step in wf.steps if step.name not in ctx] == []


@pytest.mark.anyio
async def test_each_step_starts_with_the_context_level_at_zero(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """000:65: « Chaque étape commence par remettre le niveau de contexte à zéro (self._ctx,
    self._warned = 0, False) »: a second step of the same Runtime near the handoff line is
    warned again ("near" once per generation, and a step is a new one)."""
    flower_env.script = Always(text("好", usage=Usage(input_tokens=160_000)))
    rt = Runtime(
        workspace=workspace,
        run_dir=workspace.parent / "runs",
        handoff=HandoffPolicy(window=230_000),  # at 180k, warned from 160k
    )
    seen: list[Event] = []
    try:
        for name in ("一", "二"):
            await rt.run(AgentSpec("w", ""), "说好", step_name=name, on_event=seen.append)
    finally:
        rt.close()
    near = [e.payload["step"] for e in seen if e.kind == "handoff" and e.payload["phase"] == "near"]
    assert near == ["一", "二"]


def test_the_nine_guard_exports() -> None:
    """000:620: « Neuf exports : cinq fabriques de guard ..., un assembleur, un fusionneur,
    deux fonctions de marquage d'isolation »."""
    nine = [
        "whitelist_guard",
        "delegate_guard",
        "spill_guard",
        "index_guard",
        "isolate_guard",
        "workbench_hooks",
        "merge_hooks",
        "isolated",
        "wants_isolation",
    ]
    assert set(nine) <= set(flower.__all__)
    assert all(getattr(flower, n) is getattr(guard, n) for n in nine)


def test_no_command_line_option_turns_portable_off() -> None:
    """003:84: « aucune option de ligne de commande ne permet de la désactiver — il faut
    passer par l'API Python avec Runtime(portable=False) »."""
    import typer.main

    from flower.cli.app import app

    group = typer.main.get_command(app)
    commands = [group, *group.commands.values()]  # type: ignore[attr-defined]
    options = [
        opt
        for command in commands
        for param in command.params
        for opt in (*param.opts, *param.secondary_opts)
    ]
    assert {"--lang", "--no-trim", "--workspace"} <= set(options)
    assert not [opt for opt in options if "portable" in opt or "setting" in opt]


def test_flower_once_reads_no_answers_and_asks_no_oracle(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    """004:300: `flower once` does not go through the interactive driver: no stdin answers,
    no oracle (`?` lines), no interrupt. Lines typed while it runs reach nobody: the model
    is never shown them and no side runtime (runs/aside) is made."""
    import os
    import subprocess
    import sys

    fake_api.script = Always(text("一步做完"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env |= {**fake_api.env(home=claude_home), "XDG_CONFIG_HOME": str(claude_home / ".config")}
    done = subprocess.run(
        [sys.executable, "-m", "flower.cli", "once", "做一步", "-w", str(workspace)],
        env=env,
        cwd=workspace.parent,
        input="? 进展如何\n改用 B 文件\n",
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert not (workspace.parent / "runs" / "aside").exists()
    assert fake_api.requests and not [r for r in fake_api.requests if r.contains("改用 B 文件")]
    assert not [r for r in fake_api.requests if r.contains("进展如何")]


@pytest.mark.anyio
async def test_without_a_workbench_a_handoff_is_only_in_the_successors_prompt(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """000:78: « sans workbench, rien n'est écrit sur disque, le document est quand même
    transmis au successeur via le prompt »."""
    calls: list[int] = []

    def script(request: Request) -> Reply:
        calls.append(request.index)
        if len(calls) == 1:
            return text("never", fault=prompt_too_long())
        return text("接手了")

    flower_env.script = script
    rt = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    seen: list[Event] = []
    try:
        result = await rt.run(
            AgentSpec("w", ""), "把十个文件改成 UTF-8", step_name="改", on_event=seen.append
        )
    finally:
        rt.close()
    assert result.ok and result.text == "接手了" and len(result.retired) == 1
    successor = flower_env.main_requests()[-1].last_user_text
    assert "把十个文件改成 UTF-8" in successor  # the degraded document's scene
    assert not list(workspace.parent.rglob("交接-*.md"))
    [done] = [e for e in seen if e.kind == "handoff" and e.payload.get("phase") == "done"]
    assert done.payload["path"] is None


@pytest.mark.parametrize(
    "wording",
    [
        "prompt is too long",
        "context length exceeded",
        "maximum context length",
        "too many total text bytes",
        "input length and max_tokens exceed",
    ],
)
def test_the_seeds_overflow_wordings_are_overflows(wording: str) -> None:
    """000:582: is_overflow(*texts) « détecte prompt is too long, context length exceeded,
    maximum context length, too many total text bytes, input length and max_tokens exceed »:
    the page's own words, not the code's list (a test over the code's list cannot notice one
    dropped from it)."""
    from flower.core.handoff import is_overflow

    assert is_overflow(f"API Error: 400 {wording} (request abc)")
    assert not is_overflow("API Error: 529 overloaded")


def test_a_spilled_result_keeps_a_pointer_and_its_first_400_characters(tmp_path: Path) -> None:
    """000:676 and 003:134: « remplacé par un pointeur d'une ligne + les 400 premiers
    caractères », in a file named by the first 16 characters of the content's sha256."""
    import hashlib

    from flower.core.guard import spill_output

    wb = Workbench(tmp_path)
    body = "".join(f"{n:05d}\n" for n in range(2000))
    out = spill_output({"stdout": body}, wb, 4000)
    assert out is not None
    pointer, preview = out["stdout"].split("\n", 1)
    assert preview == body[:400]
    name = hashlib.sha256(body.encode()).hexdigest()[:16] + ".txt"
    assert name in pointer and (wb.spill / name).read_text(encoding="utf-8") == body


@pytest.mark.parametrize("word", ["无法验证", "没法验证", "验证不了", "无法判定", "unverifiable"])
def test_the_seeds_unverifiable_words_are_unreachable(word: str) -> None:
    """000:608: « 无法验证 / 没法验证 / 验证不了 / 无法判定 / unverifiable sont tous rangés
    sous unreachable », in a conclusion section and as the whole text: the page's words, not
    the code's table."""
    from flower.core.goal import Verdict

    assert Verdict.parse(f"## 结论\n{word}\n## 理由\n看了源码").state == "unreachable"
    assert Verdict.parse(word).unreachable


@pytest.mark.anyio
async def test_the_oracle_sees_the_last_60_events_and_leaves_the_manifest_alone(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """004:287: the terminal's oracle answers from « l'окно последних событий (фиксированные
    60 штук) » and the workbench, in its own Runtime under <run_dir>/aside: the main
    manifest does not grow by a byte."""
    from flower.cli.interact import Terminal

    flower_env.script = Always(text("在第二步"))
    rt = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    said: list[str] = []
    terminal = Terminal(rt, None, say=said.append, interactive=False)
    for i in range(100):
        terminal.observe(Event("text", f"事件-{i:03d}"))
    before = rt.manifest_path.read_bytes() if rt.manifest_path.exists() else b""
    try:
        await terminal._ask_oracle("进展如何")
    finally:
        if terminal._aside is not None:
            terminal._aside.close()
        rt.close()
    [asked] = flower_env.requests
    shown = asked.last_user_text
    assert "事件-040" in shown and "事件-099" in shown and "事件-039" not in shown
    assert ROLE_MARKERS["oracle"][0] in asked.system_text
    assert (workspace.parent / "runs" / "aside" / "manifest.json").is_file()
    after = rt.manifest_path.read_bytes() if rt.manifest_path.exists() else b""
    assert after == before and any("在第二步" in line for line in said)


SEEDS_NINE = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
    "CLAUDE_CODE_EFFORT_LEVEL",
]


def test_the_seeds_nine_keys_are_borrowed_from_claude_settings_and_nothing_else(
    tmp_path: Path, environ: None
) -> None:
    """003:56-64: from ~/.claude/settings.json's `env`, these 9 keys (the page's list, not
    the code's) and nothing else."""
    import json
    import os

    from flower.core.env import Lookup, load_dotenv

    for key in [*SEEDS_NINE, "OTHER", "CLAUDE_CODE_USE_BEDROCK"]:
        os.environ.pop(key, None)
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    block = {key: f"v-{key}" for key in SEEDS_NINE} | {"OTHER": "x", "CLAUDE_CODE_USE_BEDROCK": "1"}
    (home / ".claude" / "settings.json").write_text(json.dumps({"env": block}))
    lookup = Lookup(cwd=tmp_path / "cwd", home=home, config_home=home / ".config", source=None)
    assert set(load_dotenv(lookup=lookup)) == set(SEEDS_NINE)
    assert all(os.environ[key] == f"v-{key}" for key in SEEDS_NINE)
    assert "OTHER" not in os.environ and "CLAUDE_CODE_USE_BEDROCK" not in os.environ


def test_a_degraded_handoff_carries_the_tasks_first_1200_characters() -> None:
    """000:582: degraded(step, prompt, *, why="") « en fourrant dans scene les 1200 premiers
    caractères de la tâche d'origine »."""
    from flower.core.handoff import degraded

    task = "".join(f"{n:04d}" for n in range(1000))
    handoff = degraded("改", task, why="prompt is too long")
    assert handoff.complete() and handoff.scene == task[:1200]


def test_every_variable_flower_reads_is_in_the_configuration_page() -> None:
    """003:5-7: « Table complète des variables d'environnement » (the tables were lost; our
    docs/configuration.md is that table): every FLOWER_, ANTHROPIC_, CLAUDE_CODE_ and
    DISABLE_ variable named in flower's code is on the page. flower.testing's are the fake
    API's, not flower's configuration."""
    import re

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "configuration.md").read_text(encoding="utf-8")
    named = {
        match
        for path in (root / "flower").rglob("*.py")
        if "testing" not in path.relative_to(root / "flower").parts
        for match in re.findall(
            r"[\"']((?:FLOWER|ANTHROPIC|CLAUDE_CODE|DISABLE)_[A-Z0-9_]+)[\"']", path.read_text()
        )
    }
    assert len(named) > 15
    assert sorted(name for name in named if f"`{name}`" not in page) == []


HANDOFF_SECTIONS = (
    "## 正在做\n改到第 7 个\n\n## 已定结论\nUTF-8\n\n## 死路\n无\n\n"
    "## 下一步\n改第 8、9、10 个文件\n\n## 现场\n根目录"
)


@pytest.mark.anyio
async def test_the_handoff_is_written_past_the_steps_budget(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """000:76: « Le tour qui écrit le handoff est exécuté avec replace(spec,
    max_budget_usd=None) — le handoff doit pouvoir être écrit, il ne peut pas se retrouver
    bloqué par le budget ». The step's budget ($1.17) holds its own two turns; the turn that
    writes the handoff costs more than that alone, and the handoff is still the session's
    own (not the degraded one)."""
    from flower.core.handoff import HANDOFF_PROMPT

    marker = HANDOFF_PROMPT.split("{", 1)[0][:30]
    climbing = [
        tool("Bash", {"command": "echo 1"}, usage=Usage(input_tokens=tokens))
        for tokens in (100_000, 190_000)
    ]
    dear = Usage(input_tokens=1000, output_tokens=100_000)
    flower_env.script = rules(
        (When(kind="main", last_user_contains=marker), Always(text(HANDOFF_SECTIONS, usage=dear))),
        (When(kind="main", contains="改第 8、9、10 个文件"), sequence(text("接着改完了"))),
        (When(kind="main"), sequence(*climbing)),
    )
    spec = AgentSpec("w", "", allowed_tools=["Bash"], max_budget_usd=1.17)
    result, wb, seen = await run_with_one_handoff(workspace, spec)
    [done] = [e.payload for e in seen if e.kind == "handoff" and e.payload.get("phase") == "done"]
    assert done["degraded"] is False and "deadends" in done["sections"]
    assert result.ok and result.text == "接着改完了" and result.cost_usd > spec.max_budget_usd
    assert "改第 8、9、10 个文件" in (wb.notes / "交接-改.md").read_text(encoding="utf-8")


def test_setup_writes_the_seeds_three_model_keys_together(tmp_path: Path) -> None:
    """003:17: « Si flower setup reçoit un nom de modèle, ANTHROPIC_MODEL,
    ANTHROPIC_DEFAULT_OPUS_MODEL et ANTHROPIC_DEFAULT_SONNET_MODEL sont écrites toutes les
    trois ensemble » (the page's three, not the code's MODEL_KEYS)."""
    import os
    import subprocess
    import sys

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "FLOWER_"))
    }
    env |= {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "MY_KEY": "sk-ant-" + "x" * 40,
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "flower.cli",
            "setup",
            "claude-x",
            "--key-from-env",
            "MY_KEY",
            "--no-probe",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / ".config" / "flower" / ".env").read_text().splitlines()
    for key in (
        "ANTHROPIC_MODEL",
        "ANTHROPIC_DEFAULT_OPUS_MODEL",
        "ANTHROPIC_DEFAULT_SONNET_MODEL",
    ):
        assert f"{key}=claude-x" in lines, key


@pytest.mark.anyio
async def test_a_rejected_attempt_without_a_session_starts_over_not_with_the_feedback(
    flower_env: FakeAPI, workspace: Path
) -> None:
    """000:137: « result.session_id vaut None → on retombe aussi sur un départ de zéro »:
    on_reject's feedback has no session to go to, so the next attempt is the first one again
    (same prompt, same resume_from), never a new session told the feedback alone. Here
    resume_from names a session the CLI cannot find, so no attempt gets a session."""
    import uuid

    from flower.core.lineage import Lineage

    flower_env.script = Always(text("好"))
    runs = workspace.parent / "runs"
    runs.mkdir()
    lost = str(uuid.uuid4())
    Lineage(runs, workspace).remember("先", lost)
    step = Step(
        "接",
        AgentSpec("w", ""),
        "接着第一步",
        resume_from="先",
        retries=1,
        on_reject=lambda result, ctx: "按反馈重来",
    )
    rt = Runtime(workspace=workspace, run_dir=runs, resilience=Resilience(max_attempts=1))
    try:
        ctx = await Workflow([step], continuous=False).run(rt)
    finally:
        rt.close()
    assert ctx["_failed_at"] == "接"
    assert [(r.step, r.session_id) for r in rt.results] == [("接", None), ("接#round2", None)]
    assert all(lost in (r.error or "") for r in rt.results)  # the same resume_from, twice
    assert not [r for r in flower_env.requests if r.contains("按反馈重来")]
