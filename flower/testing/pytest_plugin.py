"""pytest fixtures for the scripted fake Messages API (loaded through the pytest11 entry point).

    def test_writes(fake_api, claude_env, tmp_path):     # the CLI driven directly
        fake_api.script = sequence(tool("Write", {...}), text("done"))
        ... ClaudeAgentOptions(cwd=tmp_path, env=claude_env) ...

    def test_step(flower_env, workspace):               # flower's Runtime
        flower_env.script = sequence(text("done"))
        rt = Runtime(workspace=workspace, run_dir=workspace / "runs")

`fake_api` fails the test at teardown if its script raised during a request (the CLI only saw
a 400), so a broken script cannot pass silently.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.testing.server import FakeAPI

# Credentials and endpoints from the developer's shell must not leak into an offline test.
# FLOWER_LANG stays: it is no credential, and a test (or its conftest) may pin the language.
_LEAKY_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "FLOWER_")
_KEPT = frozenset({"FLOWER_LANG"})


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAPI]:
    """A started FakeAPI with no script yet; set `fake_api.script` in the test."""
    for name in list(os.environ):
        if name.startswith(_LEAKY_PREFIXES) and name not in _KEPT:
            monkeypatch.delenv(name)
    api = FakeAPI().start()
    try:
        yield api
    finally:
        api.stop()
    if api.errors:
        pytest.fail("fake API script errors:\n" + "\n".join(api.errors), pytrace=False)


@pytest.fixture
def claude_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty HOME for the CLI, so nothing of the real ~/.claude is read or written."""
    return tmp_path_factory.mktemp("home")


@pytest.fixture
def claude_env(fake_api: FakeAPI, claude_home: Path) -> dict[str, str]:
    """The CLI's environment: the fake API, a placeholder key, a scratch HOME, no retries."""
    return fake_api.env(home=claude_home)


@pytest.fixture
def flower_env(
    fake_api: FakeAPI, claude_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> FakeAPI:
    """The process environment pointed at the fake API, for code that runs flower's Runtime.

    Runtime reads its credentials from the environment (and .env files) like the real thing;
    this sets them, gives HOME and XDG_CONFIG_HOME a scratch folder so no real ~/.config or
    ~/.claude is read, and runs the test from tmp_path so no project .env is picked up.
    """
    for name, value in fake_api.env(home=claude_home).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(claude_home / ".config"))
    monkeypatch.chdir(tmp_path)
    return fake_api
