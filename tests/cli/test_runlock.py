"""The run lock's holder record can be written by a box (flowerbox mounts runs/): what a
refused run prints of it reaches the user's terminal clean."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flower.testing import FakeAPI
from tests.cli.conftest import flower

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, sys.argv[2].encode())
print("held", flush=True)
time.sleep(60)
"""


@pytest.mark.english
def test_a_planted_holder_record_is_printed_without_terminal_controls(
    fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    planted = {"pid": "\x1b]0;pwned\x07 7", "host": "\x1b[2Jbox", "command": ["\x1b[31mred"]}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(runs / "run.lock"), json.dumps(planted)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        refused = flower("once", "x", "--run-dir", str(runs), env=cli_env, cwd=tmp_path)
    finally:
        holder.kill()
        holder.communicate()
    assert refused.returncode == 2, refused.stderr
    assert "another flower run is going in" in refused.stderr
    assert "\x1b" not in refused.stderr and "\x07" not in refused.stderr
    assert "pid ]0;pwned 7 on [2Jbox" in refused.stderr.replace("\n", " ")
