"""The plugin's files: the format Claude Code loads, and content that names what flower does.

Every name a skill teaches (tools, folders, file names, headings, the texts the model will see)
is taken from flower's code here, so a skill cannot drift from the framework it describes.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import flower
from flower.core.guard import spill_output
from flower.core.handoff import Handoff, handoff_path
from flower.core.human import DECLINED, INVALID, OVER_BUDGET, TIMEOUT, HumanChannel
from flower.core.runtime import Runtime
from flower.core.workbench import ARTIFACT_CHARS, Workbench
from tests.plugin.files import ENGLISH, SOURCE, agents, manifest, skill, skills

SKILL_NAMES = {"verify-each-change", "workbench", "report-back", "handoff", "ask-human"}
# What this CLI offers a subagent (sdk-facts.md §6); an agent naming another tool gets nothing.
CLI_TOOLS = {"Agent", "Bash", "Edit", "Read", "Write", "Glob", "Grep", "WebFetch", "WebSearch"}
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
SHORT = 45  # lines of body: a skill is read in the middle of work
# The seeds' (zh) plugin and its English twin: the same format, the same names.
BOTH = pytest.mark.parametrize("root", [SOURCE, ENGLISH], ids=["zh", "en"])


@BOTH
def test_the_manifest_names_the_plugin_and_follows_the_package_version(root: Path) -> None:
    data = manifest(root)
    assert data["name"] == "flower"
    assert data["version"] == flower.__version__
    assert data["description"].strip()


@BOTH
def test_each_skill_is_a_folder_with_a_short_skill_md_and_its_front_matter(root: Path) -> None:
    found = skills(root)
    assert {page.name for page in found} == SKILL_NAMES
    for page in found:
        assert page.name == page.path.parent.name and NAME.match(page.name), page.path
        assert 20 <= len(page.description) <= 200, page.path
        lines = page.body.strip().splitlines()
        assert 5 <= len(lines) <= SHORT, f"{page.path}: {len(lines)} lines"


@BOTH
def test_each_agent_names_itself_and_only_tools_this_cli_has(root: Path) -> None:
    found = agents(root)
    assert [page.name for page in found] == ["checker"]
    for page in found:
        assert page.name == page.path.stem and page.description.strip() and page.body.strip()
        tools = {t.strip() for t in str(page.meta["tools"]).split(",")}
        assert tools <= CLI_TOOLS, tools - CLI_TOOLS


def test_every_plugin_reference_names_a_skill_or_agent_that_exists() -> None:
    known = {f"flower:{p.name}" for p in [*skills(), *agents()]}
    for path in SOURCE.rglob("*.md"):
        for ref in re.findall(r"flower:[a-z0-9-]+", path.read_text(encoding="utf-8")):
            assert ref in known, f"{path} mentions {ref}"


def test_no_stray_files_only_the_plugin_format() -> None:
    allowed = re.compile(
        r"^(en/)?(\.claude-plugin/plugin\.json|skills/[a-z0-9-]+/SKILL\.md|agents/[a-z0-9-]+\.md)$"
    )
    stray = [
        p.relative_to(SOURCE).as_posix()
        for p in SOURCE.rglob("*")
        if p.is_file() and not allowed.match(p.relative_to(SOURCE).as_posix())
    ]
    assert stray == []


def test_the_handoff_skill_asks_for_exactly_the_headings_the_parser_reads() -> None:
    page = skill("handoff")
    for line in Handoff.skeleton().splitlines():
        assert f"\n{line}\n" in page.body, line
    headings = [line for line in page.body.splitlines() if line in Handoff.skeleton().splitlines()]
    assert headings == Handoff.skeleton().splitlines()
    assert Handoff.parse("\n".join(f"{h}\n具体内容" for h in headings)).complete()
    shown = handoff_path(Path("notes"), "STEP").as_posix().replace("STEP", "<步骤>")
    assert shown in page.body and "notes/archive/交接/" in page.body
    required = [s.title for s in Handoff.SECTIONS if s.required]
    for title in required:
        assert f"{title}（必填）" in page.body


def test_the_ask_skill_names_the_channels_tools_and_the_texts_the_model_will_get() -> None:
    page = skill("ask-human")
    channel = HumanChannel()
    assert channel.tool_name in page.body and channel.inbox_tool_name in page.body
    assert channel.tool_name in page.description
    # The opening words of each fixed text, quoted so the model recognises them.
    for text in (TIMEOUT, OVER_BUDGET, DECLINED, INVALID):
        opening = re.split(r"[。,]", text)[0]
        assert f"「{opening}……」" in page.body, opening
    assert channel.timeout_s is not None
    assert f"默认最多 {int(channel.timeout_s // 60)} 分钟" in page.body
    assert "未知与假设" in page.body and "问答记录.md" in page.body


def test_the_workbench_skill_matches_the_workbench_and_the_spill_pointer(tmp_path: Path) -> None:
    page = skill("workbench")
    bench = Workbench(tmp_path)
    for folder in (bench.scripts, bench.artifacts, bench.notes, bench.spill):
        assert f"`{folder.name}/`" in page.body
    assert f"`{bench.index.name}`" in page.body and f"`{bench.dirname}/`" in page.body
    assert "工作台在 " in bench.prompt_block() and "「工作台在 …/」" in page.body
    assert f"超过 {ARTIFACT_CHARS} 字符" in page.body
    threshold = inspect.signature(Runtime).parameters["spill_threshold"].default
    assert f"默认 {threshold} 字符" in page.body
    long = "x" * (threshold + 1)
    pointer = spill_output(long, bench, threshold)
    assert isinstance(pointer, str)
    first = pointer.splitlines()[0]
    shape = first.replace(str(len(long)), "N").replace(str(bench.spill_text(long)), "<路径>")
    assert f"`{shape}`" in page.body


def test_the_desc_line_the_skills_teach_is_the_one_the_index_reads(tmp_path: Path) -> None:
    bench = Workbench(tmp_path)
    script = bench.scripts / "check.sh"
    script.write_text("# desc: 一句话说明\nexit 0\n", encoding="utf-8")
    assert bench.describe(script) == "一句话说明"
    for name in ("verify-each-change", "workbench"):
        assert "`# desc: 一句话说明`" in skill(name).body


def test_the_report_skill_sends_long_output_to_the_artifacts_folder() -> None:
    assert f"超过 {ARTIFACT_CHARS} 字符的写进 artifacts/" in skill("report-back").body


def test_the_english_plugin_says_in_english_what_the_framework_shows_in_english(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The en twin quotes the en texts: the handoff headings the parser reads, the openings of
    the ask tool's fixed answers, the workbench line and the spill pointer's shape."""
    monkeypatch.setenv("FLOWER_LANG", "en")
    assert [p.name for p in skills(ENGLISH)] == [p.name for p in skills()]
    assert [p.name for p in agents(ENGLISH)] == [p.name for p in agents()]
    handoff = skill("handoff", ENGLISH)
    headings = [line for line in handoff.body.splitlines() if line.startswith("## ")]
    assert [h for h in headings if h in Handoff.skeleton().splitlines()] == (
        Handoff.skeleton().splitlines()
    )
    channel = HumanChannel()
    ask = skill("ask-human", ENGLISH)
    for text in (channel.timeout_text, channel.over_budget_text, channel.declined_text):
        assert f'"{re.split(r"[.;]", text)[0]}…"' in ask.body, text
    bench = Workbench(tmp_path)
    assert "The workbench is at " in bench.prompt_block()
    assert '"The workbench is at …/."' in skill("workbench", ENGLISH).body
    threshold = inspect.signature(Runtime).parameters["spill_threshold"].default
    long = "x" * (threshold + 1)
    pointer = spill_output(long, bench, threshold)
    assert isinstance(pointer, str)
    first = pointer.splitlines()[0]
    shape = first.replace(str(len(long)), "N").replace(str(bench.spill_text(long)), "<path>")
    assert f"`{shape}`" in skill("workbench", ENGLISH).body
    for page in [*skills(ENGLISH), *agents(ENGLISH)]:
        assert not re.search(r"[\u4e00-\u9fff]", re.sub(r"需求|目标|问答记录|交接", "", page.body))
