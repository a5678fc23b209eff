"""Run the flower CLI as a user does: a subprocess, pointed at the fake API."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flower.testing import FakeAPI

FLOWER = [sys.executable, "-m", "flower.cli"]


def offline_env(api: FakeAPI, home: Path) -> dict[str, str]:
    """This process's environment minus any real credential, plus the fake API."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    return {**base, **api.env(home=home), "XDG_CONFIG_HOME": str(home / ".config")}


@pytest.fixture
def cli_env(fake_api: FakeAPI, claude_home: Path) -> dict[str, str]:
    return offline_env(fake_api, claude_home)


def flower(
    *args: str, env: dict[str, str], cwd: Path, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOWER, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
