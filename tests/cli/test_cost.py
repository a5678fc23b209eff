"""Cost, exact everywhere (issue 20, item 1): a judged job with a resumed round, a Ctrl+C
interrupt, a SIGTERM and a wake. Every figure flower shows (the live line, the end line,
the JSON summary, the manifest, `status`, `analyze`) must come to what the fake API's own
answers cost, priced from the usage each one reported."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from flower.testing import FakeAPI, Usage, text, tool
from tests.cli.conftest import FLOWER, flower

SLOW = "python3 -c 'import time; time.sleep(60)'"
# Answers with real weight: thousands of output tokens (what a stream's start undercounts)
# and cached input (priced apart), so a figure that misses either is off by cents.
WEIGHT = Usage(output_tokens=3000, cache_read_input_tokens=40_000)
FIGURE = re.compile(r"\$(\d+\.\d{4})")


def test_status_counts_what_the_running_step_has_spent(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path
) -> None:
    """Mid-step, before the CLI has costed the turn: `status` shows what was spent so far,
    each finished response at its full output count."""
    slow = "python3 -c 'import time; time.sleep(8)'"
    fake_api.script = lambda request: replace(
        text("slept") if request.tool_results() else tool("Bash", {"command": slow}),
        usage=WEIGHT,
    )
    runs = workspace.parent / "runs"
    run = subprocess.Popen(
        [*FLOWER, "once", "sleep a while", "-w", str(workspace), "--run-dir", str(runs)],
        env=cli_env,
        cwd=workspace.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert fake_api.wait_for(lambda requests: len(requests) == 1, 60)
        time.sleep(2.0)  # the command runs; the turn has no result yet
        status = flower("status", str(runs), "--json", env=cli_env, cwd=workspace.parent)
        during = fake_api.cost()
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    data = json.loads(status.stdout)
    [row] = data["steps"]
    assert row["state"] == "running"
    assert data["total_cost_usd"] == pytest.approx(during, abs=1e-6) and during > 0.05
    assert run.returncode == 0, err
    assert float(FIGURE.findall(out)[-1]) == pytest.approx(fake_api.cost(), abs=5e-5)
