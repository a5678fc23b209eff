"""Handoff: prompt and parser agree, overflow detection, degraded handoffs, file placement."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flower.core.handoff import (
    HANDOFF_PROMPT,
    OVERFLOW_WORDINGS,
    SCENE_CHARS,
    Handoff,
    degraded,
    handoff_path,
    is_overflow,
    write_handoff,
)


def test_the_parser_reads_exactly_what_the_prompt_asks_for() -> None:
    asked = re.findall(r"^## (.+)$", HANDOFF_PROMPT, re.MULTILINE)
    assert asked == [s.title for s in Handoff.SECTIONS]
    reply = "\n".join(f"## {title}\n第 {i} 节的内容" for i, title in enumerate(asked))
    handoff = Handoff.parse(reply)
    assert handoff.complete()
    assert [getattr(handoff, s.field) for s in Handoff.SECTIONS] == [
        f"第 {i} 节的内容" for i in range(len(asked))
    ]


def test_the_prompt_formats_with_used_and_window_only() -> None:
    text = HANDOFF_PROMPT.format(used=123_456, window=234_567)  # no window's usual figure
    assert "123456" in text and "234567" in text


def test_only_doing_and_next_are_required() -> None:
    assert Handoff(doing="写解析器", next="补测试").complete()
    assert Handoff(doing="写解析器").missing() == ["下一步"]
    assert Handoff().missing() == ["正在做", "下一步"]


def test_english_headings() -> None:
    text = "## Doing\nparser\n## Dead ends\nregex only\n## Next steps\ntests\n## Scene\nsrc/"
    assert Handoff.parse(text) == Handoff(
        doing="parser", deadends="regex only", next="tests", scene="src/"
    )


@pytest.mark.parametrize("wording", OVERFLOW_WORDINGS)
def test_every_overflow_wording_is_recognised_in_any_case(wording: str) -> None:
    assert is_overflow(f"API Error: 400 {wording.upper()} (request abc)")


def test_is_overflow_checks_every_text_and_ignores_none() -> None:
    assert is_overflow(None, "", "network down", "Prompt is too long: 210000 tokens")
    assert not is_overflow(None, "rate limited", "overloaded_error")
    assert not is_overflow()


def test_prompt_block_introduces_a_takeover_and_skips_empty_sections() -> None:
    block = Handoff(doing="写解析器", next="补测试", step="工作").prompt_block()
    assert "步骤「工作」上一代会话" in block
    assert "## 正在做\n写解析器" in block and "## 下一步\n补测试" in block
    assert "死路\n" not in block


def test_degraded_handoff_is_complete_honest_and_carries_the_task() -> None:
    task = "任务" * SCENE_CHARS
    handoff = degraded("工作", task, why="prompt is too long")
    assert handoff.complete()
    assert handoff.step == "工作"
    assert handoff.scene == task[:SCENE_CHARS]
    assert "没能写出交接" in handoff.doing and "prompt is too long" in handoff.doing
    assert "核对工作区" in handoff.next


def test_degraded_without_a_reason_has_no_empty_brackets() -> None:
    assert "（）" not in degraded("工作", "做一个 X").doing


def test_step_survives_the_markdown_round_trip() -> None:
    handoff = Handoff(doing="a", next="b", step="工作#round2")
    assert Handoff.parse(handoff.to_markdown()).step == "工作#round2"


def test_write_handoff_places_the_file_and_archives_the_previous_ones(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    first = write_handoff(Handoff(doing="一", next="二"), notes, "工作")
    assert first == notes / "交接-工作.md"
    write_handoff(Handoff(doing="三", next="四"), notes, "工作")
    write_handoff(Handoff(doing="五", next="六"), notes, "工作")  # same second, most likely
    current = Handoff.load(first)
    assert current is not None and current.doing == "五"
    archived = sorted((notes / "archive" / "交接").iterdir())
    assert len(archived) == 2
    assert all(re.fullmatch(r"工作-\d{8}-\d{6}(-\d+)?\.md", p.name) for p in archived)
    assert {Handoff.load(p).doing for p in archived} == {"一", "三"}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("step", "name"),
    [("工作", "交接-工作.md"), ("工作#round2", "交接-工作-round2.md"), ("a/b", "交接-a-b.md")],
)
def test_step_names_become_one_safe_file_name(step: str, name: str) -> None:
    assert handoff_path("notes", step) == Path("notes") / name


def test_a_step_name_of_only_dots_still_names_a_file() -> None:
    assert handoff_path("notes", "..").name == "交接-step.md"
