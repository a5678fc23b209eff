"""Every benchmark's command line (bench/_args.py): `--help` says what it runs and exits,
an unknown option is refused. Both once ran the whole benchmark instead (minutes; for
bench.many 25 real runs on a shared machine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import names

REPO = Path(__file__).resolve().parents[1]
MODULES = ["bench", *(f"bench.{name}" for name in names())]


def run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("module", MODULES)
def test_help_describes_the_benchmark_and_runs_nothing(module: str) -> None:
    done = run(module, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"usage: python -m {module} [-h] [--smoke]"), done.stdout
    assert "--smoke" in done.stdout and "target" not in done.stdout.split("options:")[-1]


@pytest.mark.parametrize("module", MODULES)
def test_an_unknown_option_is_refused(module: str) -> None:
    done = run(module, "--sizes-typo", "3")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "unrecognized arguments: --sizes-typo 3" in done.stderr
