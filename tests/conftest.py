"""Fixtures shared by every test package."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hermetic import Hermetic


def pytest_configure(config: pytest.Config) -> None:
    """The suite's own home, state and settings, and the tripwires (tests/hermetic.py)."""
    config.pluginmanager.register(Hermetic(config), "hermetic")
    config.addinivalue_line(
        "markers",
        "english: FLOWER_LANG=en for a test of what flower says in English (its refusals, "
        "help, live and end lines: issue 36 put them in the run's language)",
    )


# Tests that share what one process cannot have alone run in one xdist worker (`make test`
# runs --dist loadgroup): a module whose fixture is module-scoped (the gateway wall's
# containers, started once for its tests), and the compose tests (test_compose_run compares
# the engine's whole network list before and during its run). Everything else spreads test
# by test, the engine's tests too: each finds its containers by its own workspace or run
# label, builds under a tag of its own, and has its own suite home, socket root and e2e
# user home (tests/hermetic.py); flowerbox:dev is built once per run (tests/docker/conftest.py).
GROUPS = {
    "tests/docker/test_gateway_wall.py": "gateway-wall",
    "tests/docker/test_compose_": "compose",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not item.path.is_relative_to(config.rootpath):
            continue
        where = item.path.relative_to(config.rootpath).as_posix()
        for prefix, group in GROUPS.items():
            if where.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Iterator[None]:
    """The failed tests' ids last, one line each: in CI (no truncation) the short summary's
    FAILED line carries the whole assertion, and a long diff pushed the test's name out of
    the part of the log a reader gets to see."""
    yield  # pytest's own summary first, the short one included
    failed = [report.nodeid for report in terminalreporter.stats.get("failed", [])]
    for nodeid in failed:
        terminalreporter.write_line(f"failed: {nodeid}")


def hearing_ctrl_c() -> None:
    """A `preexec_fn` for a child a test sends Ctrl+C (SIGINT): SIGINT's default action
    restored. A shell starts a background job (`make check &`) with SIGINT ignored, and an
    ignored signal stays ignored through fork and exec, so the child would never hear it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty folder to run the CLI in (its realpath: the SDK keys sessions by it)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws.resolve()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def seeds_language(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeds' language, zh: most tests assert the seeds' texts (what the model is shown,
    the lines printed). A test marked `english` (what flower says in English: refusals, help,
    the end line; tests/cli/test_lang_cli.py reads the zh ones) gets en, before any fixture
    copies the environment. A test of another language sets FLOWER_LANG itself."""
    english = request.node.get_closest_marker("english") is not None
    monkeypatch.setenv("FLOWER_LANG", "en" if english else "zh")


@pytest.fixture(autouse=True)
def private_state(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """flowerbox's per-user state (XDG_STATE_HOME) in a folder of the test's own: no test
    reads or leaves records in the real one."""
    state = tmp_path_factory.mktemp("xdg-state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


def unprivileged(argv: list[str]) -> list[str]:
    """`argv` run so that file permissions apply to it: as root (these machines, CI), with
    every capability dropped (root then meets mode bits as their owner does); as anyone else,
    as it is."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to run a command as root without privilege"
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all", *argv]
