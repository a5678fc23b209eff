"""`--help` in the command line's language.

The command trees of flower and flowerbox are built in English at import (typer reads the
docstrings and `help=` strings then; docs/cli/ is generated from them). Under `--lang zh`
(or $FLOWER_LANG / a zh locale) the root group calls `translate` on itself and on each
command it hands out, before any help is drawn: every help text with an entry in
flower.core.texts.help_zh.HELP_ZH is swapped for it, the help option's too, and so are
typer's panel titles. English is never touched, so the default help is what it was.
"""

from __future__ import annotations

import re
from typing import Any

from flower.cli import lazyparams
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
USAGE_ZH = "用法："  # click's "Usage: " before a command line's synopsis
_USAGE_ENGLISH: list[Any] = []  # click's own write_usage, while usage_words replaced it
# click's and typer's words about a value (its type, its choices, a path), as their zh; a
# message none of these matches (a value callback's own, already in the line's language) is
# shown as it is.
VALUE_WORDS = (
    (
        r"(?:Value error, )?(?P<value>.+) is not one of (?P<choices>.+)\.",
        "{value} 不是 {choices} 之一。",
    ),
    (r"(?P<label>File|Directory|Path) (?P<loc>'.*') does not exist\.", "{label}{loc} 不存在。"),
    (r"(?P<label>File|Directory|Path) (?P<loc>'.*') is a file\.", "{label}{loc} 是文件。"),
    (r"(?P<label>File|Directory|Path) (?P<loc>'.*') is a directory\.", "{label}{loc} 是目录。"),
    (r"(?P<label>File|Directory|Path) (?P<loc>'.*') is not readable\.", "{label}{loc} 不可读。"),
    (r"(?P<label>File|Directory|Path) (?P<loc>'.*') is not writable\.", "{label}{loc} 不可写。"),
    (r"Value (?P<value>.+) is not a valid (?P<label>.+)\.", "{value} 不是有效的 {label}。"),
    (r"Option (?P<opt>'.+') does not take a value\.", "选项 {opt} 不接受值。"),
    (r"Option (?P<opt>'.+') requires an argument\.", "选项 {opt} 需要一个值。"),
    (r"Option (?P<opt>'.+') requires (?P<n>\d+) arguments\.", "选项 {opt} 需要 {n} 个值。"),
    (r"Argument (?P<arg>'.+') takes (?P<n>\d+) values\.", "参数 {arg} 需要 {n} 个值。"),
)
PATH_LABELS = {"File": "文件 ", "Directory": "目录 ", "Path": "路径 "}
# pydantic's checks of a typed value (typer >= 0.26 converts with it), by error type.
CHECKS = {
    "int_parsing": "{input!r} 不是有效的整数",
    "int_from_float": "{input!r} 不是整数",
    "float_parsing": "{input!r} 不是有效的数",
    "bool_parsing": "{input!r} 不是有效的布尔值（true/false）",
    "greater_than_equal": "应大于或等于 {ge}",
    "greater_than": "应大于 {gt}",
    "less_than_equal": "应小于或等于 {le}",
    "less_than": "应小于 {lt}",
}
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
    Chinese, where the table has them; its parameters' and help option's (made from `ctx`)
    once they are made (flower.cli.lazyparams: a group's help page makes none). What it
    replaces is kept (ENGLISH) for `english` to put back."""
    if getattr(command, DONE, False):
        return
    setattr(command, DONE, True)
    kept: list[tuple[Any, str, Any]] = [(command, "short_help", command.short_help)]
    if command.help in HELP_ZH:
        kept.append((command, "help", command.help))
        command.help = HELP_ZH[command.help]
        command.short_help = None  # the list of commands shows the first line of the help
    setattr(command, ENGLISH, kept)
    lazyparams.when_made(command, lambda params: _translate_params(command, ctx, params, kept))
    for sub in _subcommands(command, every=every):
        translate(sub, ctx, every=every)


def _translate_params(command: Any, ctx: Any, params: list[Any], kept: list[Any]) -> None:
    """The help of `command`'s parameters and help option in Chinese, what it replaces
    kept, if `command` is still translated (made after an English line, they stay so)."""
    if getattr(command, ENGLISH, None) is not kept:
        return
    if ctx is not None and (option := command.get_help_option(ctx)) is not None:
        kept.append((option, "help", option.help))
        option.help = HELP_OPTION_ZH if option.help == HELP_OPTION else option.help
    for param in params:
        if getattr(param, "help", None) in HELP_ZH:
            kept.append((param, "help", param.help))
            param.help = HELP_ZH[param.help]


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
    if _USAGE_ENGLISH:
        from typer._click import formatting  # lazy: loaded already, usage_words replaced it

        setattr(formatting.HelpFormatter, "write_usage", _USAGE_ENGLISH.pop())  # noqa: B010


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
    usage_words()


def usage_words() -> None:
    """click's "Usage: " in Chinese, on a help page and above a refusal (put back by
    `english`)."""
    from typer._click import formatting  # lazy: only a zh help or error draws a usage line

    if _USAGE_ENGLISH:
        return
    original = formatting.HelpFormatter.write_usage
    _USAGE_ENGLISH.append(original)

    def write_usage(self: Any, prog: str, args: str = "", prefix: str | None = None) -> None:
        original(self, prog, args, USAGE_ZH if prefix is None else prefix)

    setattr(formatting.HelpFormatter, "write_usage", write_usage)  # noqa: B010  # mypy: a method


def value_words(exc: Any) -> str:
    """The Chinese of click's or typer's message about a value (`exc.message`): from the
    pydantic check that refused it where there is one, else by its English shape; a message
    of flower's own comes back as it is."""
    cause = exc.__cause__
    if callable(getattr(cause, "errors", None)):
        [first, *_] = cause.errors() or [{}]
        if (check := CHECKS.get(first.get("type", ""))) is not None:
            limits = {k: _number(v) for k, v in first.get("ctx", {}).items()}
            return check.format(input=first.get("input"), **limits)
    for pattern, zh in VALUE_WORDS:
        if (found := re.fullmatch(pattern, exc.message)) is not None:
            fields = found.groupdict()
            if "label" in fields and fields["label"] in PATH_LABELS:
                fields["label"] = PATH_LABELS[fields["label"]]
            return zh.format(**fields)
    return str(exc.message).removeprefix("Value error, ")  # pydantic's, before flower's own


def _number(value: Any) -> Any:
    """A limit as pydantic's English shows it: 0, not 0.0."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


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
            said = f"{hint} 的值无效：{value_words(exc)}" if hint else f"值无效：{value_words(exc)}"
    elif exc.message.startswith(EXTRA):
        said = "多余的参数" + exc.message.removeprefix(EXTRA).removeprefix("(s)")
    elif (words := value_words(exc)) != exc.message:
        said = words
    else:
        return exc
    return errors.UsageError(said, exc.ctx)
