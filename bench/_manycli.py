"""bench.many's real-CLI mode (issue 31, item 4): N detached runs of the real Claude Code CLI
in their boxes through one broker, every one waiting on a long-thinking model at once.

Each run is `flowerbox once ASK --detach` in a git workspace of its own (a job of two turns:
the model writes done.txt with the Write tool, then says it is done), all started through
one `flowerbox broker`, `at_once` runs booting at once (from its start command to its
first model request). The scripted model holds each reply `hold` seconds, and every reply
until all N runs have asked (`Gate`), so all N boxes wait on the model at the same
moment. Then, over `window` seconds:

- memory per run, every page counted once, as the machine pays it: the agent container's
  memory as the engine counts it (its cgroup's usage less inactive page cache, what `docker
  stats` shows: each page is charged to one cgroup), plus the broker's proportional share
  (PSS: a page mapped by k processes counts 1/k in each) over N, plus the PSS of the run's
  host keeper (the detached supervisor, `flowerbox.runs.supervise`), its guard
  (`flowerbox.runs.guard`) and the engine's shim of its container (containerd-shim, one
  per container, outside its cgroup). Their resident memory (RSS, which counts the interpreter's and
  the libraries' shared pages again in every process) is printed beside it, and, as a check,
  how much the whole machine's used memory (MemTotal less MemAvailable) grew per run from
  before the first start to the wait (every user of the machine counts);
- CPU: the whole host's busy share (every user of this machine counts, /proc/stat) and the
  runs' own (the containers' cgroups, the broker, the keepers, guards and shims), in % of
  one core;
- the load average.

Then the hold is lifted and each run must end `done` (exit 0) with done.txt written:
`achieved`. Started-all is the time from the first start command to the last run's first
model request (its CLI up in its box, through the broker). Target: 100 runs, all achieved,
<= 150 MiB per run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from docker import DockerClient  # noqa: TID251 - the benchmark weighs the containers itself
from docker.errors import DockerException  # noqa: TID251

from flower.testing import FakeAPI, Reply, Request, Usage, text, tool, working_directory
from flowerbox import wire
from flowerbox.broker import client

KEY = "sk-bench-real-key"
ASK = "Write done.txt"
DONE = "done\n"
WRITE_ID = "toolu_bench_write"
SIZES = (25, 50, 100)
HOLD = 20.0
HOLD_CAP = 500.0
FLOOR = 3 * 2**30  # no run is started with less memory available: a shared machine
AT_ONCE = 3  # runs booting at once: 25 at once, on 2 shared cores, starved the CLIs' start
TARGET_RUNS = 100
TARGET_MIB = 150.0
TICKS = os.sysconf("SC_CLK_TCK")
# A box's processes, told apart by a word of their command line (the first that matches)
INSIDE = (
    ("reaper", b"reaper.py"),  # before the CLI: it may name the CLI's path
    ("relay", b"flowerbox.inside.relay"),
    ("entry", b"flowerbox.inside.entry"),
    ("flower", b"/bin/flower\0"),  # not /usr/local/bin/flowerbox-init
    ("CLI", b"_bundled/claude"),
)


@dataclass(frozen=True)
class CliSize:
    """Runs at once (each N in turn), seconds each reply is held, seconds measured while all
    wait (after `settle`), seconds a run may take from its start command to its first model
    request, runs booting at once."""

    sizes: tuple[int, ...] = SIZES
    hold: float = HOLD
    window: float = 10.0
    settle: float = 2.0
    boot_s: float = 180.0
    at_once: int = AT_ONCE


CLI_SMOKE = CliSize(sizes=(2,), hold=0.5, window=1.0, settle=0.5)


class Gate:
    """The FakeAPI's hold: every request waits until `runs` runs have each asked, or until
    `open()` (a deadline, a failed start); runs are told apart by their working directory (one
    workspace each). A request is held at most HOLD_CAP s, under the CLI's own 600 s timeout:
    a run answered then asks again (its second turn) and is held again, so it stays waiting."""

    def __init__(self, runs: int) -> None:
        self.runs = runs
        self.seen: dict[str, float] = {}
        self._lock = threading.Lock()
        self.all_in = threading.Event()
        self.lifted = threading.Event()

    def __call__(self, request: Request) -> None:
        cwd = working_directory(request)
        with self._lock:
            self.seen.setdefault(cwd, time.monotonic())
            if len(self.seen) >= self.runs:
                self.all_in.set()
        self.lifted.wait(timeout=HOLD_CAP)

    def expect(self, runs: int) -> None:
        """Only `runs` runs will ask (the others failed to start)."""
        with self._lock:
            self.runs = runs
            if len(self.seen) >= runs:
                self.all_in.set()

    def open(self) -> None:
        self.lifted.set()


def job(hold: float) -> Callable[[Request], Reply]:
    """Two turns, each held `hold` s: write done.txt in the run's workspace, then say done."""

    def answer(request: Request) -> Reply:
        usage = Usage(2000, 100)
        if request.result_for(WRITE_ID) is None:
            target = f"{working_directory(request)}/done.txt"
            write = {"file_path": target, "content": DONE}
            return tool("Write", write, id=WRITE_ID, usage=usage, delay=hold)
        return text("done", usage=usage, delay=hold)

    return answer


@dataclass
class Run:
    workspace: Path
    run_id: str = ""
    refused: str = ""  # why its start command failed
    launched: float = 0.0  # monotonic, its start command began
    started: float = 0.0  # monotonic, its start command returned


@dataclass
class Figures:
    runs: int
    started_s: float = 0.0  # to the last run's first model request
    detached_s: float = 0.0  # to the last start command's return
    command_s: float = 0.0  # median, a start command's wall time
    boot_s: float = 0.0  # median, from a start command's return to the run's first request
    asked: int = 0
    achieved: int = 0
    box_mib: float = 0.0
    broker_mib: float = 0.0
    broker_pss_mib: float = 0.0
    keeper_mib: float = 0.0
    keeper_pss_mib: float = 0.0
    guard_mib: float = 0.0
    guard_pss_mib: float = 0.0
    shim_mib: float = 0.0
    shim_pss_mib: float = 0.0
    machine_mib: float = 0.0  # the machine's used memory's growth over N (a check: shared)
    inside: dict[str, float] = field(default_factory=dict)  # a box's processes, anonymous MiB
    host_cpu: float = 0.0  # % of one core, every process of the machine
    runs_cpu: float = 0.0  # % of one core, the boxes, the broker, the keepers and guards
    load: str = ""
    refusals: list[str] = field(default_factory=list)

    @property
    def per_run_mib(self) -> float:
        """What a run costs the machine: every page counted once (the box's cgroup, PSS)."""
        host = self.broker_pss_mib + self.keeper_pss_mib + self.guard_pss_mib + self.shim_pss_mib
        return self.box_mib + host

    @property
    def per_run_rss_mib(self) -> float:
        """The same with the host processes' RSS: their shared pages counted in each."""
        return self.box_mib + self.broker_mib + self.keeper_mib + self.guard_mib + self.shim_mib


class Fleet:
    """One broker in a private state folder, and the runs started through it."""

    def __init__(self, root: Path, api: FakeAPI, image: str) -> None:
        self.root = root
        state = root / "s"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")} | {
            "XDG_STATE_HOME": str(state),
            "ANTHROPIC_API_KEY": KEY,
            "ANTHROPIC_BASE_URL": api.url,
            "FLOWERBOX_IMAGE": image,
        }
        self.runs_dir = state / "flowerbox" / "runs"
        folder = state / "flowerbox" / "broker"
        self.broker = subprocess.Popen(
            [sys.executable, "-m", "flowerbox", "broker"],
            stdout=subprocess.DEVNULL,
            stderr=(root / "broker.log").open("wb"),
            env=self.env,
        )
        while not client.running(folder):
            if self.broker.poll() is not None:
                raise RuntimeError(f"the broker did not start: see {root / 'broker.log'}")
            time.sleep(0.05)

    def start(self, run: Run, gate: Gate, boot_s: float) -> None:
        """`flowerbox once ASK --detach` in the run's workspace (a git repository with one
        commit), then wait until its CLI has asked the model (or the run ended, or `boot_s`
        passed): the caller's `at_once` threads are so the runs booting at once."""
        available = _meminfo("MemAvailable")
        if available < FLOOR:
            run.refused = (
                f"not started: the machine has {available / 2**30:.1f} GiB available,"
                f" under this benchmark's floor of {FLOOR / 2**30:.0f} GiB"
            )
            return
        run.workspace.mkdir()
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
        subprocess.run([*git, "init", "-q"], cwd=run.workspace, check=True)
        subprocess.run(
            [*git, "commit", "-q", "--allow-empty", "-m", "start"], cwd=run.workspace, check=True
        )
        run.launched = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "flowerbox", "once", ASK, "--detach"],
            cwd=run.workspace,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        run.started = time.monotonic()
        if done.returncode != 0:
            run.refused = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            return
        run.run_id = done.stdout.strip().splitlines()[-1]
        end = run.started + boot_s
        while str(run.workspace) not in gate.seen and time.monotonic() < end:
            if self.meta(run).get("status") not in ("starting", "running"):
                return
            time.sleep(0.2)

    def meta(self, run: Run) -> dict[str, object]:
        try:
            meta: dict[str, object] = json.loads(
                (self.runs_dir / run.run_id / "meta.json").read_text()
            )
        except (OSError, ValueError):
            return {}
        return meta

    def stop(self) -> None:
        self.broker.send_signal(signal.SIGTERM)
        try:
            self.broker.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.broker.kill()


def measure(size: CliSize, runs: int, image: str, docker: DockerClient) -> Figures:
    figures = Figures(runs)
    gate = Gate(runs)
    root = Path(tempfile.mkdtemp(prefix="fbx-manycli-", dir="/tmp"))
    started = time.monotonic()
    fleet: Fleet | None = None
    batch = [Run(root / f"w{n:03d}") for n in range(runs)]
    used_before = _used()
    try:
        with FakeAPI(job(size.hold), api_key=KEY, hold=gate) as api:
            fleet = Fleet(root, api, image)
            started = time.monotonic()
            with ThreadPoolExecutor(size.at_once) as pool:
                starting = [pool.submit(fleet.start, run, gate, size.boot_s) for run in batch]
                for future in starting:
                    future.result()
            figures.detached_s = max(run.started for run in batch) - started
            figures.refusals = [run.refused for run in batch if run.refused]
            live = [run for run in batch if run.run_id]
            gate.expect(len(live))
            gate.all_in.wait(timeout=size.boot_s)
            figures.asked = len(gate.seen)
            figures.command_s = statistics.median([r.started - r.launched for r in live] or [0])
            boots = [
                gate.seen[key] - r.started for r in live if (key := str(r.workspace)) in gate.seen
            ]
            figures.boot_s = statistics.median(boots or [0])
            if gate.seen:
                figures.started_s = max(gate.seen.values()) - started
            time.sleep(size.settle)  # the CLIs settled in their wait
            sample(figures, fleet, live, docker, size.window)
            figures.machine_mib = (_used() - used_before) / max(len(live), 1) / 2**20
            gate.open()
            figures.achieved = finish(fleet, live, deadline=4 * size.hold + 180 + 2 * runs)
    finally:
        gate.open()
        cleanup(fleet, batch, root, docker)
    return figures


def sample(
    figures: Figures, fleet: Fleet, live: list[Run], docker: DockerClient, window: float
) -> None:
    """Memory and CPU while every run waits on the model."""
    containers = boxes(docker, fleet.root)
    keepers = [pid for run in live if (pid := _int(fleet.meta(run).get("keeper_pid")))]
    guards = _guards(fleet.runs_dir)
    shims = _shims(containers)
    hosts = [fleet.broker.pid, *keepers, *guards, *shims]
    host_before, runs_before = _host_cpu(), _runs_cpu(containers, hosts)
    time.sleep(window)
    host_after, runs_after = _host_cpu(), _runs_cpu(containers, hosts)
    busy = (host_after[0] - host_before[0]) / max(host_after[1] - host_before[1], 1)
    figures.host_cpu = 100 * busy * (os.cpu_count() or 1)
    figures.runs_cpu = 100 * (runs_after - runs_before) / window
    figures.load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    n = max(len(live), 1)
    mib = 2**20
    figures.box_mib = sum(_container_memory(docker, c) for c in containers) / n / mib
    figures.inside = _inside(containers)
    figures.broker_mib = _status(fleet.broker.pid, "VmRSS") / n / mib
    figures.broker_pss_mib = _pss(fleet.broker.pid) / n / mib
    figures.keeper_mib = sum(_status(pid, "VmRSS") for pid in keepers) / n / mib
    figures.keeper_pss_mib = sum(_pss(pid) for pid in keepers) / n / mib
    figures.guard_mib = sum(_status(pid, "VmRSS") for pid in guards) / n / mib
    figures.guard_pss_mib = sum(_pss(pid) for pid in guards) / n / mib
    figures.shim_mib = sum(_status(pid, "VmRSS") for pid in shims) / n / mib
    figures.shim_pss_mib = sum(_pss(pid) for pid in shims) / n / mib


def _guards(runs_dir: Path) -> list[int]:
    """The pids of the guards of runs under `runs_dir` (each started with its state folder)."""
    return _processes(
        lambda argv: (
            b"flowerbox.runs.guard" in argv and any(str(runs_dir).encode() in a for a in argv)
        )
    )


def _shims(containers: list[str]) -> list[int]:
    """The pids of the engine's shims of `containers` (`containerd-shim-runc-v2 ... -id ID`)."""
    ids = {c.encode() for c in containers}
    return _processes(lambda argv: b"-id" in argv and bool(ids.intersection(argv)))


def _processes(match: Callable[[list[bytes]], bool]) -> list[int]:
    """The pids of the host's processes whose argv `match`es."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and match(argv):
            found.append(int(proc.name))
    return found


def finish(fleet: Fleet, live: list[Run], *, deadline: float) -> int:
    """How many runs ended done, exit 0, with done.txt written (waiting up to `deadline` s)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if all(fleet.meta(run).get("status") not in ("starting", "running") for run in live):
            break
        time.sleep(1.0)
    achieved = 0
    for run in live:
        meta = fleet.meta(run)
        written = run.workspace / "done.txt"
        ok = meta.get("status") == "done" and meta.get("exit_code") == 0
        if ok and written.is_file() and not written.is_symlink() and written.read_text() == DONE:
            achieved += 1
    return achieved


def boxes(docker: DockerClient, root: Path) -> list[str]:
    """The ids of the containers of runs whose workspace is under `root`."""
    found = docker.containers.list(all=True, filters={"label": wire.BOX_LABEL})
    return [str(c.id) for c in found if str(root) in c.labels.get(wire.WORKSPACE_LABEL, "")]


def cleanup(fleet: Fleet | None, batch: list[Run], root: Path, docker: DockerClient) -> None:
    """Stop what still runs (`flowerbox stop`), remove this benchmark's containers, stop its
    broker, remove its folders: nothing of it is left on the engine or the host."""
    if fleet is not None:
        for run in batch:
            if run.run_id and fleet.meta(run).get("status") in ("starting", "running"):
                subprocess.run(
                    [sys.executable, "-m", "flowerbox", "stop", run.run_id],
                    cwd=run.workspace,
                    env=fleet.env,
                    capture_output=True,
                    timeout=120,
                )
    for container in boxes(docker, root):
        with contextlib.suppress(DockerException):
            docker.api.remove_container(container, force=True)
    if fleet is not None:
        fleet.stop()
    shutil.rmtree(root, ignore_errors=True)


def _inside(containers: list[str]) -> dict[str, float]:
    """The mean anonymous memory (MiB) of each kind of process in the boxes (INSIDE, else
    "other"): nearly all of what a waiting box's cgroup is charged. Empty when the cgroups
    are not readable here (v1's and v2's docker paths)."""
    total: dict[str, int] = {}
    boxes = 0
    for container in containers:
        for procs in (
            Path("/sys/fs/cgroup/memory/docker") / container / "cgroup.procs",
            Path("/sys/fs/cgroup/system.slice") / f"docker-{container}.scope" / "cgroup.procs",
        ):
            if procs.is_file():
                boxes += 1
                for pid in procs.read_text().split():
                    kind = _kind(int(pid))
                    total[kind] = total.get(kind, 0) + _rollup(int(pid), "Anonymous")
                break
    return {kind: size / max(boxes, 1) / 2**20 for kind, size in total.items()}


def _kind(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "other"
    return next((kind for kind, word in INSIDE if word in argv), "other")


def _container_memory(docker: DockerClient, container: str) -> int:
    """A container's memory as `docker stats` counts it: usage less inactive page cache,
    read from its cgroup (v1 or v2) when the files are here, else asked of the engine."""
    for folder in (
        Path("/sys/fs/cgroup/memory/docker") / container,
        Path("/sys/fs/cgroup/system.slice") / f"docker-{container}.scope",
        Path("/sys/fs/cgroup/docker") / container,
    ):
        usage = folder / ("memory.usage_in_bytes" if "memory/" in str(folder) else "memory.current")
        if usage.is_file():
            stat = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines())
            inactive = int(stat.get("total_inactive_file", stat.get("inactive_file", 0)))
            return int(usage.read_text()) - inactive
    stats = docker.api.stats(container, stream=False, one_shot=True)
    memory = stats.get("memory_stats") or {}
    return int(memory.get("usage", 0)) - int((memory.get("stats") or {}).get("inactive_file", 0))


def _runs_cpu(containers: list[str], pids: list[int]) -> float:
    """CPU seconds so far of the containers (their cgroups) and the processes."""
    total = 0.0
    for container in containers:
        v1 = Path("/sys/fs/cgroup/cpuacct/docker") / container / "cpuacct.usage"
        v2 = Path("/sys/fs/cgroup/system.slice") / f"docker-{container}.scope" / "cpu.stat"
        if v1.is_file():
            total += int(v1.read_text()) / 1e9
        elif v2.is_file():
            stat = dict(line.split() for line in v2.read_text().splitlines())
            total += int(stat.get("usage_usec", 0)) / 1e6
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def _host_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    total = sum(values[:8])
    return total - idle, total


def _status(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _meminfo(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _used() -> int:
    """The machine's used memory: what is not available to a new program."""
    return _meminfo("MemTotal") - _meminfo("MemAvailable")


def _pss(pid: int) -> int:
    return _rollup(pid, "Pss")


def _rollup(pid: int, key: str) -> int:
    """A figure of /proc/PID/smaps_rollup, in bytes (0: the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def report(figures: Figures, *, judged: bool, at_once: int) -> bool:
    """Print one N's figures; whether they meet the target (N = TARGET_RUNS only)."""
    n = figures.runs
    ok = figures.achieved == n and figures.per_run_mib <= TARGET_MIB
    print(
        f"  N = {n:3}: started all in {figures.started_s:5.0f} s (detach commands back in"
        f" {figures.detached_s:.0f} s), {figures.asked}/{n} waiting at once,"
        f" {figures.achieved}/{n} achieved"
    )
    print(
        f"           a start command took {figures.command_s:.1f} s, then its CLI's first"
        f" request {figures.boot_s:.1f} s (medians; {at_once} runs starting at once)"
    )
    print(
        f"           {figures.per_run_mib:6.1f} MiB per run: box {figures.box_mib:.1f}"
        f" + broker {figures.broker_pss_mib:.1f} + host keeper {figures.keeper_pss_mib:.1f}"
        f" + its guard {figures.guard_pss_mib:.1f} + its container's shim"
        f" {figures.shim_pss_mib:.1f} (PSS; with the host processes' RSS"
        f" {figures.per_run_rss_mib:.1f}: broker {figures.broker_mib:.1f},"
        f" keeper {figures.keeper_mib:.1f}, guard {figures.guard_mib:.1f},"
        f" shim {figures.shim_mib:.1f})"
    )
    if figures.inside:
        kinds = sorted(figures.inside.items(), key=lambda item: -item[1])
        parts = ", ".join(f"{kind} {mib:.1f}" for kind, mib in kinds)
        print(f"           inside a box (anonymous MiB, mean): {parts}")
    print(
        f"           the machine's used memory grew {figures.machine_mib:.1f} MiB per run"
        " (a check: every user of the machine counts)"
    )
    print(
        f"           while waiting: host CPU {figures.host_cpu:.0f} % of one core (every user"
        f" of the machine), the runs' own {figures.runs_cpu:.0f} %; load average {figures.load}"
    )
    for refusal in sorted(set(figures.refusals)):
        count = figures.refusals.count(refusal)
        print(f"           refused {count}x: {refusal}")
    if judged:
        verdict = "PASS" if ok else "MISS"
        print(
            f"           {verdict}: target {TARGET_RUNS} runs, all achieved,"
            f" <= {TARGET_MIB:.0f} MiB per run"
        )
    return ok


def main(size: CliSize, image: str) -> bool:
    """Every size in turn; whether the target holds (True when skipped: no engine)."""
    try:
        docker = DockerClient.from_env(timeout=120)
        docker.ping()
    except DockerException as exc:
        print(f"real CLI runs: skipped, no engine ({exc}): bash docker/prepare.sh")
        return True
    ok = True
    print(
        f"real CLI runs through one broker ({image}): every reply held until all N runs"
        f" wait, then {size.hold:g} s each (target at N = {TARGET_RUNS}):"
    )
    for runs in size.sizes:
        figures = measure(size, runs, image, docker)
        judged = runs == TARGET_RUNS
        ok &= report(figures, judged=judged, at_once=size.at_once) or not judged
    if TARGET_RUNS not in size.sizes:
        target = f"{TARGET_RUNS} runs <= {TARGET_MIB:.0f} MiB per run"
        print(f"  target {target}: not measured at this size (not judged)")
    return ok


def sized(sizes: str | None, hold: float | None, at_once: int | None, base: CliSize) -> CliSize:
    """`base` with the sizes, hold and runs starting at once a command line gave."""
    if sizes:
        base = replace(base, sizes=tuple(int(n) for n in sizes.split(",")))
    if hold is not None:
        base = replace(base, hold=hold)
    if at_once is not None:
        base = replace(base, at_once=at_once)
    return base
