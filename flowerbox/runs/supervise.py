"""The keeper of a detached run: `python -I -m flowerbox.runs.supervise STATE_DIR`, on the host.

`flowerbox "ask" --detach` starts the gateway and the agent, then this process in a session of
its own (no terminal, so no hang-up reaches it) and returns. It waits on the agent's container,
copying its output to output.log (capped: flowerbox.runs.outputlog), and when the agent ends
it does what the attached path does in `flowerbox.runs.launch`: remove both containers (so the
gateway lives exactly as long as its run), call `flowerbox.runs.boundary.after_run`, and
remove the run's private folders (sockets, credentials, the box's own area).

SIGTERM to this process stops the agent gracefully first (as `flowerbox stop` does).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import traceback
from pathlib import Path
from types import FrameType

from flowerbox.box.running import Running
from flowerbox.errors import BoxError
from flowerbox.runs import records
from flowerbox.runs.diskwatch import watch_disk
from flowerbox.runs.outputlog import CappedLog


def supervise(state_dir: Path) -> int:
    """Keep the run recorded in `state_dir` until its agent ends; returns the agent's exit
    code (or 2)."""
    run = records.load(state_dir)
    if run is None:
        print(f"flowerbox.runs.supervise: no run recorded in {state_dir}", file=sys.stderr)
        return 2
    spec = run.spec()
    code: int | None = None
    box: Running | None = None
    try:
        box = Running.existing(spec)
        stopping = box

        def stop(signum: int, frame: FrameType | None) -> None:
            stopping.stop()

        signal.signal(signal.SIGTERM, stop)
        with (
            CappedLog(state_dir / records.OUTPUT) as output,
            watch_disk(spec, box.stop, held=box.pids),
        ):
            code = box.wait(output.write)
    except BoxError:
        traceback.print_exc()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if box is not None:
            box.remove()
        # lazy: a keeper waits for its whole run, one per detached run (a hundred on a team's
        # machine): what only the end needs (the boundary's checks, the broker's client, the
        # private folders' cleanup: 5 MiB of modules) is loaded when the run has ended
        from flowerbox.box.prepare import Prepared
        from flowerbox.runs import boundary
        from flowerbox.runs.brokered import leave_broker

        boundary.report(boundary.after_run(spec, code))  # before cleanup: it reads the shadow
        leave_broker(spec)
        Prepared(spec).cleanup()
    print(f"flowerbox.runs.supervise: {spec.run_id} ended with {code}", file=sys.stderr)
    return 2 if code is None else code


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -I -m flowerbox.runs.supervise STATE_DIR", file=sys.stderr)
        return 2
    # Started in a session of its own already; a stray Ctrl+C or hang-up must not end it.
    for sig in (signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(ValueError):
            signal.signal(sig, signal.SIG_IGN)
    return supervise(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
