"""Starting a run that outlives the command that started it, and resuming a run.

    run_id = start_detached(spec, client=client, command=["go", "ask"])

starts the gateway and the agent, hands them to a supervisor (`python -m flowerbox.runs.supervise`,
in a session of its own, its output in the run's supervisor.log) and returns. If anything
fails before the supervisor has them, both containers are removed here and the error raised.

A resumed run is a new box (a new run id) for the same workspace, with the old run's settings:
flower itself resumes (lineage.json points each step at its session). `flower go` is given an
empty ask when its brief is complete, which wakes the run instead of amending the brief, and
its ask again when it was stopped before that.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
from typing import IO, TYPE_CHECKING

from flower import text
from flowerbox import wire
from flowerbox.errors import BoxError, RunError
from flowerbox.runs import records

if TYPE_CHECKING:
    from docker import DockerClient

    from flowerbox.box.spec import BoxSpec

# What each box gets afresh; every other field of a resumed run's spec is carried over
# (from flowerbox's host-only record: nothing the box wrote shapes the next box).
FRESH_FIELDS = frozenset(
    {
        "run_id",
        "socket_dir",
        "broker",
        "run_token",
        "secrets_dir",
        "state_dir",
        "command",
        "uid",
        "gid",
        "upstream_on_loopback",
        "shadow_git",
        "git_objects",
        "git_alternates",
    }
)
# The supervisor's whole environment: what finds Docker, git's and flowerbox's own folders,
# and the locale and language. Nothing else is inherited (no PYTHONPATH-like variable reaches it).
SUPERVISOR_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "FLOWER_LANG",  # flower.LANG_ENV: what the supervisor says (a refusal, a failed delivery)
    "TZ",
    "XDG_STATE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_RUNTIME_DIR",
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    "DOCKER_CONTEXT",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
)


def start_detached(
    spec: BoxSpec,
    *,
    client: DockerClient,
    command: list[str],
    resumed_from: str | None = None,
) -> str:
    """Start the run in the background; its id. Raises BoxError (nothing left running)."""
    # lazy: the engine's module (the caller, holding a client, has loaded the docker SDK);
    # what else this module gives, a resumed run's budget and command, needs no engine
    from flowerbox.box.engine import Box
    from flowerbox.box.engineapi import EngineAPI

    EngineAPI.from_env()  # the keeper's way to the engine: refused now, not once it runs
    records.record_start(spec, command=command, detached=True, resumed_from=resumed_from)
    box = Box(spec, client=client, on_started=lambda facts: records.box_started(spec, facts))
    try:
        box.start()
        keeper = _spawn_supervisor(spec, lease=box.lease)
    except BaseException:
        box.remove()
        records.record_end(spec, 2)
        raise
    box.release_lease()  # the keeper holds it now: the gateway's forwards end with the keeper
    records.mark_running(spec.state_dir, keeper_pid=keeper)
    return spec.run_id


# The guard waits for its stdin's end in the shell, then becomes the Python that acts
# (`exec`: the same process, its signals still ignored): one waits per detached run for as long
# as the run, and the shell holds about 1 MiB where an idle Python holds 9 (issue 31 item 4).
# Python's start is paid after the keeper's end, before the kill (about 30 ms of CPU).
WAIT_FOR_EOF = (
    "/bin/sh",
    "-c",
    'trap "" INT HUP; while read -r line; do :; done; exec "$@"',
    "flowerbox-guard",
)


def _spawn_supervisor(spec: BoxSpec, *, lease: socket.socket | None = None) -> int:
    """The keeper and its guard (flowerbox.runs.guard), each in a session of its own: the
    guard's stdin is a pipe whose one write end the keeper inherits (and never uses), so the
    guard hears the keeper's end however it comes. The keeper inherits the gateway's `lease`
    too (flowerbox.sidecar.lease; never used either): the moment the keeper dies, however, the
    gateway forwards nothing more, before the guard has even heard. The keeper's pid."""
    log = spec.state_dir / records.SUPERVISOR_LOG
    read_end, write_end = os.pipe()
    held = (write_end,) if lease is None else (write_end, lease.fileno())
    try:
        with log.open("ab") as out:
            _spawn(wire.GUARD_MODULE, spec, out=out, stdin=read_end, keep=(), wait_first=True)
            return _spawn(wire.SUPERVISOR_MODULE, spec, out=out, stdin=None, keep=held)
    except OSError as exc:
        raise BoxError(text("runs.no_supervisor", problem=exc, log=log)) from exc
    finally:
        os.close(read_end)
        os.close(write_end)


def _spawn(
    module: str,
    spec: BoxSpec,
    *,
    out: IO[bytes],
    stdin: int | None,
    keep: tuple[int, ...],
    wait_first: bool = False,
) -> int:
    # Isolated Python (-I: no PYTHONPATH, no user site, not the cwd on sys.path), started in
    # the run's host-only folder with a clean environment; it needs no credentials.
    # OTEL_*: the keeper sends the run's trace when it ends (flowerbox.runs.trace).
    env = {k: v for k, v in os.environ.items() if k in SUPERVISOR_ENV or k.startswith("OTEL_")}
    argv = [sys.executable, "-I", "-m", module, str(spec.state_dir)]
    process = subprocess.Popen(
        [*WAIT_FOR_EOF, *argv] if wait_first else argv,
        stdin=subprocess.DEVNULL if stdin is None else stdin,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        close_fds=True,
        pass_fds=keep,
        cwd=spec.state_dir,
        env=env,
    )
    return process.pid


def resume_command(command: list[str]) -> list[str]:
    """The flowerbox command that continues a run, never with `--new` (which would archive
    what it is to continue). `go` gets `--continue`: flower, inside the box, wakes the run
    when its brief is complete, and starts with the ask when it was stopped before that (the
    host never reads the box-written brief to decide)."""
    if command[:1] != ["go"] or len(command) < 2:
        return list(command)
    return [
        "go",
        command[1],
        "--continue",
        *(a for a in command[2:] if a not in ("--new", "--continue")),
    ]


def remaining_budget(run: records.Run, override: float | None) -> float | None:
    """The budget a resumed run gets: `override` if given, else what the run had left (its
    gateway's meter starts at zero in each box, so a resume must not start it afresh).

    Raises:
        RunError: the budget is spent, saying how to give the run more.
    """
    if override is not None:
        return override
    budget = run.spec().budget_usd
    if budget is None:
        return None
    left = round(budget - (run.cost_usd() or 0.0), 6)
    if left <= 0:
        raise RunError(text("runs.budget_spent", run=run.run_id, budget=f"{budget:g}"))
    return left


def carried(fresh: BoxSpec, old: BoxSpec) -> BoxSpec:
    """`fresh` (just prepared) with every setting of `old` except what each box gets anew."""
    keep = {
        f.name: getattr(old, f.name) for f in dataclasses.fields(old) if f.name not in FRESH_FIELDS
    }
    return dataclasses.replace(fresh, **keep)
