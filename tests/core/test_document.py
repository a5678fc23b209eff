"""The shared document shape: every parsing rule once, rendering, and the disk round trip.

The rules are shown on Brief, the document the seeds state them for; tests/core/test_brief.py,
test_handoff.py and test_goal.py hold what is particular to each document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flower.core.brief import Brief
from flower.core.document import (
    PLACEHOLDER,
    Document,
    Section,
    Sections,
    split_items,
    strip_fences,
)
from flower.core.goal import ACHIEVED, NOT_YET, UNREACHABLE, Goal, Verdict
from flower.core.handoff import Handoff

DOCUMENTS = (Brief, Handoff, Goal, Verdict)


@pytest.mark.parametrize(
    "text",
    [
        "## 目标\n做一个 X",
        "# 目标\n做一个 X",
        "###### 目标\n做一个 X",
        "**目标**\n做一个 X",
        "**目标：**\n做一个 X",
        "目标:\n做一个 X",
        "目标：\n做一个 X",
        "1. 目标\n做一个 X",
        "1、目标\n做一个 X",
        "1) 目标\n做一个 X",
        "1）目标\n做一个 X",
        "## 1. 目标\n做一个 X",
        "1. **目标**\n做一个 X",
        "  ## 目标  \n做一个 X",
        "## 目标 ##\n做一个 X",
    ],
)
def test_heading_forms(text: str) -> None:
    assert Brief.parse(text).goal == "做一个 X"


def test_a_bare_line_equal_to_a_title_is_a_heading() -> None:
    assert Brief.parse("目标\n做一个 X\n验收标准\n能跑").accept == "能跑"


@pytest.mark.parametrize(
    "text",
    [
        "目标: 做一个 X",
        "目标：做一个 X",
        "**目标** 做一个 X",
        "**目标**：做一个 X",
        "## 目标: 做一个 X",
    ],
)
def test_the_body_may_start_on_the_heading_line(text: str) -> None:
    assert Brief.parse(text).goal == "做一个 X"


def test_the_same_line_body_continues_on_the_next_lines() -> None:
    assert Brief.parse("目标: 做一个 X\n要快\n边界: 不联网").goal == "做一个 X\n要快"


@pytest.mark.parametrize(
    "line", ["目标用户是学生", "## 目标管理", "Goals are clear", "Goal setting"]
)
def test_a_line_that_merely_starts_with_a_title_is_body(line: str) -> None:
    assert Brief.parse(f"## 目标\n第一行\n{line}").goal == f"第一行\n{line}"


def test_headings_are_case_insensitive() -> None:
    assert Brief.parse("GOAL: x\nSCOPE: y") == Brief(goal="x", bounds="y")


@pytest.mark.parametrize(
    ("heading", "field"),
    [
        ("Goal", "goal"),
        ("Objective", "goal"),
        ("Acceptance", "accept"),
        ("Acceptance criteria", "accept"),
        ("Bounds", "bounds"),
        ("Scope", "bounds"),
        ("Unknowns", "unknowns"),
        ("Unknowns and assumptions", "unknowns"),
    ],
)
def test_english_headings(heading: str, field: str) -> None:
    assert getattr(Brief.parse(f"## {heading}\nbody"), field) == "body"


def test_a_closed_fence_is_removed() -> None:
    text = "## 目标\nX\n```\n## 验收标准\n假的\n```\n## 验收标准\nY"
    assert Brief.parse(text) == Brief(goal="X", accept="Y")


def test_a_tilde_fence_is_removed_and_needs_its_own_closing() -> None:
    text = "## 目标\nX\n~~~\n```\n## 验收标准\n假的\n~~~\n## 验收标准\nY"
    assert Brief.parse(text) == Brief(goal="X", accept="Y")


def test_an_unclosed_fence_drops_everything_after_it() -> None:
    text = "## 目标\nX\n```python\nprint(1)\n## 验收标准\nY\n## 边界\nZ"
    brief = Brief.parse(text)
    assert brief == Brief(goal="X")
    assert brief.missing() == ["验收标准", "边界", "未知与假设"]


def test_a_fence_closes_only_with_at_least_as_many_marks() -> None:
    assert strip_fences("a\n````\n```\nb\n````\nc") == "a\nc"


def test_backticks_inside_a_line_are_not_a_fence() -> None:
    assert Brief.parse("## 目标\n用 ```x``` 包起来\n## 边界\nY").bounds == "Y"


def test_names_are_tried_longest_first() -> None:
    # Two fields whose names share a prefix: the longer name must win.
    grammar = Sections((Section("short", "未知"), Section("long", "未知与假设")))
    assert grammar.read("## 未知与假设\nU") == {"long": "U"}
    assert grammar.read("未知与假设: U") == {"long": "U"}
    assert grammar.read("未知: V") == {"short": "V"}


def test_longest_first_with_english_aliases() -> None:
    assert Brief.parse("Acceptance criteria: tests pass").accept == "tests pass"
    assert Brief.parse("未知与假设: 无").unknowns == "无"


def test_a_repeated_section_keeps_its_first_non_empty_body() -> None:
    text = "## 目标\n\n## 目标\n第一个\n## 目标\n第二个"
    assert Brief.parse(text).goal == "第一个"


@pytest.mark.parametrize("placeholder", [PLACEHOLDER, "（未填）"])
def test_the_placeholder_counts_as_missing(placeholder: str) -> None:
    brief = Brief.parse(f"## 目标\n{placeholder}\n## 目标\n真的目标")
    assert brief.goal == "真的目标"
    assert Brief.parse(f"## 目标\n  {placeholder}  \n").missing()[0] == "目标"


def test_text_before_the_first_heading_is_ignored() -> None:
    assert Brief.parse("好的，下面是需求。\n\n## 目标\nX") == Brief(goal="X")


def test_crlf_line_endings() -> None:
    assert Brief.parse("## 目标\r\nX\r\n## 边界\r\nY\r\n") == Brief(goal="X", bounds="Y")


def test_missing_lists_titles_in_order_and_complete_needs_none() -> None:
    assert Brief(accept="a").missing() == ["目标", "边界", "未知与假设"]
    assert Brief(goal="g", accept="a", bounds="b", unknowns="u").complete()
    assert not Brief(goal="  ").complete()


def test_to_markdown_shows_every_section_and_the_placeholder() -> None:
    assert Brief(goal="做一个 X").to_markdown() == (
        "# 需求\n\n## 目标\n\n做一个 X\n\n## 验收标准\n\n(未填)\n\n"
        "## 边界\n\n(未填)\n\n## 未知与假设\n\n(未填)\n"
    )


def test_prompt_block_frames_the_non_empty_sections() -> None:
    block = Brief(goal="做一个 X", bounds="不联网").prompt_block()
    assert block == "<需求>\n## 目标\n做一个 X\n\n## 边界\n不联网\n</需求>"


def test_skeleton_lists_the_titles_as_headings() -> None:
    skeleton = Brief.skeleton()
    assert skeleton == "## 目标\n## 验收标准\n## 边界\n## 未知与假设"
    assert set(Brief.grammar.read(skeleton)) == {"goal", "accept", "bounds", "unknowns"}


def test_write_is_atomic_creates_parents_and_sets_path(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "需求.md"
    brief = Brief(goal="g", accept="a", bounds="b", unknowns="u")
    assert brief.write(target) == target
    assert brief.path == target
    assert [p.name for p in target.parent.iterdir()] == ["需求.md"]  # no temp left behind
    assert target.read_text(encoding="utf-8") == brief.to_markdown()


def test_load_reads_back_what_write_wrote(tmp_path: Path) -> None:
    brief = Brief(goal="g", accept="a", bounds="b", unknowns="u")
    path = brief.write(tmp_path / "需求.md")
    loaded = Brief.load(path)
    assert loaded == brief and loaded is not None and loaded.path == path


def test_load_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert Brief.load(tmp_path / "none.md") is None


@pytest.mark.parametrize(
    "junk", [b"", b"\xff\xfe\x00garbage", b"```\n## \xe7\x9b\xae\xe6\xa0\x87\nx"]
)
def test_load_of_junk_is_an_incomplete_document(tmp_path: Path, junk: bytes) -> None:
    path = tmp_path / "需求.md"
    path.write_bytes(junk)
    loaded = Brief.load(path)
    assert loaded is not None and not loaded.complete() and loaded.path == path


def test_load_of_a_directory_is_an_incomplete_document(tmp_path: Path) -> None:
    loaded = Brief.load(tmp_path)
    assert loaded is not None and not loaded.complete()


def test_split_items_reads_bullets_numbers_and_continuations() -> None:
    body = "- 一\n* 二\n  接着二\n+ 三\n• 四\n1. 五\n2) 六\n3、七\n八\n\n- "
    assert split_items(body) == ["一", "二 接着二", "三", "四", "五", "六", "七", "八"]


def test_unicode_case_folding_does_not_make_a_heading() -> None:
    # Under Unicode IGNORECASE "İ" matches "i" but folds to two characters.
    assert Handoff.parse("## Doİng\nx\n## 正在做\ny").doing == "y"
    assert Verdict.parse("## 结论\nİmpossible").state == ""


@given(st.text())
def test_no_text_makes_a_parser_raise(text: str) -> None:
    for document in DOCUMENTS:
        document.parse(text)


@given(st.text(alphabet="#*:：.、) \n`~目标边界未知与假设结论1-aGoalİıDonext", max_size=200))
def test_no_heading_soup_makes_a_parser_raise(text: str) -> None:
    for document in DOCUMENTS:
        document.parse(text).to_markdown()


# Characters that build headings, fences and placeholders, so the filters below are exercised.
_ALPHABET = (
    "目标验收标准边界未知与假设正在做下一步现场结论判定理由通过达成未填"
    " GoalNextScepxyz01.:：#*-()（）`~\n"
)


def _body_of(document: type[Document]) -> st.SearchStrategy[str]:
    def safe(text: str) -> bool:
        return (
            "```" not in text
            and "~~~" not in text
            and text not in {PLACEHOLDER, "（未填）"}
            and all(document.grammar.heading(line) is None for line in text.split("\n"))
        )

    return st.text(_ALPHABET, max_size=60).map(str.strip).filter(safe)


_ITEM = st.text(_ALPHABET.replace("\n", ""), min_size=1, max_size=30).map(str.strip)
_LINE = _ITEM.filter(lambda t: "```" not in t and "~~~" not in t)


def _documents(document: type[Document]) -> st.SearchStrategy[Document]:
    """Documents whose bodies hold no fence and no heading: the ones Markdown can carry."""
    fields: dict[str, st.SearchStrategy[Any]] = {
        s.field: st.lists(_LINE.filter(bool), max_size=4) if s.listed else _body_of(document)
        for s in document.SECTIONS
    }
    if document.SUBJECT is not None:
        fields[document.SUBJECT] = _LINE
    if document is Verdict:
        fields["state"] = st.sampled_from(["", ACHIEVED, NOT_YET, UNREACHABLE])
    return st.builds(document, **fields)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.__name__)
@given(data=st.data())
def test_parse_reads_back_to_markdown(document: type[Document], data: st.DataObject) -> None:
    doc = data.draw(_documents(document))
    assert document.parse(doc.to_markdown()) == doc
