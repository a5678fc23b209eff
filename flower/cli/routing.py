"""The first word of `flower ...` (and `flowerbox ...`): a command, the help, or the ask.

A first argument that names no command is the ask, routed to `go`, so `flower "fix the
tests"` needs no subcommand. That shortcut has traps, closed here: nothing at all, `help`,
`help COMMAND`, `-h` and `--help` show the help (exit 0); a single word that looks like a
mistyped command or option (`statu`, `—help` with a typographic dash, `version`) would start
a paid run, so it does only when a person at a terminal confirms it, and is refused off a
terminal, naming the command that was probably meant. `go WORD` is always an ask.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer import _click  # typer >= 0.26 vendors click; its group speaks these types
from typer.core import TyperGroup

from flower.cli import collector, helplang, richhelp
from flower.cli.coercion import settle_defaults
from flower.cli.lazyparams import defer_params
from flower.core import lang

HELP_OPTIONS = ["-h", "--help"]
"""Every command's help options (the apps' context_settings)."""
HELP_WORDS = frozenset({"help", "h", "?"})
GLOBAL_OPTIONS = ("--lang",)
"""The root's options that take a value and may stand anywhere on the line (`flower "ask"
--lang en`): they are moved in front of the command, where the root reads them."""
DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d"
"""Dashes an editor or a chat app types in place of `-` (`—help`, `–timeout`)."""


class AskRouter(TyperGroup):
    """A TyperGroup whose first argument may be the ask of `ask_command`, without traps."""

    ask_command = "go"

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        """The context; first, under --lang zh, the whole tree's help in Chinese
        (flower.cli.helplang), before `--help` or a usage error can draw it. Parameters
        left at their defaults skip pydantic (flower.cli.coercion), and a command loaded from
        here on makes its parameters when first used (flower.cli.lazyparams); a help page is drawn
        without rich's Markdown and Traceback loaded (flower.cli.richhelp)."""
        settle_defaults()
        defer_params()
        lead, _ = hoisted(list(args))
        helping = not args or bool({*args} & {*HELP_OPTIONS}) or args[0].lower() in HELP_WORDS
        if helping:
            richhelp.load()
        if parent is None and helplang.language_of(lead) == "zh":
            settings = {**self.context_settings, **extra}
            context = self.context_class(self, info_name=info_name, **settings)
            helplang.translate(self, context, every=helping)  # else: as commands are handed out
            if helping:
                helplang.panel_words()  # typer's words on the help page (not loaded otherwise)
        elif parent is None:
            helplang.english(self)  # a Chinese line earlier in this process left it translated
        return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: _click.Context) -> Any:
        """The command; click's refusal of its line in Chinese when the help is."""
        try:
            return super().invoke(ctx)
        except _click.exceptions.UsageError as exc:
            if not getattr(self, helplang.DONE, False):
                raise
            helplang.panel_words()  # the error's panel
            raise helplang.usage_error(exc) from exc

    def resolve_command(self, ctx: _click.Context, args: list[str]) -> Any:
        """The command of the line, loaded; from here it runs with the garbage collector
        on (flower.cli.collector: off while the command line started)."""
        found = super().resolve_command(ctx, args)
        collector.resume()
        return found

    def get_command(self, ctx: _click.Context, cmd_name: str) -> Any:
        """A command, its help in Chinese when this tree's is (one loaded late too)."""
        command = super().get_command(ctx, cmd_name)
        if command is not None and getattr(self, helplang.DONE, False):
            helplang.translate(command, ctx)
        return command

    def parse_args(self, ctx: _click.Context, args: list[str]) -> list[str]:
        lead, rest = hoisted(list(args))
        return super().parse_args(ctx, [*lead, *self.route(ctx, rest)])

    def route(self, ctx: _click.Context, args: list[str]) -> list[str]:
        """`args` with the help words turned into --help and a bare ask behind `go`."""
        if not args:
            return ["--help"]
        first, rest = args[0], args[1:]
        if first.lower() in HELP_WORDS:
            return [rest[0], "--help"] if rest and rest[0] in self.commands else ["--help"]
        if first in self.commands or first.startswith("-"):
            return args
        if (meant := self.meant(ctx, first)) is not None:
            self._confirm(ctx, first, meant)
        return [self.ask_command, *args]

    def meant(self, ctx: _click.Context, word: str) -> str | None:
        """The command line `word` probably meant (`status`, `--help`), or None when it reads
        as an ask: anything with a space in it, or a word like no command or option."""
        if not word.strip() or any(c.isspace() for c in word):
            return None
        bare = word.lstrip("-" + DASHES)
        options = self._option_words(ctx)
        if word[0] in DASHES:
            return f"--{bare}" if bare.lower() in options else f"-{word[1:]}"
        if bare.lower() in options:
            return f"--{bare.lower()}"
        close = [
            name
            for name in self.commands
            if name != self.ask_command and mistyped(word.lower(), name)
        ]
        return min(close, key=lambda name: typos(word.lower(), name)) if close else None

    def _option_words(self, ctx: _click.Context) -> set[str]:
        """The long options of the group and of the ask's command, without their dashes."""
        commands = [self, self.commands.get(self.ask_command)]
        return {
            name.lstrip("-").lower()
            for command in commands
            if command is not None
            for param in command.get_params(ctx)
            for name in (*param.opts, *param.secondary_opts)
            if name.startswith("--")
        }

    def _confirm(self, ctx: _click.Context, word: str, meant: str) -> None:
        """Go on only if a person at a terminal says `word` really is the ask."""
        prog = ctx.command_path
        if sys.stdin.isatty():
            question = lang.text("cli.mistyped_prompt", word=word, prog=prog, meant=meant)
            if typer.confirm(question, default=False, err=True):
                return
            declined = lang.text("error.mistyped_declined", prog=prog, meant=meant)
            raise _click.exceptions.UsageError(declined, ctx)
        refused = lang.text(
            "error.mistyped",
            quoted=repr(word),
            prog=prog,
            meant=meant,
            ask=self.ask_command,
            word=word,
        )
        raise _click.exceptions.UsageError(refused, ctx)


def hoisted(args: list[str]) -> tuple[list[str], list[str]]:
    """The GLOBAL_OPTIONS (with their values) found in `args` before any `--`, and the rest."""
    lead: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        if arg in GLOBAL_OPTIONS and i + 1 < len(args):
            lead += args[i : i + 2]
            i += 2
            continue
        if arg.startswith(tuple(f"{name}=" for name in GLOBAL_OPTIONS)):
            lead.append(arg)
        else:
            rest.append(arg)
        i += 1
    return lead, rest


def mistyped(word: str, command: str) -> bool:
    """`word` is `command` with one typo (a letter missing, extra, wrong, or two swapped:
    statu, stauts, anwser), or two in a long command of about its length (anlyse); a real
    word like "second" (not "send") or "report" (not "repo") is not."""
    allowed = 2 if len(command) >= 6 and abs(len(word) - len(command)) <= 1 else 1
    return typos(word, command) <= allowed


def typos(a: str, b: str) -> int:
    """The optimal string alignment distance: insertions, deletions, substitutions and
    swaps of two neighbours, each one typo."""
    rows = [list(range(len(b) + 1))]
    for i, x in enumerate(a, 1):
        row = [i]
        for j, y in enumerate(b, 1):
            row.append(min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (x != y)))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]
