"""Workbench: layout, script descriptions, INDEX.md, the prompt block, spill files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flower.core.workbench import DESC_CHARS, Workbench, WorkbenchError


@pytest.fixture
def wb(tmp_path: Path) -> Workbench:
    return Workbench(tmp_path / "ws")


def _script(wb: Workbench, name: str, text: str | bytes, *, age: int = 0) -> Path:
    path = wb.scripts / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    stamp = 1_700_000_000 - age
    os.utime(path, (stamp, stamp))
    return path


def test_layout_is_created_inside_the_workspace(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "ws")
    assert wb.root == (tmp_path / "ws" / ".flower").resolve()
    assert not wb.external
    for folder in ("scripts", "artifacts", "notes", "spill"):
        assert (wb.root / folder).is_dir()
    assert wb.index.read_text(encoding="utf-8").startswith("# 工作台索引")


def test_home_outside_the_workspace_is_external(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "ws", home=tmp_path / ".flower-ws")
    assert wb.root == (tmp_path / ".flower-ws").resolve()
    assert wb.external
    assert Workbench(tmp_path / "ws", home=tmp_path / "ws" / "runs" / "wb").external is False


def test_reopening_keeps_existing_files(wb: Workbench) -> None:
    _script(wb, "a.py", "# desc: keep me\n")
    again = Workbench(wb.workspace)
    assert (again.scripts / "a.py").exists()
    assert "keep me" in again.index_text()


@pytest.mark.english
def test_a_file_where_the_workbench_goes_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / ".flower").write_text("not a dir")
    with pytest.raises(WorkbenchError) as info:
        Workbench(tmp_path / "ws")
    assert info.value.path == (tmp_path / "ws" / ".flower").resolve()
    assert "not a directory" in str(info.value) and "move that file away" in str(info.value)
    assert "home=" not in str(info.value)  # the CLI shows it too, and has no such argument


@pytest.mark.english
def test_a_file_where_a_folder_goes_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "ws" / ".flower").mkdir(parents=True)
    (tmp_path / "ws" / ".flower" / "notes").write_text("oops")
    with pytest.raises(WorkbenchError, match="notes exists and is not a directory"):
        Workbench(tmp_path / "ws")


def test_max_index_entries_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_index_entries must be at least 1, got 0"):
        Workbench(tmp_path, max_index_entries=0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#!/usr/bin/env python\n# desc: fetch the data\n", "fetch the data"),
        ("// desc: build the site\nconsole.log(1)\n", "build the site"),
        ("-- desc: monthly totals\nSELECT 1;\n", "monthly totals"),
        ("# first comment\n# desc: the real one\n", "the real one"),
        ("#DESC:   tight and loud  \n", "tight and loud"),
        ("#!/bin/sh\n# -*- coding: utf-8 -*-\n# ------\n# plain comment\n", "plain comment"),
        ('"""Module docstring line.\n\nMore."""\n', "Module docstring line."),
        ('"""\n   Docstring on the second line.\n"""\n', "Docstring on the second line."),
        ("import os\n'''Single quotes.'''\n", "Single quotes."),
        ("x = 1\ny = 2\n", ""),
        ("", ""),
    ],
)
def test_describe(wb: Workbench, text: str, expected: str) -> None:
    assert wb.describe(_script(wb, "s", text)) == expected


def test_describe_looks_only_at_the_first_eight_lines(wb: Workbench) -> None:
    late = "x = 1\n" * 8 + "# desc: too late\n"
    assert wb.describe(_script(wb, "late.py", late)) == ""
    in_time = "x = 1\n" * 7 + "# desc: just in time\n"
    assert wb.describe(_script(wb, "in_time.py", in_time)) == "just in time"


def test_describe_caps_at_100_chars(wb: Workbench) -> None:
    desc = wb.describe(_script(wb, "long.py", "# desc: " + "x" * 300 + "\n"))
    assert len(desc) == DESC_CHARS == 100
    assert desc.endswith("…")
    exact = "y" * DESC_CHARS
    assert wb.describe(_script(wb, "exact.py", f"# desc: {exact}\n")) == exact


def test_describe_survives_non_utf8_and_missing_files(wb: Workbench) -> None:
    path = _script(wb, "bin.sh", b"# desc: caf\xe9 \xff\xfe tool\n\x00\x01")
    assert wb.describe(path) == "caf\ufffd \ufffd\ufffd tool"
    assert wb.describe(wb.scripts / "gone.py") == ""


def test_index_lists_newest_first_with_descriptions(wb: Workbench) -> None:
    _script(wb, "old.py", "# desc: the old one\n", age=100)
    _script(wb, "new.py", "# desc: the new one\n", age=1)
    (wb.artifacts / "report.md").write_text("r")
    (wb.notes / "决定-选型.md").write_text("n")
    (wb.spill / "abc.txt").write_text("never listed")
    (wb.artifacts / ".report.md.123.tmp").write_text("temp litter")
    text = wb.index_text()
    assert text.index(".flower/scripts/new.py — the new one") < text.index(
        ".flower/scripts/old.py — the old one"
    )
    assert "- .flower/artifacts/report.md\n" in text
    assert "- .flower/notes/决定-选型.md\n" in text
    assert "abc.txt" not in text
    assert ".tmp" not in text


def test_index_is_capped_per_section(tmp_path: Path) -> None:
    wb = Workbench(tmp_path, max_index_entries=3)
    for age in range(5):
        _script(wb, f"s{age}.py", f"# desc: age {age}\n", age=age)
    (wb.notes / "only.md").write_text("n")
    text = wb.index_text()
    assert [f"age {n}" in text for n in range(5)] == [True, True, True, False, False]
    assert "另有 2 个较早的文件" in text
    assert "only.md" in text


def test_empty_sections_say_so(wb: Workbench) -> None:
    assert wb.index_text().count("- (空)") == 3


def test_refresh_rewrites_index_atomically(wb: Workbench) -> None:
    _script(wb, "a.py", "# desc: alpha\n")
    assert "alpha" not in wb.index.read_text(encoding="utf-8")
    wb.refresh()
    assert "alpha" in wb.index.read_text(encoding="utf-8")
    assert [p.name for p in wb.root.iterdir() if p.is_file()] == ["INDEX.md"]


def test_prompt_block_inside_the_workspace_uses_relative_paths(wb: Workbench) -> None:
    block = wb.prompt_block()
    assert "工作台在 .flower/" in block
    assert ".flower/scripts/" in block and "# desc:" in block
    assert ".flower/artifacts/" in block and "2000" in block
    assert ".flower/notes/" in block and "一个决定一个文件" in block
    assert "绝对路径" not in block
    assert str(wb.workspace) not in block
    assert block.endswith(wb.index_text())


def test_prompt_block_when_external_uses_absolute_paths(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "ws", home=tmp_path / ".flower-ws")
    _script(wb, "a.py", "# desc: alpha\n")
    block = wb.prompt_block()
    assert "绝对路径" in block
    assert f"{wb.root}/scripts/" in block
    assert f"{wb.root}/artifacts/" in block
    assert f"{wb.root}/scripts/a.py — alpha" in block


def test_spill_text_is_content_addressed_and_survives_surrogates(wb: Workbench) -> None:
    first = wb.spill_text("hello")
    assert first.parent == wb.spill
    assert first.name == "2cf24dba5fb0a30e.txt"  # sha256("hello")[:16]
    assert wb.spill_text("hello") == first
    odd = wb.spill_text("bin \udcff \ud800 end")
    assert odd.read_bytes() == "bin \udcff \ud800 end".encode("utf-8", "surrogatepass")
