"""Cold starts of the commands a person waits on (issue 31): `flower --help`, `flower status`,
`flowerbox --version`, `--help` and `ps`, against `flower --version` in the same run.

Each round starts every command once, as a new process through its console script (the
page cache warm, as for a person who typed one a minute ago), in a folder with an empty
runs/ and a private flowerbox state; the figure is the median of the rounds. Targets:
flowerbox's three <= 1.3x `flower --version`; `flower --help` and `flower status` <= 0.3 s,
each line says PASS or MISS. Wall time is the figure a person waits; the CPU time (user +
system) of the same starts is printed beside it, the steadier figure on a loaded machine,
with the load average. `--smoke`: one round, the verdicts printed but not judged (python -m
bench --smoke).

    python -m bench.cli
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import _args

ROUNDS = 11
SMOKE_ROUNDS = 1
BASELINE = "flower --version"
RATIO_TARGET = 1.3  # flowerbox's commands, as a multiple of the baseline
SECONDS_TARGET = 0.3  # flower's own
TARGETS = {
    "flower --help": ("s", SECONDS_TARGET),
    "flower status": ("s", SECONDS_TARGET),
    "flowerbox --version": ("x", RATIO_TARGET),
    "flowerbox --help": ("x", RATIO_TARGET),
    "flowerbox ps": ("x", RATIO_TARGET),
}


def command(line: str) -> list[str]:
    """The console script next to this Python (what a person runs), and its arguments."""
    name, *args = line.split()
    script = Path(sys.executable).parent / name
    if script.is_file():
        return [str(script), *args]
    return [sys.executable, "-m", f"{name}.cli" if name == "flower" else name, *args]


def children_cpu() -> float:
    """The CPU seconds (user + system) of this process's ended children so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def seconds(line: str, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU time of one start of `line`, which must succeed."""
    cpu = children_cpu()
    started = time.perf_counter()
    done = subprocess.run(command(line), cwd=cwd, env=env, capture_output=True, timeout=60)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{line} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return elapsed, children_cpu() - cpu


def measure(rounds: int) -> dict[str, list[tuple[float, float]]]:
    times: dict[str, list[tuple[float, float]]] = {line: [] for line in (BASELINE, *TARGETS)}
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        root = Path(tmp)
        (root / "runs").mkdir()
        env = {**os.environ, "XDG_STATE_HOME": str(root / "state"), "NO_COLOR": "1"}
        # An installed package has its bytecode (pip compiles it): written in the first
        # round, to a folder of this run's (the checkout stays clean), even where the
        # caller's environment says not to write any (PYTHONDONTWRITEBYTECODE, which would
        # have every start compile flower's and flowerbox's sources again).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(root / "bytecode")
        for line in times:  # once each first: the page cache, the bytecode
            seconds(line, root, env)
        for _ in range(rounds):
            for line, found in times.items():
                found.append(seconds(line, root, env))
    return times


def medians(found: list[tuple[float, float]]) -> tuple[float, float]:
    """The median wall and the median CPU time."""
    return statistics.median(w for w, _ in found), statistics.median(c for _, c in found)


def main(*, smoke: bool = False) -> int:
    rounds = SMOKE_ROUNDS if smoke else ROUNDS
    load = os.getloadavg()[0]
    times = measure(rounds)
    base, base_cpu = medians(times[BASELINE])
    print(
        f"cold start, median of {rounds} (wall seconds and x {BASELINE}; CPU ms and x), "
        f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after:"
    )
    print(f"  {BASELINE:20} {base:6.3f}  1.00x  {base_cpu * 1000:4.0f} ms  1.00x  (the baseline)")
    ok = True
    for line, (unit, target) in TARGETS.items():
        median, cpu = medians(times[line])
        ratio = median / base
        met = (ratio if unit == "x" else median) <= target
        ok &= met
        goal = f"<= {target}x" if unit == "x" else f"<= {target} s"
        print(
            f"  {line:20} {median:6.3f} {ratio:5.2f}x  {cpu * 1000:4.0f} ms {cpu / base_cpu:5.2f}x"
            f"  {'PASS' if met else 'MISS'} (target {goal})"
        )
    return 0 if ok or smoke else 1


if __name__ == "__main__":
    sys.exit(main(smoke=_args.parse("bench.cli", __doc__).smoke))
