"""The self-test's host-boundary checks: once the box is gone, flowerbox's own host code is run
against the trust-boundary attacks the box planted (flowerbox.selftest.tampering.host_plants, and
git_redirects' commondir), and what that code did is observed here; selftest.verdicts judges
(`judge_host`); then every plant is removed, so the user's workspace is left as it was.

    area = Area.make(workspace, token)          # before the box: a folder outside, a marker
    ... the box runs the probes, then host_plants ...
    observed = observe(workspace, plants, run=check_run(spec, plants), area=area, ...)
    left = remove(workspace, plants, area, run_id=spec.run_id)   # no link followed

Each observer takes the host code it runs as a keyword argument (flowerbox's own by default),
so a test can hand it a host that trusts the workspace and see the judge FAIL it. A call that
could hang on a planted FIFO or /dev/zero runs in a thread with a deadline: a hang is an
observation ("timed out"), never a hung self-test.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import flower
import flowerbox
from flower import RunDir
from flowerbox.box.spec import BoxSpec
from flowerbox.box.untrusted import MiB, exists, open_dir, read_bytes, read_from
from flowerbox.errors import RunError, UntrustedFileError
from flowerbox.runs import records
from flowerbox.runs.control import drop
from flowerbox.runs.records import Run
from flowerbox.selftest.tampering import HOOKS_PLANT, Plants

DEADLINE_S = 5.0  # what the host code gets before a call counts as hung
CANARY = "keep.txt"  # in the folder outside: must be all it holds afterwards
# The keys the planted .env sets (the subprocess reports which it yielded, never a value).
PLANTED_KEYS = ("ANTHROPIC_BASE_URL", "PYTHONPATH")
# flowerbox's credential lookup, as `flowerbox "ask"` runs it, in a process of its own (it
# fills os.environ) started in the workspace: which planted values it yielded, and which
# known keys it took from `./.env` (flower.describe names each key's origin). Isolated (-I:
# nothing from the environment or the workspace on its path); it imports flower and
# flowerbox from where this process has them (argv[2]).
LOOKUP = """
import json, os, sys
sys.path[:0] = json.loads(sys.argv[2])
from pathlib import Path
from flower import describe
from flowerbox.box.prepare import load_credentials
from flowerbox.errors import FlowerboxError
planted = json.loads(sys.argv[1])
error = ""
try:
    load_credentials(Path.cwd())
except FlowerboxError as exc:
    error = type(exc).__name__
print(json.dumps({
    "yielded": [key for key, value in planted.items() if os.environ.get(key) == value],
    "from_workspace": [l.split()[0] for l in describe().splitlines() if "[./.env " in l],
    "error": error,
}))
"""

Observation = dict[str, Any]


@dataclass(frozen=True)
class Area:
    """What the host side makes before the box starts: a folder outside the workspace (the
    planted inbox link and the forged record point at it; it holds CANARY) and the path
    prefix of the marker files planted code would touch, in the host's /tmp."""

    outside: Path
    marker: str
    dotenv_before: bool  # the workspace had a .env of the user's
    records_before: bool  # runs/flowerbox was there (an older flowerbox kept records in it)

    @classmethod
    def make(cls, workspace: Path, token: str) -> Area:
        outside = Path(tempfile.mkdtemp(prefix=f"fbx-selftest-outside-{token}-"))
        (outside / CANARY).write_text("keep\n")
        return cls(
            outside=outside,
            marker=f"/tmp/fbx-selftest-{token}",
            dotenv_before=os.path.lexists(workspace / ".env"),
            records_before=os.path.lexists(workspace / "runs" / "flowerbox"),
        )

    def markers(self) -> list[str]:
        """The marker files planted code touched on this host (none, unless it ran)."""
        marker = Path(self.marker)
        return sorted(path.name for path in marker.parent.glob(f"{marker.name}-*"))

    def outside_now(self) -> list[str]:
        """What the folder outside holds besides the canary, and the canary if changed."""
        names = sorted(name for name in os.listdir(self.outside) if name != CANARY)
        canary = self.outside / CANARY
        if canary.is_symlink() or not canary.is_file() or canary.read_text() != "keep\n":
            names.append(f"{CANARY} (changed)")
        return names


def check_run(spec: BoxSpec, plants: Plants) -> Run:
    """A live run as the host knows one (never written anywhere), whose run folder is the
    self-test's planted one: what `ps`, `answer`, `send` and `logs` would be handed."""
    run_dir = spec.workspace / plants.run_dir
    meta = {
        "run_id": spec.run_id,
        "workspace": str(spec.workspace),
        "run_dir": str(run_dir),
        "status": records.RUNNING,
        "keeper_pid": os.getpid(),
        "host": socket.gethostname(),
        "spec": records.spec_to_json(replace(spec, run_dir=run_dir)),
    }
    return Run(spec.state_dir, meta)


def bounded(call: Callable[[], Any], *, deadline: float = DEADLINE_S) -> Observation:
    """`call()` in a thread: {"state": "done"|"raised"|"timed out", "value", "seconds"}; the
    value is the result, or `ExceptionName: message`."""
    box: Observation = {"state": "timed out", "value": None}

    def run() -> None:
        try:
            box.update(state="done", value=call())
        except Exception as exc:  # noqa: BLE001 - what the host code raised is the observation
            box.update(state="raised", value=f"{type(exc).__name__}: {exc}")

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(deadline)
    return {**box, "seconds": round(time.monotonic() - started, 3)}


# --- the observers: flowerbox's host code against each plant --------------------------------


def dotenv(workspace: Path, plants: Plants, *, port: int, script: str = LOOKUP) -> Observation:
    """Run the credential lookup in the workspace with the planted keys unset in its
    environment (so a lookup that read `./.env` would take them from there)."""
    planted = {
        "ANTHROPIC_BASE_URL": plants.dotenv_url(port),
        "PYTHONPATH": str(workspace / plants.evil),
    }
    unset = {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", *PLANTED_KEYS}
    env = {key: value for key, value in os.environ.items() if key not in unset}
    packages = sorted({str(Path(p.__file__ or "").parent.parent) for p in (flower, flowerbox)})
    argv = [sys.executable, "-I", "-c", script, json.dumps(planted), json.dumps(packages)]
    done = _run(argv, workspace, env)
    if isinstance(done, str):
        return {"broken": f"the lookup did not run ({done})"}
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
        return {
            "yielded": list(found["yielded"]),
            "from_workspace": list(found["from_workspace"]),
            "error": str(found["error"]),
        }
    except (ValueError, IndexError, KeyError, TypeError):
        return {"broken": f"the lookup did not report: {done.stderr.strip()[-300:]!r}"}


def forged_record(
    workspace: Path,
    plants: Plants,
    *,
    listed: Callable[[Path], list[Run]] = records.runs_of,
    find: Callable[[Path, str | None], Run] = records.find,
    idle: Callable[[Path], None] = records.ensure_idle,
) -> Observation:
    """What `ps` lists, what `stop`/`resume` find by the forged id, and whether a new run
    would be refused (and why)."""
    found = ""
    with contextlib.suppress(RunError):
        found = find(workspace, plants.forged_id).run_id
    refused = ""
    try:
        idle(workspace)
    except RunError as exc:
        refused = str(exc)
    return {"listed": [run.run_id for run in listed(workspace)], "found": found, "refused": refused}


def _asks(run: Run) -> list[dict[str, Any]]:
    return run.pending_asks()


def _drop(run: Run, data: dict[str, str]) -> str:
    return str(drop(run, data))


def linked(
    run: Run,
    *,
    asks: Callable[[Run], list[dict[str, Any]]] = _asks,
    drop: Callable[[Run, dict[str, str]], str] = _drop,
    read: Callable[..., bytes | None] = read_bytes,
) -> Observation:
    """The questions read through the asks.json link, the file itself read raw, and an
    answer dropped into the inbox link."""
    relative = RunDir(run.run_dir).asks.relative_to(run.workspace)
    raw = bounded(lambda: _size(read(run.workspace, relative, limit=MiB)))
    return {
        "asks": bounded(lambda: asks(run)),
        "raw": raw,
        "drop": bounded(lambda: drop(run, {"send": "flowerbox selftest"})),
    }


def fifos(
    run: Run,
    plants: Plants,
    *,
    read: Callable[..., bytes | None] = read_from,
    deadline: float = DEADLINE_S,
) -> Observation:
    """The events file and the gateway meter read as `logs` reads events; the run's cost as
    `ps` reads it (from the host's own ledger); and whether the FIFOs the box made are there
    on the host at all (gVisor keeps a FIFO made in a bind mount inside its own kernel)."""

    def reader(relative: str) -> Callable[[], str]:
        return lambda: _size(read(run.workspace, relative, offset=0, limit=MiB))

    return {
        "events": bounded(reader(plants.events(run.run_id)), deadline=deadline),
        "usage": bounded(reader(plants.usage), deadline=deadline),
        "cost": bounded(run.cost_usd, deadline=deadline),
        "on_host": [
            exists(run.workspace, name) for name in (plants.events(run.run_id), plants.usage)
        ],
    }


def git_status(workspace: Path) -> Observation:
    """The user's everyday `git status` in the workspace, as the host runs it after a run."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    done = _run(["git", "status", "--short"], workspace, env)
    if isinstance(done, str):
        return {"code": None, "stderr": done}
    return {"code": done.returncode, "stderr": done.stderr.strip()[-300:]}


def _run(
    argv: list[str], workspace: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str] | str:
    """`argv` run in the workspace with `env`, its output captured; or why it did not run."""
    try:
        return subprocess.run(
            argv, cwd=workspace, env=env, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _size(data: bytes | None) -> str:
    return "missing" if data is None else f"{len(data)} bytes"


def observe(
    workspace: Path,
    plants: Plants,
    *,
    run: Run,
    area: Area,
    port: int,
    received: list[str],
    repo_changed: list[str],
    git: bool,
) -> dict[str, Observation]:
    """Every check's observation, flowerbox's own host code run (the judges' input)."""
    observed: dict[str, Observation] = {
        "dotenv_redirect": dotenv(workspace, plants, port=port),
        "forged_record": forged_record(workspace, plants),
        "linked_runs_files": linked(run),
        "fifo_runs_files": fifos(run, plants),
        "git_hook_redirect": git_status(workspace) if git else {"code": None, "stderr": ""},
    }
    observed["dotenv_redirect"]["received"] = [
        line for line in received if f"fbx-dotenv-{plants.token}" in line
    ]
    markers = area.markers()  # after every host call above: any of them could have run code
    outside = area.outside_now()
    observed["dotenv_redirect"]["ran"] = [m for m in markers if m.endswith("-sitecustomize")]
    observed["forged_record"]["outside"] = outside
    observed["linked_runs_files"]["outside"] = outside
    observed["git_hook_redirect"].update(
        ran=[m for m in markers if m.endswith(("-hook", "-fsmonitor"))],
        repo_changed=repo_changed,
    )
    return observed


# --- afterwards: the workspace as it was ----------------------------------------------------


def _remove(workspace: Path, folder: str, name: str) -> None:
    """`workspace/folder/name` removed (a folder with all it holds), no link followed on the
    way nor inside: a link planted there is removed as a link."""
    try:
        with open_dir(workspace, folder) as parent:
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                shutil.rmtree(name, dir_fd=parent)
            else:
                os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        pass


def _release(workspace: Path, relative: str) -> None:
    """Open a planted FIFO for writing, once, without blocking: a reader stuck in it (a host
    that trusted it) gets its end of file instead of hanging on."""
    folder, _, name = relative.rpartition("/")
    with contextlib.suppress(OSError, ValueError), open_dir(workspace, folder) as parent:
        if stat.S_ISFIFO(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            os.close(os.open(name, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW, dir_fd=parent))


def remove(workspace: Path, plants: Plants, area: Area, *, run_id: str) -> list[str]:
    """Remove every plant (only ours: the `.env` only when it holds the planted redirect and
    the user had none) and what the host made; what could not be removed, in words."""
    left = []
    for fifo in (plants.events(run_id), plants.usage):
        _release(workspace, fifo)
    removals = [("runs", Path(plants.run_dir).name), ("runs/flowerbox", plants.forged_id)]
    for folder, name in removals:
        try:
            _remove(workspace, folder, name)
        except (OSError, ValueError) as exc:
            left.append(f"{folder}/{name} ({exc})")
    if not area.records_before:
        with contextlib.suppress(OSError, ValueError), open_dir(workspace, "runs") as parent:
            os.rmdir("flowerbox", dir_fd=parent)  # only when empty: nothing else went there
    if not area.dotenv_before:
        try:
            data = read_bytes(workspace, ".env", limit=4096)
            if data is not None and f"fbx-dotenv-{plants.token}".encode() in data:
                _remove(workspace, "", ".env")
        except (UntrustedFileError, OSError) as exc:
            left.append(f".env ({exc})")
    for name in area.markers():
        with contextlib.suppress(OSError):
            (Path(area.marker).parent / name).unlink()
    shutil.rmtree(area.outside, ignore_errors=True)
    return left


def remove_git_plant(workspace: Path, token: str) -> None:
    """The hooks folder the commondir plant names, where it reached the user's real `.git`
    (a box given the user's gitdir); the commondir itself is selftest's to remove."""
    with contextlib.suppress(OSError, ValueError):
        _remove(workspace, ".git", f"{HOOKS_PLANT}{token}")
