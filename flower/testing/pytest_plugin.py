"""pytest fixtures for the scripted fake Messages API (loaded through the pytest11 entry point).

    def test_writes(fake_api, claude_env, tmp_path):
        fake_api.script = sequence(tool("Write", {...}), text("done"))
        ... ClaudeAgentOptions(cwd=tmp_path, env=claude_env) ...

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
_LEAKY_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "FLOWER_")


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAPI]:
    """A started FakeAPI with no script yet; set `fake_api.script` in the test."""
    for name in list(os.environ):
        if name.startswith(_LEAKY_PREFIXES):
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
