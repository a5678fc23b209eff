"""clarify -> goal -> work under a goal guard, on the real CLI with a fake model that plays
the clarifier, the judge, the coordinator and its worker."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flower.core.brief import Brief
from flower.core.events import Event
from flower.core.goal import Goal
from flower.core.roles import CLARIFY_RULES, JUDGE_RULES
from flower.core.rundir import RunDir
from flower.core.runtime import Runtime
from flower.core.texts.zh import ZH
from flower.testing import Always, FakeAPI, Reply, Script, When, rules, sequence, text, tool
from flower.workflow.starter import (
    VERDICT_KEY,
    starter_flow,
    wake_state,
)
from flower.workflow.wake import PendingWake

pytestmark = pytest.mark.anyio

BRIEF = (
    "## 目标\n写一个 hello.txt\n\n## 验收标准\n- 文件存在\n\n## 边界\n只动 hello.txt\n\n"
    "## 未知与假设\n内容未定,假设写 hello"
)
GOAL = "## 目标\n工作区里有 hello.txt\n\n## 验收清单\n- hello.txt 存在\n- 内容是 hello"


def verdict(word: str, reason: str = "核对过了", failed: str = "") -> Reply:
    body = f"## 结论\n{word}\n\n## 理由\n{reason}"
    return text(body + (f"\n\n## 未通过项\n- {failed}" if failed else ""))


def cast(workspace: Path, *, verdicts: Script, clarifier: Script | None = None) -> Script:
    """The fake model's worker, clarifier and judge (told apart by their system prompts);
    with_coordinator() adds the coordinator."""
    hello = workspace / "hello.txt"
    return rules(
        (
            When(kind="subagent"),
            sequence(
                tool("Write", {"file_path": str(hello), "content": "hello"}), text("wrote it")
            ),
        ),
        (
            When(kind="main", system_contains="你是澄清者"),
            clarifier
            or sequence(
                tool("mcp__human__ask", {"question": "内容写什么?", "options": ["hello", "hi"]}),
                text(BRIEF),
            ),
        ),
        (
            When(kind="main", system_contains="你是裁判", contains="设定目标和验收清单"),
            Always(text(GOAL)),
        ),
        (When(kind="main", system_contains="你是裁判", contains="独立判定"), verdicts),
    )


@pytest.fixture
def run_flow(flower_env: FakeAPI, workspace: Path) -> Iterator[Any]:
    runtimes: list[Runtime] = []

    async def run(ask: str, **kwargs: Any) -> tuple[dict[str, Any], Runtime, list[Event]]:
        kwargs.setdefault("timeout_s", 0)
        flow = starter_flow(ask, workspace=workspace, run_dir=workspace.parent / "runs", **kwargs)
        runtime = Runtime(
            workspace=workspace, run_dir=workspace.parent / "runs", workbench=flow.workbench
        )
        runtimes.append(runtime)
        seen: list[Event] = []
        try:
            ctx = await flow.run(runtime, on_event=seen.append)
        finally:
            flow.channel.close()
        return ctx, runtime, seen

    yield run
    for runtime in runtimes:
        runtime.close()


def coordinator_rounds(reports: list[str]) -> Script:
    """Delegate, then report; each round of the goal guard gets the next report (a fresh
    Agent call per round: one shared tool id would make the sequence skip ahead)."""
    replies = []
    for report in reports:
        delegate = tool(
            "Agent",
            {
                "description": "write",
                "prompt": "写 hello.txt",
                "subagent_type": "coder",
                "run_in_background": False,
            },
        )
        replies += [delegate, text(report)]
    return sequence(*replies)


def with_coordinator(base: Script, coordinator: Script) -> Script:
    return rules((When(kind="main", system_contains="你是协调者"), coordinator), (When(), base))


async def test_one_line_ask_to_an_achieved_goal(
    flower_env: FakeAPI, run_flow: Any, workspace: Path
) -> None:
    flower_env.script = with_coordinator(
        cast(workspace, verdicts=Always(verdict("达成"))), coordinator_rounds(["hello.txt 已写好"])
    )
    ctx, runtime, seen = await run_flow("帮我写一个 hello.txt")
    assert "_failed_at" not in ctx and ctx[VERDICT_KEY].achieved
    assert (workspace / "hello.txt").read_text() == "hello"
    notes = workspace / ".flower" / "notes"
    brief = Brief.load(notes / "需求.md")
    goal = Goal.load(notes / "目标.md")
    assert brief is not None and brief.complete() and brief.goal == "写一个 hello.txt"
    assert goal is not None and goal.checks == ["hello.txt 存在", "内容是 hello"]
    assert "内容写什么?" in (notes / "问答记录.md").read_text()  # unattended: logged, not blocking
    rows = json.loads(runtime.manifest_path.read_text())
    assert [r["step"] for r in rows] == ["确认需求", "设定目标", "干活", "干活·判定#1"]
    steps = [e.text for e in seen if e.kind == "step"]
    assert steps == ["确认需求", "设定目标", "干活"]
    offered = {
        role: set(r.tool_names)
        for r in flower_env.main_requests()
        for role in ("你是澄清者", "你是裁判", "你是协调者")
        if role in r.system_text
    }
    ask, inbox = "mcp__human__ask", "mcp__human__inbox"
    for role in ("你是澄清者", "你是裁判"):  # read-only, may ask, no inbox
        assert ask in offered[role] and inbox not in offered[role]
        assert offered[role].isdisjoint({"Agent", "Write", "Edit", "Bash"})
    assert {ask, inbox, "Agent"} <= offered["你是协调者"]  # offered, not deferred
    # The clarifier's questionnaire never reached the coordinator: it got the brief only.
    boss_first = [r for r in flower_env.main_requests() if "你是协调者" in r.system_text][0]
    assert (
        "写一个 hello.txt" in boss_first.prompt and "内容写什么" not in boss_first.conversation_text
    )


async def test_not_yet_sends_the_work_back_with_the_judges_feedback(
    flower_env: FakeAPI, run_flow: Any, workspace: Path
) -> None:
    # Each round's judge is a fresh session: tell the rounds apart by the report it judges.
    verdicts = rules(
        (When(contains="第二轮改好了"), Always(verdict("达成"))),
        (When(), Always(verdict("未达成", "内容不对", failed="内容是 hello"))),
    )
    flower_env.script = with_coordinator(
        cast(workspace, verdicts=verdicts), coordinator_rounds(["第一轮做完", "第二轮改好了"])
    )
    ctx, runtime, _ = await run_flow("帮我写一个 hello.txt")
    assert ctx[VERDICT_KEY].achieved and "_failed_at" not in ctx
    rows = [r["step"] for r in json.loads(runtime.manifest_path.read_text())]
    assert rows == ["确认需求", "设定目标", "干活", "干活·判定#1", "干活#round2", "干活·判定#2"]
    boss = [r for r in flower_env.main_requests() if "你是协调者" in r.system_text]
    sessions = {r.headers.get("x-claude-code-session-id") for r in boss}
    assert len(sessions) == 1  # the same session, sent back
    feedback_turn = [r for r in boss if "内容不对" in r.prompt]
    assert feedback_turn and "内容是 hello" in feedback_turn[0].prompt


async def test_unreachable_with_nobody_to_answer_aborts(
    flower_env: FakeAPI, run_flow: Any, workspace: Path
) -> None:
    flower_env.script = with_coordinator(
        cast(workspace, verdicts=Always(verdict("无法达成", "这里是 Linux,目标要求 macOS"))),
        coordinator_rounds(["做完了", "又做了一遍", "第三遍"]),
    )
    ctx, runtime, _ = await run_flow("帮我写一个 hello.txt")
    assert ctx["_failed_at"] == "干活"
    assert "无法达成" in ctx["_aborted"]
    assert [r["step"] for r in json.loads(runtime.manifest_path.read_text())][-1] == "干活·判定#1"


async def test_a_human_answers_from_another_thread_while_the_model_waits(
    flower_env: FakeAPI, workspace: Path
) -> None:
    flower_env.script = with_coordinator(
        cast(workspace, verdicts=Always(verdict("达成"))), coordinator_rounds(["好了"])
    )
    runs = workspace.parent / "runs"
    flow = starter_flow("帮我写一个 hello.txt", workspace=workspace, run_dir=runs, timeout_s=60)
    answered: list[bool] = []

    def human() -> None:
        flower_env.wait_for(lambda requests: bool(flow.channel.pending()), timeout=60)
        answered.append(flow.channel.answer(flow.channel.pending()[0].id, "hello"))

    thread = threading.Thread(target=human)
    thread.start()
    runtime = Runtime(workspace=workspace, run_dir=runs, workbench=flow.workbench)
    try:
        ctx = await flow.run(runtime)
    finally:
        thread.join()
        flow.channel.close()
        runtime.close()
    assert answered == [True] and "_failed_at" not in ctx
    clarifier = [r for r in flower_env.main_requests() if "你是澄清者" in r.system_text]
    assert clarifier[-1].last_tool_results()[0].text.strip() == "hello"


async def test_a_second_run_wakes_and_the_new_ask_lands_in_three_places(
    flower_env: FakeAPI, run_flow: Any, workspace: Path
) -> None:
    flower_env.script = with_coordinator(
        cast(workspace, verdicts=Always(verdict("达成"))),
        coordinator_rounds(["第一次做完", "按补充的要求改好了"]),
    )
    await run_flow("帮我写一个 hello.txt")
    state = wake_state(workspace, run_dir=workspace.parent / "runs")
    assert state["woke"] and state["goal_complete"] and "干活" in state["sessions"]
    goal_requests_before = len(
        [r for r in flower_env.main_requests() if r.contains("设定目标和验收清单")]
    )
    ctx, runtime, _ = await run_flow("再加一行 world")
    assert ctx["_skipped"] == ["确认需求"] and "_failed_at" not in ctx
    brief_text = (workspace / ".flower" / "notes" / "需求.md").read_text()
    assert "再加一行 world" in brief_text and "唤醒时追加" in brief_text  # place 1: the brief
    goal_requests = [r for r in flower_env.main_requests() if r.contains("设定目标和验收清单")]
    assert len(goal_requests) == goal_requests_before + 1  # place 2: the goal, set again
    assert "再加一行 world" in goal_requests[-1].prompt
    boss = [r for r in flower_env.main_requests() if "你是协调者" in r.system_text]
    assert "再加一行 world" in boss[-2].prompt  # place 3: the coordinator, told directly
    assert ctx["_woke"] == ["设定目标", "干活"]  # both resume their sessions


async def test_a_verdict_in_free_prose_is_not_achieved(
    flower_env: FakeAPI, run_flow: Any, workspace: Path
) -> None:
    flower_env.script = with_coordinator(
        cast(workspace, verdicts=Always(text("看起来挺好的,大概没问题吧"))),
        coordinator_rounds(["一", "二"]),
    )
    ctx, _, _ = await run_flow("帮我写一个 hello.txt", rounds=2)
    assert ctx["_failed_at"] == "干活"
    assert ctx[VERDICT_KEY].reason == ZH["starter.ambiguous"] and not ctx[VERDICT_KEY].achieved


async def test_a_hand_edited_brief_with_a_missing_section_does_not_wake(
    flower_env: FakeAPI, workspace: Path
) -> None:
    notes = workspace / ".flower" / "notes"
    notes.mkdir(parents=True)
    (notes / "需求.md").write_text("## 目标\n写 hello\n\n## 边界\n(未填)\n")
    (notes / "目标.md").write_text("garbage ``` not a goal")
    assert wake_state(workspace)["woke"] is False
    with pytest.raises(ValueError, match="要给一句诉求"):
        starter_flow("", workspace=workspace)


def test_the_empty_ask_is_refused_in_the_language(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWER_LANG", "en")
    with pytest.raises(ValueError, match=r"^no ask: say what you want done, e\.g\. flower"):
        starter_flow("  ", workspace=workspace)


def test_isolation_outside_git_fails_before_anything(workspace: Path) -> None:
    with pytest.raises(ValueError, match="git init"):
        starter_flow("做点什么", workspace=workspace, isolate=True)
    assert not (workspace.parent / f".flower-{workspace.name}").exists()


def test_wake_state_writes_nothing(workspace: Path) -> None:
    before = sorted(workspace.parent.rglob("*"))
    state = wake_state(workspace, run_dir=workspace.parent / "runs", isolate=True)
    assert state["woke"] is False and state["workbench"].endswith(f".flower-{workspace.name}")
    assert sorted(workspace.parent.rglob("*")) == before


def test_the_role_prompts_ask_for_exactly_what_the_parsers_read() -> None:
    def reply_from(rules_text: str, titles: list[str]) -> str:
        asked = [line for line in rules_text.splitlines() if line.startswith("## ")]
        assert [line[3:] for line in asked if line[3:] in titles] == titles
        return "\n\n".join(
            f"{line}\n内容 {i}\n- 一条" for i, line in enumerate(asked) if line[3:] in titles
        )

    assert Brief.parse(
        reply_from(CLARIFY_RULES, ["目标", "验收标准", "边界", "未知与假设"])
    ).complete()
    assert Goal.parse(reply_from(JUDGE_RULES, ["目标", "验收清单"])).complete()
    from flower.core.goal import Verdict

    ruling = Verdict.parse("## 结论\n未达成\n\n## 理由\n缺一项\n\n## 未通过项\n- 内容是 hello")
    assert ruling.state == "not_yet" and ruling.failed == ["内容是 hello"]
    assert "## 结论" in JUDGE_RULES and "达成、未达成、无法达成" in JUDGE_RULES


def test_the_words_of_stopped_wakes_are_delivered_by_a_run_with_no_ask(tmp_path: Path) -> None:
    """000:305, whatever stopped the wakes: two wakes' words still pending in wake.json are
    amended into the brief (once each), the goal is set again, and the coordinator is told
    both; once the goal was set from them, only the coordinator still is."""
    workspace, runs = tmp_path / "ws", tmp_path / "runs"
    workspace.mkdir()
    notes = workspace / ".flower" / "notes"
    Brief("做 X", "能跑", "只改 src", "无").write(notes / "需求.md")
    Goal("X 能跑", ["python3 x.py 退出码 0"]).write(notes / "目标.md")  # the old goal
    pending = PendingWake(RunDir(runs).wake)
    pending.begin("再加一个 --verbose")
    pending.begin("输出改成 JSON")
    flow = starter_flow("", workspace=workspace, run_dir=runs)
    brief = (workspace / ".flower" / "notes" / "需求.md").read_text()
    assert brief.count("再加一个 --verbose") == brief.count("输出改成 JSON") == 1
    goal, work = flow.steps[1], flow.steps[2]
    assert goal.when is not None and goal.when({})  # set again over the old goal
    assert isinstance(work.resume_prompt, str)
    assert "再加一个 --verbose" in work.resume_prompt and "输出改成 JSON" in work.resume_prompt
    pending.goal_done()
    again = starter_flow("", workspace=workspace, run_dir=runs)
    assert again.steps[1].when is not None and not again.steps[1].when({})  # set: kept
    assert "输出改成 JSON" in str(again.steps[2].resume_prompt)
    assert (workspace / ".flower" / "notes" / "需求.md").read_text() == brief  # not again
    starter_flow("新的一件事", workspace=tmp_path / "other", run_dir=runs, new=True)
    assert pending.words() == []  # a fresh run owes nothing to an earlier run's wake
