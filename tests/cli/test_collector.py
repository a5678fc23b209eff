"""The garbage collector is off while a command line starts and on when its command runs
(flower.cli.collector, issue 31): a long run must collect as always, and an app called by
a program or a test that never paused it is left as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
import typer

from flower.cli import AskRouter, collector


@pytest.fixture
def restored() -> Iterator[None]:
    """The collector on and nothing frozen again after the test, whatever it did."""
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def app_seeing(seen: list[tuple[bool, int]]) -> typer.Typer:
    """An app whose command records whether the collector is on, and how much is frozen."""
    app = typer.Typer(cls=AskRouter)

    @app.command()
    def go(ask: str) -> None:
        """The ask."""
        seen.append((gc.isenabled(), gc.get_freeze_count()))

    @app.command()
    def other() -> None:
        """Another."""

    return app


def test_a_paused_start_runs_its_command_with_the_collector_on(restored: None) -> None:
    seen: list[tuple[bool, int]] = []
    app = app_seeing(seen)
    gc.unfreeze()
    collector.pause()
    assert not gc.isenabled()
    app(["go", "fix it"], standalone_mode=False)
    [(enabled, frozen)] = seen
    assert enabled
    assert frozen > 0  # what the start built is out of the collector's sight


def test_an_app_that_was_not_paused_is_left_as_it_is(restored: None) -> None:
    seen: list[tuple[bool, int]] = []
    gc.unfreeze()
    app_seeing(seen)(["go", "fix it"], standalone_mode=False)
    assert seen == [(True, 0)]  # on, as it was, and nothing frozen


def test_a_help_page_ends_before_the_collector_is_needed(restored: None) -> None:
    collector.pause()
    with pytest.raises(SystemExit) as done:
        app_seeing([])(["--help"])
    assert done.value.code == 0
    assert not gc.isenabled()  # the process ends here: nothing to collect for
