"""The language setting: how it is resolved, that both tables say the same things, and that
what the prompts ask for in English is what the parsers read."""

from __future__ import annotations

import re
from pathlib import Path
from string import Formatter

import pytest

from flower.core.brief import Brief
from flower.core.goal import Goal, Verdict
from flower.core.handoff import Handoff, handoff_prompt
from flower.core.human import HumanChannel
from flower.core.labels import display_name, parse_label
from flower.core.lang import LangError, current, resolve
from flower.core.roles import CLARIFY_RULES, JUDGE_RULES, rule_text
from flower.core.runtime import Runtime
from flower.core.texts.en import EN
from flower.core.texts.zh import ZH
from flower.testing import GOAL_MARKERS, ROLE_MARKERS, FakeAPI

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize(
    ("flag", "environ", "expected"),
    [
        (None, {}, "en"),
        (None, {"LANG": "C"}, "en"),
        (None, {"LANG": "C.UTF-8"}, "en"),
        (None, {"LANG": "zh_CN.UTF-8"}, "zh"),
        (None, {"LANG": "en_US.UTF-8", "LC_MESSAGES": "zh_TW.UTF-8"}, "zh"),
        (None, {"LANG": "zh_CN.UTF-8", "LC_ALL": "C"}, "en"),
        (None, {"LANG": "zh_CN.UTF-8", "FLOWER_LANG": "en"}, "en"),
        (None, {"LANG": "C", "FLOWER_LANG": "ZH"}, "zh"),
        (None, {"LANG": "zh_CN.UTF-8", "FLOWER_LANG": ""}, "zh"),  # empty: unset
        ("en", {"FLOWER_LANG": "zh", "LANG": "zh_CN.UTF-8"}, "en"),
        ("zh", {"FLOWER_LANG": "en"}, "zh"),
    ],
)
def test_the_language_is_the_flag_then_flower_lang_then_the_locale_then_english(
    flag: str | None, environ: dict[str, str], expected: str
) -> None:
    assert resolve(flag, environ) == expected


def test_an_unknown_language_is_an_error_that_names_the_fix() -> None:
    with pytest.raises(LangError, match="'fr'.*pass --lang en or --lang zh"):
        resolve("fr", {})
    with pytest.raises(LangError, match="FLOWER_LANG is 'klingon'"):
        resolve(None, {"FLOWER_LANG": "klingon", "LANG": "zh_CN.UTF-8"})


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in Formatter().parse(template) if name is not None}


def test_both_tables_have_the_same_keys_and_the_same_placeholders() -> None:
    assert ZH.keys() == EN.keys()
    assert {k: _fields(v) for k, v in ZH.items()} == {k: _fields(v) for k, v in EN.items()}


def test_the_english_table_is_english_and_the_seeds_rules_are_the_zh_ones() -> None:
    assert [key for key, value in EN.items() if CJK.search(value)] == []
    assert ZH["rules.clarify"].format(brief=Brief.skeleton("zh")) == CLARIFY_RULES
    assert "## 验收标准" in CLARIFY_RULES and "## 结论" in JUDGE_RULES


def test_the_current_language_follows_flower_lang(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWER_LANG", "en")
    assert current() == "en" and rule_text("oracle") == EN["rules.oracle"]
    monkeypatch.setenv("FLOWER_LANG", "zh")
    assert current() == "zh" and rule_text("oracle") == ZH["rules.oracle"]


def test_in_english_the_prompts_ask_for_the_headings_the_parsers_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLOWER_LANG", "en")
    clarify, judge = rule_text("clarify"), rule_text("judge")
    asked = re.findall(r"^## (.+)$", clarify, re.MULTILINE)
    assert asked == ["Goal", "Acceptance", "Bounds", "Unknowns"]
    reply = "\n\n".join(f"## {title}\nsomething" for title in asked)
    assert Brief.parse(reply).complete()
    assert "## Checks" in judge and "## Verdict" in judge and "## Failed checks" in judge
    ruling = Verdict.parse(
        "## Verdict\nnot achieved\n\n## Reason\nno file\n\n## Failed checks\n- x"
    )
    assert ruling.ok and not ruling.achieved and ruling.failed == ["x"]
    assert Goal.parse("## Goal\ndo it\n\n## Checks\n- a").complete()
    asked_handoff = re.findall(r"^## (.+)$", handoff_prompt(1, 2), re.MULTILINE)
    assert asked_handoff == ["Doing", "Decided", "Dead ends", "Next", "Scene"]
    assert not CJK.search(clarify + judge + handoff_prompt(1, 2))


def test_a_document_written_in_one_language_reads_in_the_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    brief = Brief(goal="g", accept="- a", bounds="b", unknowns="")
    monkeypatch.setenv("FLOWER_LANG", "en")
    english = brief.to_markdown()
    assert english.startswith("# Brief\n") and "## Unknowns\n\n(not filled in)" in english
    monkeypatch.setenv("FLOWER_LANG", "zh")
    assert Brief.parse(english) == brief
    chinese = brief.to_markdown()
    assert chinese.startswith("# 需求\n") and "## 未知与假设\n\n(未填)" in chinese
    monkeypatch.setenv("FLOWER_LANG", "en")
    assert Brief.parse(chinese) == brief
    handoff = Handoff(doing="d", next="n", step="干活")
    assert Handoff.parse(handoff.to_markdown()).step == "干活"  # `# Handoff · 干活`


def test_labels_stay_as_recorded_and_are_shown_in_the_language(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLOWER_LANG", "en")
    assert display_name("干活#round2") == "work#round2"
    assert display_name("干活·判定#1") == "work·judge#1"
    assert display_name("确认需求") == "clarify" and display_name("my step") == "my step"
    assert parse_label("干活·判定#1").step == "work"  # what machines read is the same
    # tables (status, analyze): the seed's name beside, where it differs (issue 36)
    assert display_name("干活·判定#1", beside=True) == "work·judge#1 (干活)"
    assert display_name("my step", beside=True) == "my step"
    monkeypatch.setenv("FLOWER_LANG", "zh")
    assert display_name("干活·判定#1") == "干活·判定#1"
    assert display_name("干活·判定#1", beside=True) == "干活·判定#1"


def test_the_fake_models_markers_are_in_the_rule_texts_of_both_languages() -> None:
    for role, (zh, en) in ROLE_MARKERS.items():
        assert ZH[f"rules.{role}"].startswith(zh) and EN[f"rules.{role}"].startswith(en)
        others = [text for key, text in EN.items() if key.startswith("rules.") and key != role]
        assert not any(en in text for text in others if text != EN[f"rules.{role}"])
    zh_goal, en_goal = GOAL_MARKERS
    assert zh_goal in ZH["starter.goal"] and en_goal in EN["starter.goal"]
    for key in ("starter.verify", "rules.judge", "starter.work"):
        assert zh_goal not in ZH[key] and en_goal not in EN[key]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_stores_replace_results_with_lines_in_the_language(
    flower_env: FakeAPI, workspace: Path, monkeypatch: pytest.MonkeyPatch, lang: str
) -> None:
    """What the store layers put in place of a result the model is shown again (a spill
    pointer, an expired result, an interrupted call) follows the language too."""
    monkeypatch.setenv("FLOWER_LANG", lang)
    table = EN if lang == "en" else ZH
    runtime = Runtime(workspace=workspace, run_dir=workspace / "runs", trim=True)
    try:
        store = runtime.store
        assert store.policy.pointer == table["stores.spilled"]
        assert store.ephemeral.text == table["stores.expired"]
        assert store.prune.orphan_text == table["stores.orphan"]
    finally:
        runtime.close()


def test_the_humans_words_are_appended_under_a_line_in_the_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWER_LANG", "en")
    brief = tmp_path / "需求.md"
    brief.write_text("# Brief\n", encoding="utf-8")
    assert HumanChannel(amend_path=brief).amend("also count bytes")
    written = brief.read_text(encoding="utf-8")
    assert re.search(r"\nadded by the person \(\d{4}-\d\d-\d\d \d\d:\d\d\):\n> also", written)
