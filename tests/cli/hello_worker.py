"""The scripted worker of the cut-worker tests (tests/cli/test_cut_worker.py, a SIGKILL;
test_handoff_cut_worker.py, a handoff): it writes hello.py, runs it and, when it is the one
to be cut, starts a slow Bash that records its pid; a worker shown the cut one's progress
reads the disk and reports instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from claude_agent_sdk import project_key_for_directory

from flower.core.reaper import RESUME_PREFIX
from flower.core.texts.en import EN
from flower.core.texts.zh import ZH
from flower.testing import Reply, Request, text, tool, working_directory

SLOW = "echo $$ > {pidfile}; exec sleep 120"
MAY_HAVE_RUN = tuple(table["cut.open"].split("{call}", 1)[1] for table in (EN, ZH))
"""How the call in flight is flagged to the next worker (en, zh)."""


def hello_worker(
    workers: list[str], *, handed_on: Callable[[Request], bool], slow: Callable[[], Path | None]
) -> Callable[[Request], Reply]:
    """The worker's script; `workers` collects the agent ids in order of appearance. A
    request `handed_on` says was shown progress checks the disk and reports; otherwise the
    next of Write hello.py, run it, and (where `slow()` gives a pid file) the slow call."""

    def worker(request: Request) -> Reply:
        agent = str(request.agent_id)
        if agent not in workers:
            workers.append(agent)
        where = working_directory(request)
        if handed_on(request):  # look at the disk, then report
            if not request.tool_results():
                return tool("Read", {"file_path": f"{where}/hello.py"}, id=f"check_{agent}")
            return text("hello.py is there and prints hello; nothing left to do")
        done = {r.tool_use_id for r in request.tool_results()}
        calls = [
            tool(
                "Write",
                {"file_path": f"{where}/hello.py", "content": 'print("hello")\n'},
                id=f"write_{agent}",
            ),
            tool("Bash", {"command": "python3 hello.py"}, id=f"run_{agent}"),
        ]
        if (pidfile := slow()) is not None:
            calls.append(
                tool("Bash", {"command": SLOW.format(pidfile=pidfile)}, id=f"slow_{agent}")
            )
        return next((c for c in calls if c.tool_ids[0] not in done), text("done"))

    return worker


def recorded(workspace: Path, home: Path, agent: str, call_id: str) -> bool:
    """The CLI has written the call `call_id` of worker `agent` to the worker's transcript
    file (in its config folder under `home`, or in a resumed session's temp folder), where a
    kill finds it. The CLI writes its transcript in batches, up to 100 ms after the entry:
    a call whose process already runs (the slow call's pid file is there) may not be on
    record yet, and a kill then leaves no trace of it anywhere."""
    key = project_key_for_directory(workspace)
    configs = [home / ".claude", *Path(tempfile.gettempdir()).glob(f"{RESUME_PREFIX}*")]
    for config in configs:
        with contextlib.suppress(OSError):  # another user's temp folder (0700), or gone
            for path in (config / "projects" / key).glob(f"*/subagents/agent-{agent}.jsonl"):
                if call_id in path.read_text(encoding="utf-8", errors="replace"):
                    return True
    return False


@contextlib.contextmanager
def sleeper_killed(pidfile: Path) -> Iterator[None]:
    """The slow call's process SIGKILLed at the end, whatever happened (it runs in a session
    of its own, so killing flower's process group leaves it)."""
    try:
        yield
    finally:
        if pidfile.is_file() and (sleeper := pidfile.read_text().strip()).isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(sleeper), signal.SIGKILL)
