"""One error tree: every exception class flower defines is a FlowerError, and the tree in
flower/errors.py's docstring names each of them."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import flower
import flower.errors
from flower.errors import FlowerError


def _flower_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(flower.__path__, "flower."):
        if info.name.endswith(".__main__"):  # running it would start the CLI
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
            ):
                found[name] = value
    return found


def test_every_flower_exception_is_a_flower_error() -> None:
    found = _flower_exceptions()
    assert len(found) >= 14
    assert {name for name, cls in found.items() if not issubclass(cls, FlowerError)} == set()


def test_the_drawn_tree_names_every_exception() -> None:
    tree = flower.errors.__doc__ or ""
    assert {name for name in _flower_exceptions() if name not in tree} == set()


def test_the_seeds_contracts_still_hold() -> None:
    """Runtime raises a RuntimeError without credentials, starter_flow a ValueError."""
    assert issubclass(flower.errors.CredentialsError, RuntimeError)
    assert issubclass(flower.errors.UsageError, ValueError)
    assert issubclass(flower.StateFileError, ValueError)
