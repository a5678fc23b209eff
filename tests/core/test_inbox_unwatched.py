"""The inbox when no watch can be had: a box's flower is answered only through its inbox
(`flowerbox answer` on the host), so a run whose user has used up its inotify instances
(fs.inotify.max_user_instances, 128 by default: about 60 boxes, issue 31's hundred runs) must
still take an answer. Run in a user namespace of its own whose inotify instances are 0."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = """
import asyncio, sys
from pathlib import Path
from flower.core.inbox import Mailbox, drop_answer

async def main() -> None:
    run = Path(sys.argv[1])
    got = []
    box = Mailbox(run, on_answer=lambda a, t: got.append((a, t)) or True, on_message=print)
    box.start()
    await asyncio.sleep(0.5)  # its watch has been tried
    drop_answer(run, "q1", "from afar")
    for _ in range(100):
        if got:
            break
        await asyncio.sleep(0.05)
    await box.aclose()
    print(got)

asyncio.run(main())
"""
NO_INOTIFY = 'echo 0 > /proc/sys/user/max_inotify_instances && exec "$@"'


def no_inotify(args: list[str]) -> list[str]:
    """`args` in a user namespace where no inotify instance can be made."""
    return ["unshare", "--user", "--map-root-user", "sh", "-c", NO_INOTIFY, "sh", *args]


@pytest.fixture(scope="module")
def namespaces() -> None:
    can = shutil.which("unshare") and subprocess.run(no_inotify(["true"])).returncode == 0
    if not can:
        pytest.skip("no user namespace with its own inotify limit here (unshare --user)")


def test_an_answer_is_taken_when_the_inbox_cannot_be_watched(
    namespaces: None, tmp_path: Path
) -> None:
    done = subprocess.run(
        no_inotify([sys.executable, "-c", CHILD, str(tmp_path / "run")]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "reading the inbox every" in done.stderr  # the watch really failed
    assert done.stdout.strip() == "[('q1', 'from afar')]", done.stderr[-2000:]
    assert not list((tmp_path / "run" / "inbox").glob("*.json"))  # taken, not left behind
