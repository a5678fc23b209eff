"""A command's parameters made when first read (flower.cli.lazyparams, issue 31): every
command of both command lines built that way is the command typer builds (its help, its
parameters, its callback's behaviour), and a group's help page makes none of them. That
every help page reads the same: tests/cli/test_richhelp.py and docs/cli/generate.py."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import Any

import pytest
import typer
import typer.main
from typer import _click
from typer.core import TyperGroup

import flower.cli.app as flower_cli
import flowerbox.cli.app as flowerbox_cli
from flower.cli import lazyparams
from flower.core.texts.help_zh import HELP_ZH

PS_HELP = "List the runs (newest last) and the questions they wait on."
APPS = {"flower": flower_cli.app, "flowerbox": flowerbox_cli.app}
COMMAND_FIELDS = ("name", "help", "short_help", "epilog", "hidden", "no_args_is_help")
PARAM_FIELDS = (
    "name", "opts", "secondary_opts", "default", "required", "help", "nargs", "multiple",
    "envvar", "hidden", "is_flag", "count", "metavar", "expose_value", "is_eager",
)  # fmt: skip


def tree(command: _click.Command, path: str) -> Iterator[tuple[str, _click.Command]]:
    """`command` and every command under it (each built), by path."""
    yield path, command
    if isinstance(command, TyperGroup):
        for name in list(command.commands):
            yield from tree(command.commands[name], f"{path} {name}")


def kind(param: _click.Parameter) -> Any:
    """The annotation typer converts a parameter's value to."""
    return getattr(getattr(param, "type_descriptor", None), "annotation", None)


def described(command: _click.Command) -> dict[str, Any]:
    """What a command is made of, its class's name and each parameter's fields included."""
    return {
        "class": type(command).__name__,
        **{field: getattr(command, field) for field in COMMAND_FIELDS},
        "params": [
            (type(p).__name__, kind(p), [getattr(p, f, None) for f in PARAM_FIELDS])
            for p in command.params
        ],
        "callback": getattr(command.callback, "__name__", None),
    }


def built(app: typer.Typer, monkeypatch: pytest.MonkeyPatch, *, deferred: bool) -> Any:
    """The app's command tree, its commands' parameters made by typer at once or deferred."""
    build = lazyparams.get_command_from_info if deferred else lazyparams._BUILD
    monkeypatch.setattr(typer.main, "get_command_from_info", build)
    return typer.main.get_command(app)


@pytest.mark.parametrize("name", APPS)
def test_every_deferred_command_is_the_command_typer_builds(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    eager = dict(tree(built(APPS[name], monkeypatch, deferred=False), name))
    deferred = dict(tree(built(APPS[name], monkeypatch, deferred=True), name))
    assert list(deferred) == list(eager)
    assert len(eager) > 10
    for path, command in deferred.items():
        assert described(command) == described(eager[path]), path


def help_page(group: Any, args: list[str]) -> str:
    """What `flowerbox ARGS` prints (a help page: exit 0)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        group.main(args, prog_name="flowerbox")
    assert done.value.code == 0
    return out.getvalue()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_group_help_page_makes_no_command_parameters(
    lang: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nor does `--lang zh` make them to translate them: a command's are translated when
    they are made (its own help page, here in the same process as a person's next line)."""
    group = built(flowerbox_cli.app, monkeypatch, deferred=True)
    ps_line = {"en": "List the runs", "zh": HELP_ZH[PS_HELP][:6]}[lang]
    assert ps_line in help_page(group, ["--lang", lang, "--help"])  # its module loaded
    pending = [n for n in group.commands if lazyparams._PENDING in vars(group.commands[n])]
    assert "ps" in pending and "go" in pending and len(pending) >= 20
    ps = group.commands["ps"]
    json_help = next(param.help for param in ps.params if "--json" in param.opts)
    assert lazyparams._PENDING not in vars(ps)
    assert ps.callback is not None and ps.callback.__wrapped__.__name__ == "ps"
    assert (json_help in HELP_ZH) == (lang == "en")
    assert (json_help in HELP_ZH.values()) == (lang == "zh")


def test_a_deferred_command_runs_its_function_with_its_parameters() -> None:
    seen: list[tuple[str, int]] = []
    app = typer.Typer()

    @app.command()
    def greet(who: str, times: int = 2) -> None:
        """Greet someone."""
        seen.append((who, times))

    @app.command()
    def other() -> None:
        """Another command, so that the app is a group."""

    lazyparams.defer_params()
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    greeting = group.commands["greet"]
    assert lazyparams._PENDING in vars(greeting) and greeting.help == "Greet someone."
    group.main(["greet", "ann", "--times", "3"], standalone_mode=False)
    assert seen == [("ann", 3)]


def test_parameters_set_before_they_are_read_are_kept() -> None:
    app = typer.Typer()

    @app.command()
    def one(flag: bool = False) -> None:
        """One."""

    @app.command()
    def two() -> None:
        """Two."""

    lazyparams.defer_params()
    kept = typer.main.get_command(app).commands["one"].params  # type: ignore[attr-defined]
    command = typer.main.get_command(app).commands["one"]  # type: ignore[attr-defined]
    assert lazyparams._PENDING in vars(command)
    command.params = kept  # before any read: not undone by the making
    assert command.params is kept and lazyparams._PENDING not in vars(command)
    assert command.callback is not None  # made with them
