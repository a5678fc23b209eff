"""`--help` in the command line's language.

The command trees of flower and flowerbox are built in English at import (typer reads the
docstrings and `help=` strings then; docs/cli/ is generated from them). Under `--lang zh`
(or $FLOWER_LANG / a zh locale) the root group calls `translate` on itself and on each
command it hands out, before any help is drawn: every help text with an entry in
flower.core.texts.help_zh.HELP_ZH is swapped for it, the help option's too, and so are
typer's panel titles. English is never touched, so the default help is what it was.
"""

from __future__ import annotations

from typing import Any

from flower.cli.lazy import LazyCommands
from flower.core.lang import LangError, resolve
from flower.core.texts.help_zh import HELP_ZH

DONE = "_flower_help_lang"  # set on a command once translated: each is done once
ENGLISH = "_flower_help_en"  # on a translated command: (object, attribute, English value)s
_PANEL_ENGLISH: dict[str, Any] = {}  # typer's own words that panel_words replaced
# typer's own words on a help page (typer.rich_utils), as their zh.
PANEL_WORDS = {
    "ARGUMENTS_PANEL_TITLE": "参数",
    "OPTIONS_PANEL_TITLE": "选项",
    "COMMANDS_PANEL_TITLE": "命令",
    "ERRORS_PANEL_TITLE": "错误",
    "DEFAULT_STRING": "[默认：{}]",
    "REQUIRED_LONG_STRING": "[必填]",
    "ENVVAR_STRING": "[环境变量：{}]",
    "ABORTED_TEXT": "已中止。",
    "RICH_HELP": "用 [blue]'{command_path} {help_option}'[/] 查看帮助。",
}
KINDS = {"argument": "参数", "option": "选项", "parameter": "参数"}
EXTRA = "Got unexpected extra argument"
HELP_OPTION = "Show this message and exit."
HELP_OPTION_ZH = "显示这段帮助并退出。"


def language_of(lead: list[str]) -> str:
    """The language a command line asks for: its hoisted `--lang X` (flower.cli.routing),
    else $FLOWER_LANG, the locale, en. An unknown value is the --lang option's to refuse
    (exit 2, in English): here it reads as en."""
    flag = None
    for i, arg in enumerate(lead):
        if arg == "--lang" and i + 1 < len(lead):
            flag = lead[i + 1]
        elif arg.startswith("--lang="):
            flag = arg.partition("=")[2]
    try:
        return resolve(flag)
    except LangError:
        return "en"


def translate(command: Any, ctx: Any = None, *, every: bool = True) -> None:
    """Put `command`'s help texts (and its subcommands', for a group: `every` one, loading
    those a lazy group has not loaded, as a help page lists them all; else those loaded) in
    Chinese, where the table has them. `ctx` makes the help option now, so its text can be
    set too. What it replaces is kept (ENGLISH) for `english` to put back."""
    if getattr(command, DONE, False):
        return
    setattr(command, DONE, True)
    kept: list[tuple[Any, str, Any]] = [(command, "short_help", command.short_help)]
    if command.help in HELP_ZH:
        kept.append((command, "help", command.help))
        command.help = HELP_ZH[command.help]
        command.short_help = None  # the list of commands shows the first line of the help
    if ctx is not None and (option := command.get_help_option(ctx)) is not None:
        kept.append((option, "help", option.help))
        option.help = HELP_OPTION_ZH if option.help == HELP_OPTION else option.help
    for param in command.params:
        if getattr(param, "help", None) in HELP_ZH:
            kept.append((param, "help", param.help))
            param.help = HELP_ZH[param.help]
    setattr(command, ENGLISH, kept)
    for sub in _subcommands(command, every=every):
        translate(sub, ctx, every=every)


def english(command: Any) -> None:
    """Undo `translate` on `command` and below, and typer's panel words: the trees are built
    once per process, so an English line after a Chinese one in the same process (a test,
    a program that calls the app twice) must not show the Chinese help."""
    for owner, name, value in getattr(command, ENGLISH, ()):
        setattr(owner, name, value)
    if getattr(command, DONE, False):
        setattr(command, DONE, False)
        setattr(command, ENGLISH, [])
        for sub in _subcommands(command, every=False):  # only a loaded one was translated
            english(sub)
    if _PANEL_ENGLISH:
        from typer import rich_utils  # lazy: loaded already, panel_words set the words on it

        for name, word in _PANEL_ENGLISH.items():
            setattr(rich_utils, name, word)
        _PANEL_ENGLISH.clear()


def _subcommands(command: Any, *, every: bool) -> list[Any]:
    """A group's commands: all of them, or only those its lazy table has loaded (a command
    line that runs one command must not load the others: issue 31)."""
    commands = getattr(command, "commands", {})
    if not every and isinstance(commands, LazyCommands):
        return commands.loaded()
    return list(commands.values())


def panel_words() -> None:
    """typer's panel titles and markers in Chinese (typer reads them at each help)."""
    from typer import rich_utils  # lazy: only a zh help or error loads it

    for name, word in PANEL_WORDS.items():
        _PANEL_ENGLISH.setdefault(name, getattr(rich_utils, name))
        setattr(rich_utils, name, word)


def usage_error(exc: Any) -> Any:
    """click's refusal of a command line (an unknown option, a bad or missing value) said in
    Chinese: the same error, its own words (a value callback's) kept, click's around them
    translated. Anything else is returned as it is."""
    from typer import _click  # lazy: only a refused command line needs it

    errors = _click.exceptions
    if isinstance(exc, errors.NoSuchOption):
        said = f"没有这个选项：{exc.option_name}"
        if exc.possibilities:
            said += f"（可能是：{', '.join(sorted(exc.possibilities))}）"
    elif isinstance(exc, errors.BadParameter):
        hint = exc.param_hint or (exc.param.get_error_hint() if exc.param is not None else "")
        hint = " / ".join(hint) if isinstance(hint, list | tuple) else hint
        if isinstance(exc, errors.MissingParameter):
            kind = exc.param_type or (exc.param.param_type_name if exc.param else "")
            said = f"缺少{KINDS.get(kind, '')} {hint}"
        else:
            said = f"{hint} 的值无效：{exc.message}" if hint else f"值无效：{exc.message}"
    elif exc.message.startswith(EXTRA):
        said = "多余的参数" + exc.message.removeprefix(EXTRA).removeprefix("(s)")
    else:
        return exc
    return errors.UsageError(said, exc.ctx)
