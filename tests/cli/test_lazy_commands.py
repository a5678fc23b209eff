"""A group's commands built on first use (flower.cli.LazyCommands, issue 31): a lookup loads
the module of that command only, a listing loads nothing, and the tables of both apps name
exactly the commands their modules hold (a command left out would be unreachable)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
import typer.main
from typer import _click
from typer.core import TyperCommand, TyperGroup

import flower.cli.app as flower_cli
import flowerbox.cli.app as flowerbox_cli
from flower.cli import LazyCommands, Loader


def counted(names: list[str], calls: list[str]) -> Loader:
    """A loader of commands `names` that records each call."""

    def load() -> Mapping[str, _click.Command]:
        calls.append(",".join(names))
        return {name: TyperCommand(name) for name in names}

    return load


def test_a_lookup_loads_its_module_once_and_a_listing_loads_nothing() -> None:
    calls: list[str] = []
    runs = counted(["ps", "logs"], calls)
    commands = LazyCommands({"setup": TyperCommand("setup")}, {"ps": runs, "logs": runs})
    assert list(commands) == ["setup", "ps", "logs"]
    assert "ps" in commands and "nope" not in commands and len(commands) == 3
    assert calls == []
    assert commands["logs"].name == "logs"
    assert commands["ps"].name == "ps"
    assert calls == ["ps,logs"]  # one import for both of its commands
    assert commands.get("nope") is None


def test_a_loader_that_builds_other_commands_than_its_table_says_is_refused() -> None:
    commands = LazyCommands({}, {"ps": counted(["ps", "extra"], [])})
    with pytest.raises(LookupError, match="extra"):
        commands["ps"]


def every_command(app: typer.Typer) -> list[str]:
    """The names of the app's commands, in --help's order, each looked up (built)."""
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    return [name for name in group.commands if group.commands[name].name == name]


def test_flowers_table_names_exactly_its_commands() -> None:
    """Each lookup goes through a loader, which refuses a table that misses a command of
    its module or names one the module does not hold."""
    assert every_command(flower_cli.app) == list(flower_cli.COMMANDS)


def test_flowerboxs_table_names_exactly_its_commands() -> None:
    lazy = [name for names in flowerbox_cli.COMMANDS.values() for name in names]
    assert every_command(flowerbox_cli.app) == ["setup", "version", *lazy]


def test_a_command_set_later_is_listed_and_found() -> None:
    commands = LazyCommands({}, {"ps": counted(["ps"], [])})
    commands["x"] = TyperCommand("x")
    assert list(commands) == ["ps", "x"] and commands["x"].name == "x"
    del commands["ps"]
    assert list(commands) == ["x"]
