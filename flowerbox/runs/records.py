"""The host's record of box runs: what ran, where, in which state. No docker here.

Every box run (attached or detached) has a host-only folder, BoxSpec.state_dir
(flowerbox.box.state: `$XDG_STATE_HOME/flowerbox/runs/<run_id>/`, which no box mounts):

    meta.json          run id, command, workspace, containers, status, started/ended, exit
                       code, cost, the BoxSpec; atomic JSON (statefile). `resume` rebuilds a
                       box from this alone.
    output.log         the agent's stdout and stderr (detached; the previous 16 MiB in
                       output.log.1: flowerbox.runs.outputlog)
    supervisor.log     the detached supervisor's own lines, and its guard's
    reap.lock          held by whoever finishes a lost keeper's work (reaping)
    agent.stderr.log, gateway.stderr.log
                       each container's stderr, kept by the host as it removes the container
                       (flowerbox.box.engine; its last 4 MiB)
    gateway/           the gateway's usage ledger, its request log (one JSON line per API
                       request) and egress log (mounted into it alone)

flower's Events are the one record written inside the box (`--events`, into the workspace's
runs/events/<run_id>.jsonl): the host reads them, and the questions in runs/asks.json, only
through flowerbox.box.untrusted, as hostile input.

A meta file says `running` while its *keeper* (the attached flowerbox process, or the detached
supervisor; once that dies, its guard) lives; a running run whose keeper is gone reads as
`lost`.

Errors:
    RunError                no runs, an unknown or ambiguous id, a run in the wrong state;
                            the message says what to do
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from flower import (
    RunDir,
    StateFileError,
    parse_json,
    printable_data,
    read_json,
    text,
    update_json,
)
from flowerbox.box import startclock, state
from flowerbox.box.untrusted import read_json as read_untrusted_json
from flowerbox.errors import RunError

if TYPE_CHECKING:
    from flowerbox.box.spec import BoxSpec

META = "meta.json"
MAX_RESUMES = 100  # how far back a run's resumed_from is followed
OUTPUT = "output.log"
SUPERVISOR_LOG = "supervisor.log"
REAP_LOCK = "reap.lock"
MAX_ASKS_BYTES = 256 * 1024
REQUESTS_READ = 16 * 1024 * 1024  # the end of a run's request log that `logs --requests` reads

STARTING, RUNNING, LOST = "starting", "running", "lost"
LIVE = (STARTING, RUNNING)
# The word ps shows for an ended run, by exit code (flower's codes, and docker's kill).
T = TypeVar("T")
ENDED_AS = {0: "done", 1: "failed", 2: "error", 3: "needs_human", 130: "stopped", 137: "killed"}


@dataclass(frozen=True)
class Run:
    """One run's folder and its meta as last written."""

    state_dir: Path
    meta: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.meta["run_id"])

    @property
    def run_dir(self) -> Path:
        """flower's run dir (the workspace's runs/): sessions, asks.json, inbox/."""
        return Path(self.meta["run_dir"])

    @property
    def status(self) -> str:
        status = str(self.meta.get("status", LOST))
        if status in LIVE and not _alive(self.meta.get("keeper_pid"), self.meta.get("host")):
            return LOST
        return status

    @property
    def running(self) -> bool:
        return self.status in LIVE

    @property
    def unkept(self) -> bool:
        """Recorded as live, but its keeper is gone: its containers may still run, and
        nobody will clean up or record the end until `flowerbox stop` does (control.reap)."""
        return self.meta.get("status") in LIVE and not self.running

    @property
    def exit_code(self) -> int | None:
        code = self.meta.get("exit_code")
        return None if code is None else int(code)

    def spec(self) -> BoxSpec:
        return spec_from_json(self.meta["spec"])

    @property
    def workspace(self) -> Path:
        return Path(self.meta["workspace"])

    def cost_usd(self) -> float | None:
        """What the gateway metered: recorded at the end, read live while running."""
        if "cost_usd" in self.meta:
            return _float(self.meta["cost_usd"])
        if self.running:
            return _float(usage(self.spec()).get("total_cost_usd"))
        return None

    def pending_asks(self) -> list[dict[str, Any]]:
        """The questions this run waits on (asks.json, box-written: read without following
        links, bounded, each a dict with a string id, every string cleaned of terminal
        controls); none once it has ended. A question asked before this run's box started
        is not one: a killed box left it there, and its continuation has not asked it again
        yet (flower.core.askagain), so an answer to it would be refused."""
        if not self.running:
            return []
        relative = RunDir(self.run_dir).asks.relative_to(self.workspace)
        asks = pending_of(read_untrusted_json(self.workspace, relative, [], limit=MAX_ASKS_BYTES))
        started = moment(self, "started")
        return [ask for ask in asks if started is None or not _asked_before(ask, started)]


def pending_of(asks: Any) -> list[dict[str, Any]]:
    """The questions in a box-written asks.json's parsed value: each a dict with a string id,
    every string cleaned of terminal controls; anything else is none."""
    if not isinstance(asks, list):
        return []
    return [
        printable_data(ask)
        for ask in asks
        if isinstance(ask, dict) and isinstance(ask.get("id"), str)
    ]


# --- writing ------------------------------------------------------------------------------


def record_start(
    spec: BoxSpec,
    *,
    command: list[str],
    detached: bool,
    resumed_from: str | None = None,
) -> Run:
    """Create the run's folder and meta, kept by this process: `running` for an attached run
    (this process keeps it to the end), `starting` for a detached one until its supervisor
    holds it (mark_running)."""
    from flowerbox.box.spec import agent_kwargs, gateway_kwargs  # lazy: as in spec_from_json

    meta = {
        "run_id": spec.run_id,
        "command": command,
        "workspace": str(spec.workspace),
        "run_dir": str(spec.run_dir),
        "detached": detached,
        "resumed_from": resumed_from,
        "containers": {
            "agent": agent_kwargs(spec)["name"],
            "gateway": gateway_kwargs(spec)["name"],
        },
        "status": STARTING if detached else RUNNING,
        "keeper_pid": os.getpid(),
        "host": socket.gethostname(),
        "started": _now(),
        "ended": None,
        "exit_code": None,
        "spec": spec_to_json(spec),
    }
    spec.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    update_json(spec.state_dir / META, lambda _: meta, default={})
    return Run(spec.state_dir, meta)


def mark_running(state_dir: Path, *, keeper_pid: int, guard: bool = False) -> None:
    """`running`, kept by `keeper_pid`; unless the run already ended (a fast keeper). `guard`:
    the keeper is the guard of one that died (`guard_took_over`, epoch seconds: `resume`
    waits for it to finish)."""

    def change(meta: dict[str, Any]) -> dict[str, Any]:
        if meta.get("status") in LIVE:
            meta.update(status=RUNNING, keeper_pid=keeper_pid)
            if guard:
                meta["guard_took_over"] = time.time()
        return meta

    update_json(state_dir / META, change, default={})


def record_end(spec: BoxSpec, code: int | None) -> None:
    """The final status, exit code, end time and the gateway's metered cost (its ledger is
    this run's own, host-only)."""
    cost = _float(usage(spec).get("total_cost_usd"))

    def change(meta: dict[str, Any]) -> dict[str, Any]:
        meta.update(
            status=LOST if code is None else ENDED_AS.get(code, f"exit {code}"),
            exit_code=code,
            ended=_now(),
        )
        if cost is not None:
            meta["cost_usd"] = cost
        return meta

    update_json(spec.state_dir / META, change, default={})


def usage(spec: BoxSpec) -> dict[str, Any]:
    """The run's usage ledger as its gateway last wrote it ({} before the first request)."""
    try:
        data: Any = read_json(spec.usage_file, {})
    except StateFileError:
        return {}
    return cast(dict[str, Any], data) if isinstance(data, dict) else {}


# --- reading ------------------------------------------------------------------------------


def requests(run: Run) -> list[dict[str, Any]]:
    """The run's API requests as its gateway logged them, oldest first (the log's last
    REQUESTS_READ bytes); every text cleaned of terminal controls, for the model and the path
    are what the box sent."""
    try:
        with run.spec().requests_log.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - REQUESTS_READ))
            data = handle.read(REQUESTS_READ)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise RunError(text("runs.requests_unreadable", run=run.run_id, problem=exc)) from exc
    rows = []
    for line in data.splitlines():
        try:
            row = parse_json(line, limit=REQUESTS_READ)
        except ValueError:
            continue  # the first line, cut by the seek; or a line being written
        if isinstance(row, dict):
            rows.append(printable_data(row))
    return rows


def load(state_dir: Path) -> Run | None:
    """The run recorded in `state_dir`; None when there is none (or it cannot be read)."""
    try:
        meta = read_json(state_dir / META, None)
    except StateFileError:
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("run_id"), str):
        return None
    return Run(state_dir, meta)


def runs_of(workspace: Path) -> list[Run]:
    """This workspace's runs, oldest first."""
    return [run for run in all_runs() if run.meta.get("workspace") == str(workspace)]


def all_runs() -> list[Run]:
    """Every recorded run, oldest first."""
    folder = state.runs_folder()
    return _sorted(load(entry) for entry in sorted(folder.iterdir()) if entry.is_dir())


def find(workspace: Path, run_id: str | None) -> Run:
    """The run `run_id` (a unique prefix will do) of this workspace, or of any in the index;
    without an id, the workspace's newest flower run (a `flowerbox shell` only by its id)."""
    mine = runs_of(workspace)
    if run_id is None:
        flower_runs = [run for run in mine if run.meta.get("command", [])[:1] != ["shell"]]
        if not flower_runs:
            raise RunError(text("run.none_here", workspace=workspace))
        return flower_runs[-1]
    for pool in (mine, all_runs()):
        matches = {run.run_id: run for run in pool if run.run_id.startswith(run_id)}
        if len(matches) == 1:
            return next(iter(matches.values()))
        if len(matches) > 1:
            raise RunError(text("run.ambiguous", run=repr(run_id), count=len(matches)))
    raise RunError(text("run.no_such", run=repr(run_id)))


def chain(run_id: str) -> list[str]:
    """`run_id`, the run it resumed, the run that one resumed, ... (MAX_RESUMES at most),
    from the host-only records."""
    found = [run_id]
    while len(found) < MAX_RESUMES:
        run = load(state.run_folder(found[-1]))
        earlier = run.meta.get("resumed_from") if run is not None else None
        if not (isinstance(earlier, str) and state.RUN_ID.fullmatch(earlier)):
            break
        found.append(earlier)
    return found


def ensure_idle(workspace: Path) -> None:
    """Refuse a second flower run in a workspace whose runs/ a live (or unkept) run uses."""
    for run in runs_of(workspace):
        if run.running:
            raise RunError(text("runs.still_running", run=run.run_id, workspace=workspace))
        if run.unkept:
            raise RunError(text("runs.unkept", run=run.run_id, workspace=workspace))


def record(spec: BoxSpec, **fields: Any) -> None:
    """Set `fields` on the run's record: `box` (the isolation the engine recorded for it,
    flowerbox.box.facts), `start_phases` ([name, epoch seconds] of the start), `stop_reason`
    (why the host stopped it: a budget), `notices` (what the end of the run told the user;
    `logs` and `attach` show them for a detached run), `delivered` (the delivery branches it
    brought back under their own names: only it, or a run resuming it, may move them),
    `keeper_lost` (epoch seconds: when the guard killed the box of a run whose detached
    keeper died, flowerbox.runs.guard)."""

    def change(meta: dict[str, Any]) -> dict[str, Any]:
        meta.update(fields)
        return meta

    update_json(spec.state_dir / META, change, default={})


@contextlib.contextmanager
def reaping(state_dir: Path) -> Iterator[None]:
    """Held by whoever finishes a keeper's work for it (the guard, `stop`/`resume` reaping a
    lost run): one at a time, so a run is never reaped twice at once."""
    with (state_dir / REAP_LOCK).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def box_started(spec: BoxSpec, facts: dict[str, object]) -> None:
    """Once the agent runs: its isolation as the engine recorded it, and the moments of the
    start (flowerbox.box.startclock: where a start's time went)."""
    record(spec, box=facts, start_phases=startclock.moments())


def box_area(spec: BoxSpec) -> Path:
    """The run's box-writable folder outside the workspace (flowerbox.box.state.box_folder)."""
    return state.box_folder(spec.run_id)


# --- dataclasses as JSON ------------------------------------------------------------------


def to_json(value: Any) -> Any:
    """A dataclass (a BoxSpec, a Shadow) as JSON-ready data: Paths as strings."""
    import msgspec  # lazy: `ps` and `--help` read and list runs without it (issue 31)

    return msgspec.to_builtins(value, enc_hook=_encode)


def from_json(cls: type[T], data: Any) -> T:
    """The dataclass back, checked against its type hints (Paths, tuples, nested
    dataclasses), so a field added to it later round-trips without a change here.

    Raises:
        RunError: `data` is not a `cls` (a record from another flowerbox, or damaged).
    """
    import msgspec  # lazy: as in to_json

    try:
        return msgspec.convert(data, cls, dec_hook=_decode)
    except msgspec.ValidationError as exc:
        raise RunError(text("runs.record_unreadable", kind=cls.__name__, problem=exc)) from exc


def spec_to_json(spec: BoxSpec) -> dict[str, Any]:
    """The spec as recorded; never a broker's token (worth nothing once the run ended, and
    kept nowhere on disk before that)."""
    data: dict[str, Any] = to_json(spec)
    data.pop("run_token", None)
    return data


def spec_from_json(data: dict[str, Any]) -> BoxSpec:
    # lazy: the spec's module (its TOML reader, its dataclasses) is for a run's own box;
    # `ps` and `--help` list runs without it (issue 31)
    from flowerbox.box.spec import BoxSpec

    return from_json(BoxSpec, data)


def _encode(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    raise NotImplementedError(f"{type(value).__name__} has no JSON form here")


def _decode(cls: type[Any], value: Any) -> Any:
    if cls is Path and isinstance(value, str):
        return Path(value)
    raise NotImplementedError(f"{cls.__name__} has no JSON form here")


# --- helpers ------------------------------------------------------------------------------


def moment(run: Run, key: str) -> float | None:
    """The run's `started` or `ended` time (meta.json, host-only) as a Unix time."""
    try:
        return datetime.fromisoformat(str(run.meta.get(key))).timestamp()
    except ValueError:
        return None


def _asked_before(ask: dict[str, Any], moment: float) -> bool:
    asked = ask.get("asked_at")
    return isinstance(asked, int | float) and not isinstance(asked, bool) and asked < moment


def age(run: Run, now: float | None = None) -> int | None:
    """How many seconds ago the run started (None when its meta does not say)."""
    started = moment(run, "started")
    return None if started is None else max(0, int((now or time.time()) - started))


def age_text(seconds: int | None) -> str:
    """An age as ps shows it: 12s, 5m, 3h, 2d."""
    if seconds is None:
        return "?"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _sorted(runs: Iterable[Run | None]) -> list[Run]:
    return sorted(
        (run for run in runs if run is not None), key=lambda r: str(r.meta.get("started", ""))
    )


def _alive(pid: Any, host: Any) -> bool:
    """Whether the keeper process lives; a run kept on another host is taken at its word."""
    if host != socket.gethostname():
        return True
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: alive, unless it is a zombie
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A killed keeper stays a zombie until its parent (often init) reaps it, and some
    container inits never do; os.kill still finds it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc here: trust os.kill
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
