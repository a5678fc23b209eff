"""Many runs through one broker (`flowerbox broker`, issue 23): what a box costs in memory, what
the broker adds per request at N = 1 and 8 concurrent runs, how many runs one broker serves
before its first refusal, and what N real runs cost on one machine.

- Memory per box, idle and working: N = 8 boxes (`flowerbox shell -- python3 -c CLIENT`)
  through one broker, against N = 8 boxes with a private gateway each, in the same run. A box's
  share is its containers' memory (the engine's figure less the page cache, as `docker stats`
  shows it) plus, through the broker, the broker's resident memory over N. Idle: the client
  sleeps; working: it sends Messages calls in a loop. Target: the broker's box <= 0.75x the
  private gateway's (it runs one container instead of two).
- Latency: a Messages call (non-streamed, FakeAPI answer) through the broker's run socket vs
  straight to the FakeAPI, with N client threads at once, interleaved; median added per request.
  Target: <= 5 ms at N = 1 (bench.gateway's target), <= 15 ms at N = 8 on 2 cores.
- Runs before the first refusal: runs registered (each answering one call) until the broker
  refuses one or RUNS_CAP is reached. Target: >= 500.

- Real runs (issue 31): N = 25, 50, 100 detached `flowerbox once` runs of the real Claude Code
  CLI through one broker, all waiting on a long-thinking model at once: memory per run (box,
  broker share, host keeper), CPU while they wait, time to start all, how many achieved.
  Target: 100 runs, all achieved, <= 150 MiB per run (bench/_manycli.py says what is counted).

Needs the engine and the image (as bench.box; FLOWERBOX_IMAGE names another tag); run as it is
(as root here, boxes run as uid 0). `--smoke`: 2 boxes living 8 s, 5 calls per client, 5 runs,
2 real runs with replies held 0.5 s, the targets not judged (python -m bench --smoke). `--cli`:
the real runs alone; `--sizes 2,10`: those N; `--hold S`: each reply held S seconds;
`--at-once K`: K runs starting at once (3).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docker import DockerClient  # noqa: TID251 - the benchmark weighs the containers itself
from docker.errors import DockerException  # noqa: TID251

from bench import _args, _manycli
from flower.testing import Always, FakeAPI, Usage, text
from flowerbox import wire
from flowerbox.broker import client
from flowerbox.broker.control import Registration
from flowerbox.errors import BrokerError

KEY = "sk-bench-real-key"
BOXES = 8
CALLS = 200
RUNS_CAP = 1000
TARGET_MEMORY_RATIO = 0.75
TARGET_MS = {1: 5.0, 8: 15.0}
TARGET_RUNS = 500


@dataclass(frozen=True)
class Size:
    """How much is measured: boxes at once, calls per client, the runs cap, and how long a
    box lives and settles before its memory is read (seconds)."""

    boxes: int = BOXES
    calls: int = CALLS
    runs_cap: int = RUNS_CAP
    box_seconds: int = 60
    settle: float = 5.0


SMOKE = Size(boxes=2, calls=5, runs_cap=5, box_seconds=8, settle=1.0)
BODY = json.dumps(
    {"model": "claude-opus-5-5", "max_tokens": 100, "messages": [{"role": "user", "content": "x"}]}
).encode()
# argv[1]: seconds to live; argv[2]: "work" (calls in a loop) or "idle" (sleeps).
CLIENT = """
import http.client, json, os, sys, time
end = time.monotonic() + float(sys.argv[1])
body = json.dumps({"model": "claude-opus-5-5", "max_tokens": 100,
                   "messages": [{"role": "user", "content": "x"}]})
print("up", flush=True)
while time.monotonic() < end:
    if sys.argv[2] == "idle":
        time.sleep(0.5)
        continue
    c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=60)
    c.request("POST", "/v1/messages?beta=true", body=body,
              headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"]})
    c.getresponse().read()
    c.close()
"""


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=60)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(str(self.path))


def timed(connect: Callable[[], http.client.HTTPConnection], key: str) -> float:
    started = time.perf_counter()
    conn = connect()
    try:
        conn.request("POST", "/v1/messages?beta=true", body=BODY, headers={"x-api-key": key})
        response = conn.getresponse()
        response.read()
    finally:
        conn.close()
    assert response.status == 200, response.status
    return time.perf_counter() - started


class Broker:
    """`python -m flowerbox broker` in a private state folder."""

    def __init__(self, root: Path, api: FakeAPI) -> None:
        self.root = root
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")} | {
            "XDG_STATE_HOME": str(root / "s"),
            "ANTHROPIC_API_KEY": KEY,
            "ANTHROPIC_BASE_URL": api.url,
        }
        self.folder = root / "s" / "flowerbox" / "broker"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "flowerbox", "broker"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self.env,
        )
        while not client.running(self.folder):
            assert self.process.poll() is None, "the broker did not start"
            time.sleep(0.05)
        self.registered = 0

    def register(self) -> tuple[str, Path]:
        """A new run's token and socket folder."""
        n = self.registered
        self.registered += 1
        sockets = Path(tempfile.mkdtemp(prefix="r", dir=self.root))
        run_id = f"20261202-000000-{n:06x}"
        token = client.register(
            self.folder, Registration(run_id, sockets, self.root / "g" / str(n))
        )
        return token, sockets

    def rss(self) -> int:
        """The broker's resident memory, bytes."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)


def latency(broker: Broker, api: FakeAPI, clients: int, calls: int) -> tuple[float, float]:
    """Median seconds per call, straight and through the broker, `clients` at once."""
    runs = [broker.register() for _ in range(clients)]
    direct: list[float] = []
    brokered: list[float] = []

    def one(n: int) -> None:
        token, sockets = runs[n]
        for i in range(calls + 10):
            a = timed(lambda: http.client.HTTPConnection("127.0.0.1", api.port, timeout=60), KEY)
            b = timed(lambda: UnixConnection(sockets / wire.API_SOCKET), token)
            if i >= 10:  # the first ones warm up both paths
                direct.append(a)
                brokered.append(b)

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(clients)))
    return statistics.median(direct), statistics.median(brokered)


def runs_before_refusal(broker: Broker, cap: int) -> int:
    served = 0
    while served < cap:
        try:
            token, sockets = broker.register()
            timed(lambda path=sockets / wire.API_SOCKET: UnixConnection(path), token)
        except (BrokerError, OSError, AssertionError):
            break
        served += 1
    return served


def box_memory(root: Path, env: dict[str, str], mode: str, docker: DockerClient, size: Size) -> int:
    """Bytes of memory of `size.boxes` boxes running CLIENT in `mode`, sampled once all are up."""
    seconds = size.box_seconds
    processes = []
    for n in range(size.boxes):
        ws = root / f"{mode}-{n}-{len(list(root.iterdir()))}"
        ws.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
        command = ["shell", "--", "python3", "-c", CLIENT, str(seconds), mode]
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "flowerbox", *command],
                cwd=ws,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        )
    for process in processes:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "up", "a box did not start"
    time.sleep(size.settle)  # settled: the CLI's caches warm, the working ones at full pace
    total = 0
    for container in docker.containers.list(filters={"label": wire.BOX_LABEL}):
        if str(root) in container.labels.get(wire.WORKSPACE_LABEL, ""):
            total += _memory(_stats(docker, container.id))
    for process in processes:
        process.wait(timeout=seconds + 60)
        if process.stdout is not None:
            process.stdout.close()
    return total


def memory_per_box(root: Path, broker: Broker, size: Size) -> bool:
    """Print the memory per box, idle and working, through the broker and alone; whether
    the target holds (True when skipped: no engine)."""
    try:
        docker = DockerClient.from_env(timeout=120)
        docker.ping()
    except DockerException as exc:
        print(f"memory per box: skipped, no engine ({exc}): bash docker/prepare.sh")
        return True
    before = broker.rss()
    memory = {}
    for mode in ("idle", "work"):
        boxes = box_memory(root, broker.env, mode, docker, size)
        shared = max(broker.rss() - before, 0)
        alone = broker.env | {"XDG_STATE_HOME": str(root / "p")}
        private = box_memory(root, alone, mode, docker, size)
        memory[mode] = ((boxes + shared) / size.boxes, private / size.boxes)
    ok = True
    print(f"memory per box, {size.boxes} at once (MiB):")
    for mode, (through, alone) in memory.items():
        ratio = through / alone
        ok &= ratio <= TARGET_MEMORY_RATIO
        print(
            f"  {mode:5}: {through / 2**20:6.1f} through the broker,"
            f" {alone / 2**20:6.1f} with a private gateway: {ratio:.2f}x"
            f" (target <= {TARGET_MEMORY_RATIO}x)"
        )
    return ok


def _stats(docker: DockerClient, container: str) -> dict[str, Any]:
    """The engine's figures for a running container (it answers nothing, now and then, for
    one under load: asked again)."""
    for _ in range(5):
        try:
            stats: dict[str, Any] = docker.api.stats(container, stream=False, one_shot=True)
            return stats
        except (DockerException, ValueError):
            time.sleep(1)
    raise RuntimeError(f"no memory figure for container {container}")


def _memory(stats: dict[str, Any]) -> int:
    memory = stats.get("memory_stats") or {}
    cache = (memory.get("stats") or {}).get("inactive_file", 0)
    return int(memory.get("usage", 0)) - int(cache)


def main(
    *, smoke: bool = False, cli: bool | None = None, size: _manycli.CliSize | None = None
) -> int:
    """The broker's figures and the real-CLI runs (`cli=True`: those alone, `False`: not) at
    `size` (the smoke's or the full one by default)."""
    image = os.environ.get("FLOWERBOX_IMAGE", "flowerbox:dev")
    ok = True
    if cli is not True:
        ok &= broker_figures(smoke)
    if cli is not False:
        ok &= _manycli.main(size or (_manycli.CLI_SMOKE if smoke else _manycli.CliSize()), image)
    return 0 if ok or smoke else 1


def broker_figures(smoke: bool) -> bool:
    """Latency, memory per box and runs before refusal; whether their targets hold."""
    size = SMOKE if smoke else Size()
    ok = True
    reply = text("hi", usage=Usage(1000, 100))
    root = Path(tempfile.mkdtemp(prefix="fbx-many-", dir="/tmp"))
    try:
        with FakeAPI(Always(reply), api_key=KEY) as api:
            (root / "b").mkdir()
            broker = Broker(root / "b", api)
            try:
                print(f"broker latency per call, median of {size.calls} per client (ms):")
                for clients in (1, size.boxes):
                    target = TARGET_MS[1 if clients == 1 else BOXES]
                    d, b = latency(broker, api, clients, size.calls)
                    added = (b - d) * 1000
                    ok &= added <= target
                    print(
                        f"  N = {clients}: {d * 1000:6.2f} straight, {b * 1000:6.2f} through"
                        f" the broker: +{added:.2f} ms (target <= {target} ms)"
                    )
                ok &= memory_per_box(root, broker, size)
                served = runs_before_refusal(broker, size.runs_cap)
                ok &= served >= TARGET_RUNS
                cap = " (no refusal up to the cap)" if served >= size.runs_cap else ""
                print(
                    f"runs one broker serves before its first refusal: {served}{cap};"
                    f" broker memory then {broker.rss() / 2**20:.0f} MiB"
                    f" (target >= {TARGET_RUNS})"
                )
            finally:
                broker.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return ok


if __name__ == "__main__":
    args = _args.parse(
        "bench.many",
        __doc__,
        ("--cli", {"action": "store_true", "help": "the real-CLI runs alone"}),
        ("--sizes", {"help": "the real-CLI runs' sizes, e.g. 25,50,100"}),
        ("--hold", {"type": float, "help": "seconds the model holds each reply"}),
        ("--at-once", {"type": int, "help": "runs starting at once"}),
    )
    base = _manycli.CLI_SMOKE if args.smoke else _manycli.CliSize()
    size = _manycli.sized(args.sizes, args.hold, args.at_once, base)
    sys.exit(main(smoke=args.smoke, cli=True if args.cli else None, size=size))
