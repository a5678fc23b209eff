"""launch(): one flowerbox run, from the host's checks to the box's exit code.

The heart of flowerbox as a library function, under the typer-only CLI: `flowerbox "ask"`,
`resume`, `demo` and `shell` call it, and so can a user's own program. It prepares the box
(flowerbox.box.prepare), makes sure of the image, snapshots what the box may change
(flowerbox.runs.boundary.before_run), writes the gateway's credentials last, then either runs
the box on this terminal or hands it to a detached keeper (flowerbox.runs.detach). Once the box
is gone it runs the host's side of the trust boundary (after_run) and removes the private
folders.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import TextIO

from rich.console import Console

from flower import (
    FlowerError,
    PrintableStream,
    RunDir,
    check_traces,
    git_exclude,
    git_unexcluded,
    text,
    traces_wanted,
    workbench_location,
)
from flowerbox.box import startclock, state
from flowerbox.box.engine import Box, connect, ensure_image, image_id
from flowerbox.box.options import BoxOptions
from flowerbox.box.prepare import Prepared, nobody_answers, prepare
from flowerbox.box.source import RUNNING_CHECKOUT
from flowerbox.box.spec import BoxSpec
from flowerbox.box.terminal import docker_cli_attach
from flowerbox.box.untrusted import regular_file
from flowerbox.errors import ConfigError
from flowerbox.runs import records
from flowerbox.runs.boundary import after_run, before_run, report
from flowerbox.runs.brokered import leave_broker, through_broker
from flowerbox.runs.control import read_answers, status_text
from flowerbox.runs.detach import carried, start_detached
from flowerbox.runs.diskwatch import watch_disk
from flowerbox.runs.records import box_started, ensure_idle, record_start

STDERR = Console(stderr=True, highlight=False, soft_wrap=True)


def launch(
    command: list[str],
    options: BoxOptions,
    *,
    raw: list[str] | None = None,
    detach: bool = False,
    resume_of: BoxSpec | None = None,
) -> int:
    """Run `flower COMMAND...` in a box made as `options` say; flower's exit code.

    `raw` replaces the flower command inside the box (`flowerbox shell`); on a terminal it
    runs attached to it through the docker CLI. `detach`: start the run, print its id, and
    leave it to its keeper (0 once it is started). `resume_of`: the spec of the run this one
    continues, whose settings it keeps. Every run is recorded in its host-only state folder
    (flowerbox.runs.records).

    Raises:
        flowerbox.errors.FlowerboxError: what was refused before the box started (a
            workspace, the options, no credentials, no engine or image, a run already
            going in the workspace); the message says what to do.
    """
    startclock.mark("cli ready")
    if raw is None and traces_wanted():
        try:
            check_traces()  # the host exports the trace: its extra, before the box starts
        except FlowerError as exc:
            raise ConfigError(str(exc)) from exc
    prepared = prepare(command, options)
    startclock.mark("workspace checked")
    handed_over = False
    try:
        if os.getuid() == 0:
            STDERR.print(text("launch.root_warning"), style="yellow")
        if options.net == "open":
            STDERR.print(text("launch.net_open"), style="yellow")
        if raw is None and nobody_answers(command):
            STDERR.print(text("launch.nobody_answers"), style="yellow")
        if raw is None:
            ensure_idle(prepared.spec.workspace)  # one flower run at a time in its runs/
        client = connect()
        checkout = RUNNING_CHECKOUT
        ensure_image(client, options.image, context=checkout, base_image=options.base_image)
        startclock.mark("engine and image")
        spec = prepared.spec if raw is None else replace(prepared.spec, command=tuple(raw))
        spec = spec if resume_of is None else carried(spec, resume_of)
        resumed_from = None if resume_of is None else resume_of.run_id
        _tell_masked_env(spec.workspace)
        if raw is None and spec.git == "dir" and not RunDir(spec.run_dir).holds_a_run():
            _keep_runs_out_of_git(spec)
        spec = through_broker(before_run(spec, image_id=image_id(client, options.image)))
        startclock.mark("shadow git directory")
        prepared = Prepared(spec)
        prepared.write_secrets()  # last: every check has passed
        startclock.mark("credentials and secrets")
        if detach:
            run_id = start_detached(spec, client=client, command=command, resumed_from=resumed_from)
            handed_over = True  # the keeper cleans up when the run ends
            print(run_id)
            STDERR.print(text("launch.detached", run_id=run_id))
            return 0
        box = Box(spec, client=client, on_started=lambda facts: box_started(spec, facts))
        record_start(spec, command=command, detached=False, resumed_from=resumed_from)
        return _attached(spec, box, raw)
    finally:
        if not handed_over:
            leave_broker(prepared.spec)
            prepared.cleanup()


def _attached(spec: BoxSpec, box: Box, raw: list[str] | None) -> int:
    """The box on this terminal: stopped gracefully on a signal or past the disk budget, and
    the host's side of the boundary run once it is gone, whatever its end. On a terminal,
    flower's questions are answered by typing (flower inside has no terminal: the lines go
    through the run's inbox, as `flowerbox answer` sends them)."""
    code = 2
    typed = threading.Event()
    try:
        if raw is not None and sys.stdin.isatty() and sys.stdout.isatty():
            code = box.run_attached(docker_cli_attach)
            return code
        if raw is None and sys.stdin.isatty() and (run := records.load(spec.state_dir)):
            STDERR.print(text("launch.typed_answers"), style="dim")
            threading.Thread(target=read_answers, args=(run, typed), daemon=True).start()

        def stop(signum: int, frame: FrameType | None) -> None:
            box.stop()

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, stop)
        with watch_disk(spec, box.stop, held=box.pids):
            code = box.run(write=_write(sys.stdout), write_err=_write(sys.stderr))
        return code
    finally:
        typed.set()
        report(after_run(spec, code))
        if raw is None and (run := records.load(spec.state_dir)) is not None:
            _outcome(run)


def _outcome(run: records.Run) -> None:
    """The last line, as `flowerbox attach` ends: how the run ended and what the gateway
    metered, so a CI log (with --json too) ends with the outcome."""
    cost = run.cost_usd()
    spent = "" if cost is None else f" · ${cost:.4f}"
    STDERR.print(f"{run.run_id}: {status_text(run)}{spent}", style="bold", markup=False)


def _tell_masked_env(workspace: Path) -> None:
    """Once per workspace: its .env is hidden from the box (and never read by flowerbox)."""
    if regular_file(workspace, ".env"):
        state.tell_once(
            f"masked-env {workspace}",
            lambda: STDERR.print(
                text("launch.masked_env", path=workspace / ".env"), style="yellow"
            ),
        )


def _keep_runs_out_of_git(spec: BoxSpec) -> None:
    """A workspace's first run: the folders flowerbox and flower keep in it (runs/, and
    .flower/ without isolation) out of `git status`, in the user's own clone and before the
    box's gitdir is copied from it. Done and said, never asked: flower in the box would
    find them unexcluded and write its own line where it never comes back."""
    folders = [spec.run_dir]
    if spec.workbench is None and spec.command[1:2] == ("go",):
        folders.append(workbench_location(spec.workspace))
    missing = git_unexcluded(spec.workspace, folders)
    if not missing:
        return
    shown = text("launch.and").join(missing)
    path = git_exclude(spec.workspace, missing)
    STDERR.print(text("launch.excluded", shown=shown, path=path))


def _write(stream: TextIO) -> Callable[[bytes], None]:
    """The box's output onto our stream, without terminal control sequences: what the agent
    prints never retitles, clears or links the user's terminal."""
    cleaner = PrintableStream()

    def write(chunk: bytes) -> None:
        stream.buffer.write(cleaner.feed(chunk))
        stream.buffer.flush()

    return write
