"""bench.chaos's flowerbox variant (issue 30): a detached run whose keeper is SIGKILLed at
random moments, continued with `flowerbox resume` each time.

The job is bench.chaos's (the same cast, ledger and ask), run as `flowerbox "ask" --detach
--timeout 6` on the image FLOWERBOX_IMAGE names (default flowerbox:dev): the clarifier's
question waits 6 s for an answer nobody gives, so a kill can land while it waits. Each run is
killed 1-3 times, each kill drawn phase first: one of the phases the fault-free detached
run went through (measured first, its phases' stretches printed) at random, and a delay
uniformly within that phase's length there; the kill comes that long after the box run
reaches the phase (bench.chaos.phase_first: the last judge's second or so is hit as often as
a round's ten, however load stretches the run; moments drawn uniformly over the whole run
put 0 of 49 kills there). A kill whose phase a resumed box never reaches again is not made.
A run that ends before its first kill is not counted, is made again, and its moments are
drawn uniformly over its duration from then on (bench.chaos.every_run_killed). By a
SIGKILL of the keeper's process group (the supervisor: what the OOM killer would take); the
box's own processes are not signalled. Each kill's line names the phase it landed in. A
keeper's death is the guard's to handle (flowerbox.runs.guard: the box killed, the run
recorded `killed`); 2 s later the run is checked, then `flowerbox resume` continues it.
Per run, as bench.chaos: achieved (the last run `done`, exit 0), each effect exactly once,
orphans (2 s after the kill: a process of the keeper's process group, or a running
container of the run), late requests (reaching the fake API after the keeper's kill;
those before the guard recorded the box killed are shown apart too: the keeper's lease on
the gateway must refuse them, flowerbox.sidecar.lease), the
frozen goal unchanged, and the cost over the fault-free run. Targets as bench.chaos's.

Needs the engine and the image; without them it says it skipped. `--smoke`: one run, killed
once in its first 12 s, and no fault-free run (so no overhead figure): it must stay near a
minute.

    python -m bench.chaosbox [--runs K] [--seed S] [--smoke] [--keep DIR]
    python -m bench.chaos --flowerbox ...          (the same)
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.chaos import (
    ASK,
    EFFECTS,
    LEDGER,
    RUN_TIMEOUT_S,
    SETTLE_S,
    Outcome,
    Runs,
    Timeline,
    cast,
    every_run_killed,
    main_args,
    phase_first,
    summary,
)
from bench.faults import cache_aware, job_env, workspace_in
from flower.testing import FakeAPI
from flowerbox import wire

LANGUAGES = ("en",)  # what `python -m bench --smoke` runs it in (bench.chaos covers zh)
IMAGE = os.environ.get("FLOWERBOX_IMAGE", "flowerbox:dev")
FLOWERBOX = [sys.executable, "-m", "flowerbox"]
QUESTION_WAIT_S = "6"
SMOKE_KILL_S = 6.0  # --smoke: killed once, at a moment drawn over twice this (no fault-free run)
LIVE = ("starting", "running")


@dataclass
class Detached:
    """The workspace, its environment and where flowerbox keeps its runs' records."""

    ws: Path
    env: dict[str, str]
    state: Path

    def metas(self) -> list[dict[str, Any]]:
        """The workspace's runs' records, the oldest first."""
        found = []
        for path in (self.state / "runs").glob("*/meta.json"):
            meta = json.loads(path.read_text())
            if meta.get("workspace") == str(self.ws):
                found.append(meta)
        return sorted(found, key=lambda meta: str(meta["started"]))

    def flowerbox(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*FLOWERBOX, *args, "-w", str(self.ws)],
            env=self.env,
            cwd=self.ws,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )

    def newest(self, deadline: float) -> dict[str, Any]:
        """The newest run's record once it has ended and its keeper and guard are gone (or
        as it is at `deadline`, monotonic)."""
        while True:
            meta = self.metas()[-1]
            ended = meta["status"] not in LIVE and not _alive(meta.get("keeper_pid"))
            if ended and not _guards(meta["run_id"]) or time.monotonic() > deadline:
                return meta
            time.sleep(0.1)


def run_one(root: Path, *, kill_at: list[tuple[str, float]], hold: random.Random | None) -> Outcome:
    """The job in `root`, detached: its keeper killed at each (phase, seconds into it) of
    `kill_at` ("start": seconds into the box run), each kill followed by `flowerbox
    resume`, then waited to its end."""
    # lazy: the docker SDK is this benchmark's alone (bench.chaos runs without an engine)
    from docker import DockerClient  # noqa: TID251 - the bench asks the engine what runs

    ws = workspace_in(root)
    started = time.monotonic()
    kills: list[str] = []
    orphans = late = gap = 0
    goals: set[bytes] = set()
    goal_path = ws / ".flower" / "notes" / "目标.md"
    timeline = Timeline()
    phases: list[str] = []
    at_s: list[float] = []
    first_s = 0.0
    docker = DockerClient.from_env(timeout=60)
    with FakeAPI(cast(ws, rng=hold, timeline=timeline)) as api:
        env = {
            **job_env(api, root / "home"),
            "FLOWERBOX_IMAGE": IMAGE,
            "XDG_STATE_HOME": str(root / "home" / ".local" / "state"),
        }
        job = Detached(ws, env, root / "home" / ".local" / "state" / "flowerbox")
        began, began_at = time.monotonic(), time.time()
        timeline.mark("start", began_at)
        done = job.flowerbox(ASK, "--detach", "--no-isolate", "--timeout", QUESTION_WAIT_S)
        if done.returncode != 0:
            raise SystemExit(f"flowerbox --detach failed: {done.stderr[-2000:]}")
        for phase, offset in kill_at:
            meta = _until(job, timeline, phase, began_at, offset)
            if meta["status"] not in LIVE:
                first_s = first_s or time.monotonic() - began
                break  # it ended before its kill: nothing to continue
            keeper = int(meta["keeper_pid"])
            killed = time.time()
            try:
                os.killpg(keeper, signal.SIGKILL)
            except ProcessLookupError:
                first_s = first_s or time.monotonic() - began
                break  # it ended just now
            phases.append(timeline.at(killed))
            at_s.append(time.monotonic() - began)
            first_s = first_s or time.monotonic() - began
            time.sleep(SETTLE_S)
            left = [*map(str, _in_group(keeper)), *_running(docker, meta["run_id"])]
            if left:  # which: a host process of the keeper's group, or a container
                print(f"  orphans {SETTLE_S:.0f} s after the kill: {', '.join(left)}", flush=True)
            orphans += len(left)
            meta = job.newest(time.monotonic() + 120)
            boxed = float(meta.get("keeper_lost") or killed)
            gap += sum(1 for r in api.requests if killed < r.received_at <= boxed)
            late += sum(1 for r in api.requests if r.received_at > killed)
            if goal_path.is_file():
                goals.add(goal_path.read_bytes())
            kills.append("resume")
            began, began_at = time.monotonic(), time.time()
            timeline.mark("start", began_at)
            done = job.flowerbox("resume", meta["run_id"])
            if done.returncode != 0:
                raise SystemExit(f"flowerbox resume failed: {done.stderr[-2000:]}")
        final = job.newest(time.monotonic() + RUN_TIMEOUT_S)
        first_s = first_s or time.monotonic() - began
        requests = list(api.requests)
    docker.close()
    if goal_path.is_file():
        goals.add(goal_path.read_bytes())
    achieved = (final["status"], final["exit_code"]) == ("done", 0)
    lines = (ws / LEDGER).read_text().split() if (ws / LEDGER).is_file() else []
    wanted = [e for effects in EFFECTS.values() for e in effects]
    return Outcome(
        achieved=achieved,
        kills=kills,
        duplicated=sum(max(0, lines.count(e) - 1) for e in wanted),
        lost=sum(1 for e in wanted if e not in lines),
        orphans=orphans,
        late=late,
        goal_rewritten=len(goals) > 1,
        cost=cache_aware(requests),
        why="" if achieved else f"{final['run_id']} {final['status']}: {_tail(job, final)}",
        seconds=time.monotonic() - started,
        ledger=lines,
        gap=gap,
        phases=phases,
        first_s=first_s,
        windows=timeline.windows(began_at, first_s) if not kill_at else [],
        at_s=at_s,
    )


def _until(
    job: Detached, timeline: Timeline, phase: str, since: float, offset: float
) -> dict[str, Any]:
    """The newest run's record `offset` seconds after the box run that began at `since`
    (time.time()) reached `phase`, or as soon as it ended."""
    while True:
        meta = job.metas()[-1]
        reached = timeline.reached(phase, since)
        if meta["status"] not in LIVE or reached is not None and time.time() >= reached + offset:
            return meta
        time.sleep(0.05)


def _in_group(pgid: int) -> list[int]:
    """Live processes of process group `pgid` (a zombie has ended)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat[0] != "Z" and int(stat[2]) == pgid:
            found.append(int(entry.name))
    return found


def _running(docker: Any, run_id: str) -> list[str]:
    """The run's containers that still run."""
    label = f"{wire.RUN_LABEL}={run_id}"
    return [str(c.name) for c in docker.containers.list(filters={"label": label})]


def _guards(run_id: str) -> bool:
    """Whether the run's guard still runs (it finishes a dead keeper's work)."""
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if wire.GUARD_MODULE.encode() in argv and run_id.encode() in argv:
            return True
    return False


def _alive(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _tail(job: Detached, meta: dict[str, Any]) -> str:
    output = job.state / "runs" / meta["run_id"] / "output.log"
    said = output.read_text(errors="replace").splitlines() if output.is_file() else []
    return (said[-1] if said else "(no output)")[:160]


def engine_ready() -> str:
    """Why this benchmark cannot run here ("" when it can): no engine, or no image."""
    # lazy: as run_one's
    from docker import DockerClient  # noqa: TID251
    from docker.errors import DockerException  # noqa: TID251

    try:
        client = DockerClient.from_env(timeout=10)
        client.images.get(IMAGE)
    except DockerException as exc:
        return f"no engine or no {IMAGE} ({exc})"
    client.close()
    return ""


def main(
    *, runs: int = 30, seed: int | None = None, smoke: bool = False, keep: Path | None = None
) -> int:
    why = engine_ready()
    if why:
        print(f"skipped: {why}: bash docker/engine.sh, flowerbox build")
        return 0
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    rng = random.Random(seed)
    print(f"bench.chaosbox: {runs} runs on {IMAGE}, seed {seed} (--seed {seed} again)")
    with tempfile.TemporaryDirectory(prefix="bench-chaosbox-") as tmp:
        base = keep.resolve() if keep is not None else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        clean_cost, clean_s = float("nan"), SMOKE_KILL_S * 2
        windows: list[tuple[str, float, float]] = []
        if not smoke:  # the smoke has no time for it: one kill at SMOKE_KILL_S, no overhead
            clean = run_one(base / "clean", kill_at=[], hold=None)
            clean_s = clean.first_s  # from `flowerbox --detach` to the run's end, as a moment
            if not clean.achieved or clean.duplicated or clean.lost:
                print(f"the fault-free run did not come out right: {clean}")
                return 1
            clean_cost, windows = clean.cost, clean.windows
            shown = ", ".join(f"{phase} {start:.1f}-{end:.1f}" for phase, start, end in windows)
            print(f"fault-free phases (s): {shown}")
            print(f"fault-free detached run: {clean_s:.1f} s, achieved, every effect once")

        def attempt(index: int, over_s: float, again: int) -> tuple[list[float], Outcome]:
            count = 1 if smoke else rng.randint(1, 3)
            if windows and not again:  # each kill in a phase drawn first
                kill_at = [phase_first(rng, windows) for _ in range(count)]
            else:  # the smoke, or a run made again: over the shortest duration seen
                kill_at = [("start", rng.uniform(0, over_s)) for _ in range(count)]
            hold = random.Random(rng.randrange(2**31))
            folder = base / f"run{index}{'-again' * again}"
            outcome = run_one(folder, kill_at=kill_at, hold=hold)
            outcome.overhead = outcome.cost / clean_cost - 1
            return outcome.at_s, outcome

        done: Runs = every_run_killed(runs, clean_s, attempt)
    return summary(done, runs=runs, smoke=smoke)


if __name__ == "__main__":
    sys.exit(main(**main_args("bench.chaosbox", __doc__, smoke_runs=1)))
