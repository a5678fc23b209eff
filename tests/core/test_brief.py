"""Brief: four required sections in a fixed order, read from the clarifier's reply."""

from __future__ import annotations

from pathlib import Path

from flower.core.brief import Brief

REPLY = """\
好的，需求已经清楚了：

**1. 目标**：给仓库加一个 `flower status` 命令
**2. 验收标准**：
- 输出每个运行的状态
- 有测试
**3. 边界**：不改存储格式
**4. 未知与假设**：假设只有一个 run_dir
"""


def test_the_four_sections_keep_the_seeds_order_and_titles() -> None:
    assert [(s.field, s.title) for s in Brief.SECTIONS] == [
        ("goal", "目标"),
        ("accept", "验收标准"),
        ("bounds", "边界"),
        ("unknowns", "未知与假设"),
    ]
    assert all(s.required for s in Brief.SECTIONS)


def test_a_clarifier_reply_in_numbered_bold_form() -> None:
    brief = Brief.parse(REPLY)
    assert brief == Brief(
        goal="给仓库加一个 `flower status` 命令",
        accept="- 输出每个运行的状态\n- 有测试",
        bounds="不改存储格式",
        unknowns="假设只有一个 run_dir",
    )
    assert brief.complete()


def test_a_reply_truncated_inside_a_code_dump_is_incomplete() -> None:
    reply = "## 目标\n做 X\n## 验收标准\n能跑\n```python\ndef f():\n## 边界\n不联网\n## 未知与假设"
    assert Brief.parse(reply).missing() == ["边界", "未知与假设"]


def test_a_brief_edited_by_hand_with_a_placeholder_left_is_incomplete(tmp_path: Path) -> None:
    path = Brief(goal="做 X", accept="能跑", bounds="不联网").write(tmp_path / "需求.md")
    loaded = Brief.load(path)
    assert loaded is not None and loaded.missing() == ["未知与假设"]


def test_equality_ignores_the_path(tmp_path: Path) -> None:
    brief = Brief(goal="g")
    brief.write(tmp_path / "需求.md")
    assert brief == Brief(goal="g")
