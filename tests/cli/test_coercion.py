"""A parameter left at its default skips typer's pydantic adapter (flower.cli.coercion, issue
31): that is only right if typer's adapter hands every declared default back unchanged, which
is checked here for every parameter of both command lines; a typed value still goes through
typer's own coercion (its refusals included). That `ps` and `status` import no pydantic:
tests/flowerbox/test_host_imports.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import typer
import typer.main
import typer.testing
from typer import _click
from typer._coercion import build_runtime_param
from typer.core import TyperGroup, _TyperParameter

import flower.cli.app as flower_cli
import flowerbox.cli.app as flowerbox_cli
from flower.cli.coercion import settle_defaults
from tests.flowerbox.test_host_imports import imported, script

Found = tuple[str, _TyperParameter, _click.Command]


def parameters(command: _click.Command, path: str) -> Iterator[Found]:
    """Every typer parameter of `command` and of the commands under it (built), by path,
    with its command."""
    for param in command.params:
        if isinstance(param, _TyperParameter):
            yield f"{path} {param.name}", param, command
    if isinstance(command, TyperGroup):
        for name in list(command.commands):
            yield from parameters(command.commands[name], f"{path} {name}")


def every_parameter() -> list[Found]:
    found: list[Found] = []
    for name, app in (("flower", flower_cli.app), ("flowerbox", flowerbox_cli.app)):
        found += parameters(typer.main.get_command(app), name)
    return found


def test_typers_adapter_hands_every_declared_default_back_unchanged() -> None:
    checked = 0
    for where, param, command in every_parameter():
        default = param.default
        if default is None:
            continue
        ctx = _click.Context(command)
        coerced = build_runtime_param(param.type_descriptor).coerce(default, param=param, ctx=ctx)
        assert coerced == default and type(coerced) is type(default), where
        checked += 1
    assert checked >= 20  # the walk reached the commands' defaults (ps's --on, status's run dir)


def test_a_typed_value_still_goes_through_typers_coercion() -> None:
    """An int option given a word is refused as typer refuses it; a path given as text is a
    Path; the default of the same option stays the default."""
    settle_defaults()
    app = typer.Typer()

    @app.command()
    def probe(count: int = 3, where: Path = Path("runs")) -> None:
        typer.echo(f"{count!r} {where!r}")

    runner = typer.testing.CliRunner()
    assert runner.invoke(app, []).stdout.strip() == "3 PosixPath('runs')"
    assert runner.invoke(app, ["--count", "7", "--where", "x"]).stdout.strip() == (
        "7 PosixPath('x')"
    )
    refused = runner.invoke(app, ["--count", "seven"])
    assert refused.exit_code == 2 and "--count" in refused.output, refused.output


def test_a_typed_option_imports_pydantic_as_typer_does(tmp_path: Path) -> None:
    """The negative control: a value a person typed is coerced by typer's adapter."""
    modules = imported(script("flower status runs"), tmp_path)
    assert "pydantic" in modules
