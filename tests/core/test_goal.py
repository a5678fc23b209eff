"""Goal (statement, checklist, unverifiable checks, amend) and Verdict (the five steps)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from flower.core.goal import ACHIEVED, NOT_YET, STATE_WORDS, UNREACHABLE, Goal, Verdict

GOAL_REPLY = """\
## 目标
flower status 列出每个运行的状态。

## 验收清单
1. `flower status` 在空目录下退出码为 0
2. 有运行时列出它的 run id
   以及开始时间
- [此环境无法验证: 需要 macOS] 在 macOS 上输出颜色
"""


def test_goal_reads_the_statement_and_one_check_per_entry() -> None:
    goal = Goal.parse(GOAL_REPLY)
    assert goal.statement == "flower status 列出每个运行的状态。"
    assert goal.checks == [
        "`flower status` 在空目录下退出码为 0",
        "有运行时列出它的 run id 以及开始时间",
        "[此环境无法验证: 需要 macOS] 在 macOS 上输出颜色",
    ]
    assert goal.complete()


@pytest.mark.parametrize("heading", ["验收清单", "判定清单", "Checks", "Checklist"])
def test_goal_checklist_headings(heading: str) -> None:
    assert Goal.parse(f"目标: X\n{heading}:\n- a\n- b").checks == ["a", "b"]


def test_goal_needs_a_statement_and_at_least_one_check() -> None:
    assert Goal(statement="X").missing() == ["验收清单"]
    assert Goal(checks=["a"]).missing() == ["目标"]
    assert Goal(statement="X", checks=["a"]).complete()


@pytest.mark.parametrize(
    ("check", "unverifiable"),
    [
        ("[此环境无法验证:需要 GPU] 训练收敛", True),
        ("[此环境无法验证：需要 GPU] 训练收敛", True),
        ("【此环境无法验证：需要 GPU】训练收敛", True),
        ("训练收敛 [此环境无法验证: 需要 GPU]", True),
        ("[unverifiable here: needs a GPU] training converges", True),
        ("[Unverifiable here：needs a GPU] training converges", True),
        ("此环境无法验证的部分另行处理", False),
        ("[此环境可以验证: 是] 测试通过", False),
        ("pytest 全绿", False),
    ],
)
def test_unverifiable_checks(check: str, unverifiable: bool) -> None:
    assert Goal(statement="X", checks=[check, "pytest 全绿"]).unverifiable() == (
        [check] if unverifiable else []
    )


def test_amend_records_a_dated_revision_and_keeps_the_checks(tmp_path: Path) -> None:
    goal = Goal(statement="做 X", checks=["a"], path=tmp_path / "目标.md")
    when = datetime(2026, 3, 1, 9, 30)
    amended = goal.amend("改成做 Y\n## 验收清单\n- 不是清单", when=when)
    assert amended.statement.startswith("做 X\n\n修订（2026-03-01 09:30")
    assert "> 改成做 Y\n> ## 验收清单\n> - 不是清单" in amended.statement
    assert amended.checks == ["a"] and amended.checks is not goal.checks
    assert amended.path == goal.path
    assert goal.statement == "做 X"  # a new Goal, the old one untouched
    # The quoted change cannot read as a heading: the frozen file gives back the same Goal.
    assert Goal.load(amended.write(tmp_path / "目标.md")) == amended


def test_amend_with_nothing_said_changes_nothing() -> None:
    goal = Goal(statement="做 X", checks=["a"])
    assert goal.amend("  \n") == goal


def test_goal_prompt_block_lists_the_checks() -> None:
    block = Goal(statement="做 X", checks=["a", "b"]).prompt_block()
    assert block == "<冻结的目标>\n## 目标\n做 X\n\n## 验收清单\n- a\n- b\n</冻结的目标>"


# (reply, state): each of the five steps, both ways where there are two.
VERDICTS = [
    # 1. the 结论 / 判定 section is the conclusion
    ("## 结论\n达成\n## 理由\n全部通过", ACHIEVED),
    ("## 判定\n未达成\n## 理由\n测试没通过", NOT_YET),
    ("结论: 通过\n理由: 其实不通过", ACHIEVED),
    ("## 理由\n都通过了\n## 结论\n不通过", NOT_YET),
    ("## 结论\n\n## 理由\n通过", ""),  # an empty conclusion is not the whole text
    # 2. no section: the whole stripped text
    ("1", ACHIEVED),
    (" true\n", ACHIEVED),
    ("TRUE", ACHIEVED),
    ("0", NOT_YET),
    ("false", NOT_YET),
    ("```\n## 结论\n未达成\n```\n1", ACHIEVED),  # fences go first
    # 3. the first state word, longest first
    ("## 结论\n未达成", NOT_YET),
    ("## 结论\n不通过", NOT_YET),
    ("## 结论\n无法达成", UNREACHABLE),
    ("## 结论\n尚未达成", NOT_YET),
    ("## 结论\n没有达成，差一项", NOT_YET),
    ("## 结论\n无法验证（目标平台是 macOS）", UNREACHABLE),
    ("## 结论\n验证不了", UNREACHABLE),
    ("## 结论\n继续", NOT_YET),
    ("## 结论\n达成。未达成的部分已修好", ACHIEVED),
    ("## Verdict\nNot yet", NOT_YET),
    ("## Verdict\nnot   yet", NOT_YET),
    ("## Conclusion\nPASSED", ACHIEVED),
    ("## Conclusion\nunverifiable", UNREACHABLE),
    ("## Conclusion\nno", NOT_YET),
    ("Verdict: not_yet", NOT_YET),
    ("看了一遍，目标已达成。", ACHIEVED),  # no section: the whole text is searched
    # 4. an isolated 1, then an isolated 0
    ("## 结论\n1", ACHIEVED),
    ("## 结论\n0 (见理由)", NOT_YET),
    ("结论：1 分", ACHIEVED),
    # 5. nothing
    ("## 结论\n说不好", ""),
    ("", ""),
    ("I know the answer", ""),  # "no" only as a whole word
    ("## 结论\n10 项里 8 项", ""),
]


@pytest.mark.parametrize(("reply", "state"), VERDICTS)
def test_verdict_five_steps(reply: str, state: str) -> None:
    verdict = Verdict.parse(reply)
    assert verdict.state == state
    assert verdict.ok is bool(state)


def test_every_table_word_is_recognised_as_its_state() -> None:
    for state, words in STATE_WORDS.items():
        for word in words:
            assert Verdict.parse(f"## 结论\n{word}").state == state, word


def test_verdict_reads_reason_and_failed_items() -> None:
    verdict = Verdict.parse("## 结论\n未达成\n## 理由\n缺测试\n## 未通过项\n- 有测试\n- 文档")
    assert verdict == Verdict(state=NOT_YET, reason="缺测试", failed=["有测试", "文档"])
    assert verdict.complete()


def test_verdict_properties() -> None:
    assert Verdict(state=ACHIEVED).achieved and not Verdict(state=ACHIEVED).unreachable
    assert Verdict(state=UNREACHABLE).unreachable and Verdict(state=UNREACHABLE).ok
    assert not Verdict().ok and not Verdict().achieved


def test_verdict_markdown_shows_the_chinese_word_and_reads_back() -> None:
    verdict = Verdict(state=UNREACHABLE, reason="需要 macOS")
    assert "## 结论\n\n无法达成" in verdict.to_markdown()
    assert Verdict.parse(verdict.to_markdown()) == verdict


def test_feedback_says_not_yet_and_why() -> None:
    text = Verdict(state=NOT_YET, reason="缺测试", failed=["有测试"]).feedback()
    assert text.startswith("评审认为目标还没有达成")
    assert "缺测试" in text and "- 有测试" in text


def test_feedback_without_a_reason_is_still_a_sentence() -> None:
    assert (
        Verdict().feedback() == "评审认为目标还没有达成。请在现有工作的基础上接着做，不要从头再来。"
    )


def test_no_state_word_is_also_a_heading_of_the_verdict() -> None:
    # A bare line is a heading: a conclusion that is just a state word must stay a body.
    for words in STATE_WORDS.values():
        for word in words:
            assert Verdict.grammar.heading(word) is None, word
