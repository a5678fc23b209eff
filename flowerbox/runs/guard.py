"""The guard of a detached run's keeper: `python -I -m flowerbox.runs.guard STATE_DIR`, on the host.

A detached run's box must not outlive its keeper (flowerbox.runs.supervise): without it nobody
watches the run's disk budget, copies its output or records its end, and a box left running
keeps calling the API while the user's `flowerbox resume` starts a second box on the same
workspace. So `flowerbox "ask" --detach` starts this process too, in a session of its own, its
stdin the read end of a pipe whose only write end the supervisor holds. The pipe closes when
the supervisor exits, however it exits (a SIGKILL, the OOM killer). Until then a shell waits
for it (flowerbox.runs.detach.WAIT_FOR_EOF: 1 MiB, where an idle Python holds 9) and then
becomes this Python, in the same process. The guard then looks at
the run's record: an end recorded means the supervisor finished its work; a run still live
means its keeper died, and the guard kills the box at once (both containers together, by
name: the gateway's kill ends what reaches the API), records when, and does the rest of the
keeper's work (control.reap's: remove both containers, after_run, the private folders). The
run then reads as `killed` (137), and `flowerbox resume` continues it as after any kill
(docs/detached.md).

Killed rather than stopped (SIGTERM, flower's graceful path, ~5 s): the box would run
unwatched meanwhile, and flower continues a SIGKILLed run from its store anyway
(docs/fault-behaviour.md). A guard killed as well (a reboot takes the containers too) leaves
the run `lost`, reaped by `flowerbox stop` or `resume` as before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flowerbox.runs import records

SETTLE_S = 10.0


def guard(state_dir: Path, watched: int) -> int:
    """Wait until fd `watched` (the keeper's pipe) closes; then, when the run is still
    recorded live, kill its box and finish the keeper's work. 0, or 2 with no run record."""
    while os.read(watched, 4096):
        pass  # the keeper writes nothing; the pipe closing is the news
    # lazy: a guard waits for the whole run, one per detached run (in a shell, started
    # detached: then this read ends at once); its kill speaks to the engine with the standard
    # library (flowerbox.box.engineapi: no client to connect beforehand)
    from flowerbox.box.prepare import Prepared
    from flowerbox.box.running import kill_now
    from flowerbox.runs import records

    run = _settled(state_dir)
    if run is None:
        print(f"flowerbox.runs.guard: no run recorded in {state_dir}", file=sys.stderr)
        return 2
    if run.meta.get("status") not in records.LIVE:
        Prepared(run.spec()).cleanup()  # the keeper ended it; it may have died after that
        return 0
    with records.reaping(state_dir):
        run = records.load(state_dir)
        if run is None or run.meta.get("status") not in records.LIVE:
            return 0  # reaped meanwhile (`flowerbox stop`, `resume`)
        if run.meta.get("status") == records.STARTING and run.running:
            return 0  # the starting CLI still keeps it (and removes the box if it fails)
        # Not `run.unkept`: the pipe closes while the keeper is still exiting, before it is
        # even a zombie, so it may look alive yet; the pipe closing is the proof it is not.
        kill_now(run.spec())  # first: every moment the box runs unwatched counts
        records.mark_running(state_dir, keeper_pid=os.getpid(), guard=True)  # not `lost`
        records.record(run.spec(), keeper_lost=time.time())
        print(f"flowerbox.runs.guard: {run.run_id} lost its keeper; its box was killed")
        # lazy: the keeper's own code, loaded only when the guard has its work to finish
        from flowerbox.runs.supervise import supervise

        supervise(state_dir)
    return 0


def _settled(state_dir: Path) -> records.Run | None:
    """The run's record once it is past `starting` (the starting CLI marks the keeper
    running just after spawning it), or as it is after SETTLE_S."""
    # lazy: as in guard(), loaded once the keeper is gone
    from flowerbox.runs import records

    deadline = time.monotonic() + SETTLE_S
    run = records.load(state_dir)
    while run is not None and run.meta.get("status") == records.STARTING:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
        run = records.load(state_dir)
    return run


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -I -m flowerbox.runs.guard STATE_DIR", file=sys.stderr)
        return 2
    for sig in (signal.SIGINT, signal.SIGHUP):  # as the supervisor: no stray signal ends it
        with contextlib.suppress(ValueError):
            signal.signal(sig, signal.SIG_IGN)
    return guard(Path(args[0]), sys.stdin.fileno())


if __name__ == "__main__":
    sys.exit(main())
