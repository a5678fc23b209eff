"""A scripted cast for the starter flow: the fake model plays the clarifier, the judge, the
coordinator and its worker. `flower demo` runs it; tests of the go path use it too.

The roles are told apart by their system prompts (the rule texts of flower.core.roles). The
worker writes hello.py in its working directory and runs it; the judge's verdict is chosen
by `verdict` (a word of the Verdict table: 达成, 未达成, 无法达成), or round by round by
`verdicts`.
"""

from __future__ import annotations

from collections.abc import Sequence

from flower.testing.replies import Reply, text, tool
from flower.testing.request import Request
from flower.testing.script import Always, Rules, Script, When, rules, working_directory

DEMO_ASK = "写一个打印 hello 的 Python 脚本"

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


def verdict_reply(word: str) -> Reply:
    reasons = {"达成": "两条都核对过", "未达成": "输出不对", "无法达成": "这个环境里跑不了"}
    failed = "" if word == "达成" else "\n\n## 未通过项\n- python3 hello.py 的输出是 hello"
    return text(f"## 结论\n{word}\n\n## 理由\n{reasons.get(word, '')}{failed}")


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
    return text("hello.py 写好了,运行输出 hello。")


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
                "description": "写 hello.py",
                "prompt": "在工作区写 hello.py 并运行验证。",
                "subagent_type": "coder",
                "run_in_background": False,
            },
            id=f"toolu_demo_delegate_{len(delegated)}",
        )
    return text(f"第 {len(delegated)} 轮:hello.py 已写好并验证。")


def _judge(words: Sequence[str]) -> Script:
    """Each judge session (one per judged round) rules with the next word; the last repeats."""
    sessions: list[str] = []

    def judge(request: Request) -> Reply:
        session = request.headers.get("x-claude-code-session-id", "")
        if session not in sessions:
            sessions.append(session)
        return verdict_reply(words[min(sessions.index(session), len(words) - 1)])

    return judge


def starter_cast(
    *, verdict: str = "达成", verdicts: Sequence[str] = (), ask_human: bool = True
) -> Rules:
    """The whole cast. `ask_human`: the clarifier asks one question first. `verdicts`: the
    verdict of each judged round in turn, the last one repeating (instead of `verdict`)."""
    question = tool(
        "mcp__human__ask",
        {"question": "用哪个 Python 解释器?", "options": ["python3", "pypy"]},
        id="toolu_demo_question",
    )

    def clarifier(request: Request) -> Reply:
        if ask_human and request.result_for("toolu_demo_question") is None:
            return question
        return text(BRIEF)

    cast: list[tuple[When, Script]] = [
        (When(kind="subagent"), _worker),
        (When(kind="main", system_contains="你是澄清者"), clarifier),
        (When(kind="main", system_contains="你是裁判", contains="设定目标"), Always(text(GOAL))),
        (When(kind="main", system_contains="你是裁判"), _judge(verdicts or [verdict])),
        (When(kind="main", system_contains="你是协调者"), _coordinator),
    ]
    return rules(*cast)
