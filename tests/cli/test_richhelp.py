"""Help pages drawn without rich's Markdown and Traceback loaded (flower.cli.richhelp, issue
31) are the pages typer draws with them: every command's help of both command lines, in
both languages, compared between a process that takes the light path and one where rich's
modules were loaded first (typer's own path). A crash's traceback and a Markdown text are
still rich's own classes, an emoji name is still drawn, and a help page leaves no stand-in
behind but the emoji table, unread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EVERY_HELP = r"""
import json, sys
{first}
import typer.main, typer.testing
from typer.core import TyperGroup
import flower.cli.app, flowerbox.cli.app

def paths(command, path=()):
    yield path
    if isinstance(command, TyperGroup):
        for name in list(command.commands):
            yield from paths(command.commands[name], (*path, name))

pages, roots = {{}}, []
runner = typer.testing.CliRunner()
for prog, app in (("flower", flower.cli.app.app), ("flowerbox", flowerbox.cli.app.app)):
    for path in list(paths(typer.main.get_command(app))):
        for lang in ("en", "zh"):
            done = runner.invoke(app, ["--lang", lang, *path, "--help"], prog_name=prog)
            pages[" ".join((prog, lang, *path))] = [done.exit_code, done.output]
            if not path:  # a root page: does it look an emoji name up?
                roots.append(type(sys.modules["rich._emoji_codes"].EMOJI).__name__)
light = type(sys.modules["typer.rich_utils"].Markdown).__name__ == "Deferred"
print(json.dumps({{"pages": pages, "light": light, "markdown": "markdown_it" in sys.modules,
                  "emoji": roots}}))
"""


def every_help(first: str, cwd: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", EVERY_HELP.format(first=first)],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "100", "XDG_STATE_HOME": str(cwd)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, object] = json.loads(done.stdout)
    return found


def test_every_help_page_is_the_one_typer_draws_with_rich_loaded(tmp_path: Path) -> None:
    light = every_help("", tmp_path)
    full = every_help("import rich.markdown, rich.traceback, rich._emoji_codes", tmp_path)
    assert light["light"] is True and light["markdown"] is False  # the light path was taken
    assert set(light["emoji"]) == {"Emoji"}  # no root page looked an emoji name up
    assert full["light"] is False and set(full["emoji"]) == {"dict"}  # typer's own path
    pages, expected = light["pages"], full["pages"]
    assert isinstance(pages, dict) and isinstance(expected, dict)
    assert len(pages) >= 2 * (12 + 25)  # every command of both, in both languages
    assert pages.keys() == expected.keys()
    for key, page in pages.items():
        assert page == expected[key], key
        assert page[0] == 0 and ("Usage" in page[1] or "用法" in page[1]), key


def test_a_crash_a_markdown_text_and_an_emoji_are_still_riches_own(tmp_path: Path) -> None:
    code = (
        "import sys; from flower.cli import richhelp; utils = richhelp.load();"
        " assert 'rich.markdown' not in sys.modules and 'rich.traceback' not in sys.modules;"
        " assert type(sys.modules['rich._emoji_codes'].EMOJI) is richhelp.Emoji;"
        " from typer.models import DeveloperExceptionConfig;"
        " from rich.markdown import Markdown; from rich.traceback import Traceback;"
        " assert isinstance(utils.Markdown('*x*'), Markdown);"
        " error = ValueError('boom');"
        " tb = utils.get_traceback(error, DeveloperExceptionConfig(), []);"
        " assert isinstance(tb, Traceback), tb;"
        " from rich.text import Text; from rich.emoji import Emoji;"
        " assert Text.from_markup('a :thumbs_up: :nope:').plain == 'a \\U0001f44d :nope:';"
        " assert str(Emoji('smile')) == '\\U0001f604'; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
