"""flowerbox's host commands never import the SDK (issue 31): the box runs it, the host does
not, and its import (most of it `mcp`'s types) cost every `flowerbox ps` most of a second.

Read from `python -X importtime`, which lists every module a process really imported: the
lazy names of `flower` and the imports inside functions, which import-linter cannot see,
are counted too. bench.cli measures what it is worth.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("claude_agent_sdk", "mcp")


def imported(args: list[str], cwd: Path) -> set[str]:
    """The top-level packages `python ARGS` imported; it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert lines, "python -X importtime printed nothing"
    return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in lines}


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["ps"], ["version"]])
def test_a_host_command_imports_neither_the_sdk_nor_mcp(args: list[str], tmp_path: Path) -> None:
    modules = imported(["-m", "flowerbox", *args], tmp_path)
    assert "flowerbox" in modules  # the reading works: it saw the command's own package
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


def test_the_reading_sees_the_sdk_where_it_is_imported(tmp_path: Path) -> None:
    """The negative control: flower's runtime does import it, and the reading says so."""
    assert set(HEAVY) <= imported(["-c", "import flower.core.runtime"], tmp_path)


def test_a_waiting_keeper_holds_no_module_only_the_end_of_its_run_needs(tmp_path: Path) -> None:
    """A detached run's keeper lives as long as its run, one per run (issue 31: a hundred runs
    on one machine, bench.many): the boundary's checks, the broker's servers and the private
    folders' cleanup are imported when the run has ended, not while it waits."""
    code = (
        "import sys, flowerbox.runs.supervise;"
        " print(' '.join(sorted(m for m in sys.modules if m.startswith('flowerbox'))))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(done.stdout.split())
    assert "flowerbox.box.engine" in loaded  # what it waits with is there: the reading works
    late = {"flowerbox.runs.boundary", "flowerbox.broker.server", "flowerbox.box.prepare"}
    assert not loaded & late, sorted(loaded & late)
