"""A scripted cast for the starter flow: the fake model plays the clarifier, the judge, the
coordinator and its worker. `flower demo` runs it; tests of the go path use it too.

The roles are told apart by their system prompts (the rule texts of flower.core.roles), in
either language: `ROLE_MARKERS` holds the words each role's rules start with, in zh and en
(docs/fake-model.md). The cast answers in the current language (flower.core.lang). The
worker writes hello.py in its working directory and runs it (or does what `worker` scripts);
the judge's verdict is chosen by `verdict` (a word of the Verdict table: 达成, 未达成,
无法达成, or achieved, not achieved, unreachable), or, given a sequence, one word per judged
round (the last one stands after it).
"""

from __future__ import annotations

from collections.abc import Sequence

from flower.core.lang import current
from flower.testing.replies import Reply, text, tool
from flower.testing.request import Request
from flower.testing.script import Always, Rules, Script, When, rules, working_directory

DEMO_ASK = "写一个打印 hello 的 Python 脚本"
DEMO_ASKS: dict[str, str] = {"zh": DEMO_ASK, "en": "Write a Python script that prints hello"}
"""The demo's ask in each language (`flower demo` asks in the current one)."""

ROLE_MARKERS: dict[str, tuple[str, ...]] = {
    "clarify": ("你是澄清者", "You are the clarifier"),
    "judge": ("你是裁判", "You are the judge"),
    "coordinator": ("你是协调者", "You are the coordinator"),
    "worker": ("你是执行者", "You are the worker"),
    "oracle": ("你是旁路问答", "You answer side questions"),
}
"""What each role's system prompt holds (zh, en): the first words of its rule text."""
GOAL_MARKERS = ("设定目标", "set the goal")
"""What the prompt of the goal-setting step holds (zh, en); the judge's other prompts do not."""

BRIEF = """## 目标
写一个打印 hello 的 Python 脚本 hello.py

## 验收标准
- python3 hello.py 输出 hello

## 边界
只新建 hello.py,不动别的文件

## 未知与假设
没人回答用哪个解释器:假设 python3"""

GOAL = """## 目标
工作区里有 hello.py,运行它打印 hello

## 验收清单
- hello.py 存在
- python3 hello.py 的输出是 hello"""

BRIEF_EN = """## Goal
A Python script hello.py that prints hello

## Acceptance
- python3 hello.py prints hello

## Bounds
Only create hello.py; touch no other file

## Unknowns
Nobody said which interpreter: assuming python3"""

GOAL_EN = """## Goal
The workspace has hello.py, and running it prints hello

## Checks
- hello.py exists
- the output of python3 hello.py is hello"""

_REASONS = {
    "达成": "两条都核对过",
    "未达成": "输出不对",
    "无法达成": "这个环境里跑不了",
    "achieved": "both checks verified",
    "not achieved": "the output is wrong",
    "unreachable": "it cannot run in this environment",
}
_PASSED = ("达成", "achieved")


def verdict_reply(word: str) -> Reply:
    """The judge's ruling `word`, in the language the word is in."""
    if word.isascii():
        failed = "" if word in _PASSED else "\n\n## Failed checks\n- python3 hello.py prints hello"
        return text(f"## Verdict\n{word}\n\n## Reason\n{_REASONS.get(word, '')}{failed}")
    failed = "" if word in _PASSED else "\n\n## 未通过项\n- python3 hello.py 的输出是 hello"
    return text(f"## 结论\n{word}\n\n## 理由\n{_REASONS.get(word, '')}{failed}")


def _worker(request: Request) -> Reply:
    """Write hello.py where the worker works (its worktree, when isolated), run it, report."""
    done = {r.tool_use_id for r in request.tool_results()}
    calls = [
        tool(
            "Write",
            {"file_path": f"{working_directory(request)}/hello.py", "content": 'print("hello")\n'},
            id=f"toolu_demo_write_{request.agent_id}",
        ),
        tool("Bash", {"command": "python3 hello.py"}, id=f"toolu_demo_run_{request.agent_id}"),
    ]
    for call in calls:
        if call.tool_ids[0] not in done:
            return call
    return text(_said("hello.py 写好了,运行输出 hello。", "hello.py is written; it prints hello."))


def _prompts(request: Request) -> int:
    """How many times the user spoke (messages with text of their own, not tool results)."""
    count = 0
    for message in request.messages:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        blocks = [b for b in content if isinstance(b, dict)]
        said = [
            b
            for b in blocks
            if b.get("type") == "text"
            and not str(b.get("text", "")).lstrip().startswith("<system-reminder>")
        ]
        if said and not any(b.get("type") == "tool_result" for b in blocks):
            count += 1
    return count


def _coordinator(request: Request) -> Reply:
    """Delegate once per round (each time the user spoke), then report."""
    delegated = [u for u in request.tool_uses() if u.get("name") == "Agent"]
    if len(delegated) < _prompts(request):
        return tool(
            "Agent",
            {
                "description": _said("写 hello.py", "write hello.py"),
                "prompt": _said(
                    "在工作区写 hello.py 并运行验证。",
                    "Write hello.py in the workspace and run it to verify.",
                ),
                "subagent_type": "coder",
                "run_in_background": False,
            },
            id=f"toolu_demo_delegate_{len(delegated)}",
        )
    done = len(delegated)
    return text(
        _said(
            f"第 {done} 轮:hello.py 已写好并验证。", f"round {done}: hello.py written and verified."
        )
    )


def _judge(words: Sequence[str]) -> Script:
    """Each judge session (one per judged round) rules with the next word; the last repeats."""
    sessions: list[str] = []

    def judge(request: Request) -> Reply:
        session = request.headers.get("x-claude-code-session-id", "")
        if session not in sessions:
            sessions.append(session)
        return verdict_reply(words[min(sessions.index(session), len(words) - 1)])

    return judge


def _said(zh: str, en: str) -> str:
    """The cast's line in the current language."""
    return en if current() == "en" else zh


def starter_cast(
    *, verdict: str | Sequence[str] | None = None, ask_human: bool = True, worker: Script = _worker
) -> Rules:
    """The whole cast, recognising the roles in either language and answering in the current
    one. `ask_human`: the clarifier asks one question first. `worker` answers every
    subagent request. `verdict`: one word, or one per judged round in turn (the last one
    repeating); by default achieved (达成)."""
    passed = _said("达成", "achieved")
    verdicts = [verdict or passed] if isinstance(verdict, str | None) else list(verdict)
    question = tool(
        "mcp__human__ask",
        {
            "question": _said("用哪个 Python 解释器?", "Which Python interpreter?"),
            "options": ["python3", "pypy"],
        },
        id="toolu_demo_question",
    )
    brief, goal = _said(BRIEF, BRIEF_EN), _said(GOAL, GOAL_EN)

    def clarifier(request: Request) -> Reply:
        if ask_human and request.result_for("toolu_demo_question") is None:
            return question
        return text(brief)

    judge = _judge(verdicts)  # one judge across both languages: its sessions are counted
    cast: list[tuple[When, Script]] = [(When(kind="subagent"), worker)]
    for i in range(2):  # zh, en
        cast += [
            (When(kind="main", system_contains=ROLE_MARKERS["clarify"][i]), clarifier),
            (
                When(
                    kind="main", system_contains=ROLE_MARKERS["judge"][i], contains=GOAL_MARKERS[i]
                ),
                Always(text(goal)),
            ),
            (When(kind="main", system_contains=ROLE_MARKERS["judge"][i]), judge),
            (When(kind="main", system_contains=ROLE_MARKERS["coordinator"][i]), _coordinator),
        ]
    return rules(*cast)
