"""The zh help table is complete for both command trees and says what the English says: the
same options and `code` (the real `--help` under --lang zh is tests/cli/test_lang_cli.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import typer.main
from typer.testing import CliRunner

from flower.cli.app import app as flower_app
from flower.cli.helplang import HELP_OPTION, HELP_OPTION_ZH, translate
from flower.core.texts.help_zh import HELP_ZH
from flowerbox.cli.app import app as flowerbox_app

OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
CODE = re.compile(r"`[^`]+`")


def helps(command: Any) -> Iterator[str]:
    """Every help text of `command` and of the commands under it."""
    if command.help:
        yield command.help
    yield from (p.help for p in command.params if getattr(p, "help", None))
    for sub in getattr(command, "commands", {}).values():
        yield from helps(sub)


def trees() -> list[Any]:
    return [typer.main.get_command(flower_app), typer.main.get_command(flowerbox_app)]


def test_every_help_text_of_both_command_lines_has_its_chinese() -> None:
    texts = {text for tree in trees() for text in helps(tree)}
    missing = sorted(texts - HELP_ZH.keys())
    assert not missing, f"add these to flower/core/texts/help_zh.py: {missing}"
    unused = sorted(HELP_ZH.keys() - texts)
    assert not unused, f"no command says these any more; drop them from help_zh.py: {unused}"


def test_each_chinese_help_keeps_the_options_and_the_code_of_the_english() -> None:
    for english, chinese in HELP_ZH.items():
        assert set(OPTION.findall(english)) <= set(OPTION.findall(chinese)), english
        assert set(CODE.findall(english)) <= set(CODE.findall(chinese)), english


def test_translate_puts_a_tree_in_chinese_and_only_where_asked() -> None:
    english, chinese = trees()[0], trees()[0]
    ctx = typer.main.get_command(flower_app).context_class(chinese, info_name="flower")
    ctx.help_option_names = ["-h", "--help"]
    translate(chinese, ctx)
    go = chinese.commands["go"]
    assert go.help == HELP_ZH[english.commands["go"].help] and go.help.startswith("澄清需求")
    assert go.get_help_option(ctx).help == HELP_OPTION_ZH
    assert english.commands["go"].help.startswith("Clarify the ask")  # another tree: untouched
    assert HELP_OPTION == "Show this message and exit."


def test_an_english_line_after_a_chinese_one_in_one_process_is_english_again() -> None:
    """The trees are built once per process and translated in place: a line under --lang en
    after one under --lang zh (a program, or a test, calling the app twice) puts the English
    back, typer's panel titles included."""
    runner = CliRunner()
    chinese = runner.invoke(flowerbox_app, ["--lang", "zh", "--help"])
    english = runner.invoke(flowerbox_app, ["--lang", "en", "--help"])
    assert chinese.exit_code == english.exit_code == 0
    assert "命令" in chinese.output and "打印版本并退出" in chinese.output
    assert "Commands" in english.output and "Print the version and exit" in english.output
    assert not re.search(r"[\u4e00-\u9fff]", english.output), english.output
