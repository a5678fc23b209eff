"""Without a child subreaper (gVisor's kernel), the reaper still finds what the CLI left
behind: an orphan re-parented to init is no descendant of it, but carries its tag.

The test process is no subreaper either, so the orphan below really leaves the tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flower.core.reaper import ENV_TAG, descendants, tagged

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _orphan(tag: str) -> int:
    """A `sleep` whose parent shell has exited: it belongs to init now, tagged `tag`."""
    out = subprocess.run(
        ["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"],
        env={**os.environ, ENV_TAG: tag},
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout)


def test_an_orphan_is_found_by_its_tag_and_killed() -> None:
    tag = f"test-{os.getpid()}-{time.monotonic_ns()}"
    other = _orphan(f"{tag}-other")  # another reaper's tree: left alone
    orphan = _orphan(tag)
    try:
        assert orphan not in descendants(os.getpid())  # out of the tree: the tag is the way
        assert tagged(tag) == [orphan]
        # kill_tree kills the caller's whole tree: it runs in a process of its own
        code = f"from flower.core.reaper import kill_tree; kill_tree({tag!r})"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
        deadline = time.monotonic() + 10
        while _alive(orphan) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(orphan)
        assert _alive(other)
    finally:
        for pid in (orphan, other):
            subprocess.run(["kill", "-9", str(pid)], check=False, capture_output=True)
