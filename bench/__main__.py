"""Run every benchmark module in this folder, one after the other.

    python -m bench            each at its full size, in this process; targets judged
    python -m bench --smoke    each at a tiny size, in a process of its own and in every
                               language its fake model must route in (a module's LANGUAGES,
                               else en), two at a time (mostly they wait on the CLI): each
                               must finish and print its figure lines, so a benchmark that
                               no longer runs fails CI (.ci/run) instead of rotting. Targets
                               are not judged at that size, nor under that load.

The smoke runs the engine's benchmarks (bench.box, bench.many) on the image FLOWERBOX_IMAGE
names (default flowerbox:dev) when an engine answers, and fails if one of them skips its
engine part then; without an engine it says that they were skipped.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from bench import _args

SMOKE_TIMEOUT_S = 600  # one module in one language
SMOKE_AT_ONCE = 2
# The longest first, so the two lanes end together (seconds measured at smoke size here).
SMOKE_ORDER = ("chaosbox", "chaos", "faults", "many", "box")
FIGURE = re.compile(r"target|\[(?:ok|MISSED)\]")  # a line that states a figure and its target
SKIPPED = re.compile(r"\bskipped\b")


def names() -> list[str]:
    found = pkgutil.iter_modules([str(Path(__file__).parent)])
    return sorted(info.name for info in found if not info.name.startswith("_"))


def main() -> int:
    failures = 0
    for name in names():
        print(f"\n=== bench.{name} ===", flush=True)
        module = importlib.import_module(f"bench.{name}")
        failures += 0 if module.main() == 0 else 1
    return 1 if failures else 0


def engine_answers() -> bool:
    """Whether a Docker engine answers here (the engine's benchmarks must then run)."""
    # lazy: only the smoke asks, and the docker SDK is a benchmark's import, not the runner's
    from docker import DockerClient  # noqa: TID251 - the smoke asks the engine itself
    from docker.errors import DockerException  # noqa: TID251

    try:
        client = DockerClient.from_env(timeout=10)
    except DockerException:
        return False
    try:
        return bool(client.ping())
    except DockerException:
        return False
    finally:
        client.close()


def smoke_one(name: str, lang: str, *, engine: bool) -> tuple[bool, str]:
    """`python -m bench.NAME --smoke` in `lang`: it must exit 0 and print a figure line, and,
    when an engine answers, skip nothing. Whether it passed, and its report."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", f"bench.{name}", "--smoke"],
            env={**os.environ, "FLOWER_LANG": lang},
            capture_output=True,
            text=True,
            timeout=SMOKE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return False, f"bench.{name} [{lang}] FAILED (still running after {SMOKE_TIMEOUT_S} s)"
    took = time.monotonic() - started
    lines = done.stdout.splitlines()
    figures = [line.strip() for line in lines if FIGURE.search(line)]
    skipped = [line.strip() for line in lines if SKIPPED.search(line)]
    problem = (
        f"exit {done.returncode}"
        if done.returncode
        else "no figure line"
        if not figures
        else f"an engine answers, yet it skipped: {skipped[0]}"
        if engine and skipped
        else ""
    )
    verdict = f"FAILED ({problem})" if problem else "ok"
    report = [f"bench.{name} [{lang}] {verdict} in {took:.0f} s"]
    report += [f"    {line}" for line in figures]
    report += [f"    no engine here: {line}" for line in (skipped if not problem else [])]
    if problem:
        report.append(done.stdout[-3000:] + done.stderr[-3000:])
    return not problem, "\n".join(report)


def longest_first(name: str) -> tuple[int, str]:
    """The smoke's order: SMOKE_ORDER's first, then by name."""
    return (SMOKE_ORDER.index(name) if name in SMOKE_ORDER else len(SMOKE_ORDER), name)


def smoke() -> int:
    engine = engine_answers()
    print(f"smoke: every benchmark at a tiny size; engine {'answers' if engine else 'absent'}")
    started = time.monotonic()
    jobs = []
    for name in sorted(names(), key=longest_first):
        module = importlib.import_module(f"bench.{name}")
        jobs += [(name, lang) for lang in getattr(module, "LANGUAGES", ("en",))]
    failed = []
    with ThreadPoolExecutor(SMOKE_AT_ONCE) as pool:
        running = {
            pool.submit(smoke_one, name, lang, engine=engine): (name, lang) for name, lang in jobs
        }
        for future in as_completed(running):
            passed, report = future.result()
            print(report, flush=True)
            if not passed:
                name, lang = running[future]
                failed.append(f"bench.{name} [{lang}]")
    took = time.monotonic() - started
    print(f"\nsmoke: {'all passed' if not failed else 'FAILED: ' + ', '.join(failed)}", end="")
    print(f" in {took:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(smoke() if _args.parse("bench", __doc__).smoke else main())
