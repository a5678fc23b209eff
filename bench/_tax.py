"""gVisor's workload tax, for bench.box: the same three jobs an agent runs all day, timed
inside a container of the image under runc and under runsc, in the same run.

- `git status` in a repository of FILES files (10k; the box's workspace is a bind mount, so
  is this one: under gVisor every stat goes through its file proxy),
- a small pytest run (TESTS tests in one file),
- a `pip install` of a local wheel (MODULES modules) into a folder.

Each job runs REPEATS times after one warm-up, in one container per runtime (the container's
start is bench.box's other figure), the two runtimes' rounds interleaved so both see the same
machine; the figure is the median, and the tax is runsc/runc.
pytest and pip are the benchmark's own (this virtualenv's), mounted read-only: the image
carries neither.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from docker import DockerClient  # noqa: TID251 - the benchmark runs its containers itself

FILES, TESTS, MODULES, REPEATS = 10_000, 50, 200, 5
SMOKE = {"files": 500, "tests": 5, "modules": 10, "repeats": 1}
RUNTIMES = ("runc", "runsc")
TOOLS = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pip", "py.py")
IN_BOX = "/bench"
# Runs inside a container (`docker exec`): each job once, its seconds as JSON.
TIMER = """
import json, subprocess, sys, time
jobs, round_ = json.loads(sys.argv[1]), sys.argv[2]
seconds = {}
for name, argv in jobs.items():
    started = time.perf_counter()
    args = [arg.replace("{i}", round_) for arg in argv]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds[name] = time.perf_counter() - started
print(json.dumps(seconds))
"""
JOBS = {
    "git status": ["git", "-c", "safe.directory=*", "-C", f"{IN_BOX}/repo", "status", "-s"],
    "pytest": [
        *("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{IN_BOX}/tests"),
        *("--rootdir", f"{IN_BOX}/tests"),
    ],
    "pip install": [
        *("python", "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-cache-dir"),
        *("--target", "/tmp/pip-{i}", f"{IN_BOX}/tiny-1.0-py3-none-any.whl"),
    ],
}


def _repository(root: Path, files: int) -> None:
    """`files` small files in folders of 100, committed."""
    for n in range(files):
        folder = root / f"d{n // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n:05d}.txt").write_text(f"{n}\n")
    # no auto gc: it would pack the objects in the background, under the timed `git status`
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "gc.auto=0"]
    for command in (["init", "-q"], ["add", "-A"], [*identity, "commit", "-q", "-m", "files"]):
        subprocess.run(["git", *command], cwd=root, check=True, capture_output=True)


def _tests(root: Path, tests: int) -> None:
    root.mkdir()
    body = "".join(
        f"def test_{n}():\n    assert sum(range({n})) == {n * (n - 1) // 2}\n\n"
        for n in range(tests)
    )
    (root / "test_small.py").write_text(body)


def _wheel(path: Path, modules: int) -> None:
    """A pure-Python wheel of `modules` small modules, written as a wheel is laid out."""
    info = "tiny-1.0.dist-info"
    files = {f"tiny/m{n:03d}.py": f"VALUE = {n}\n" for n in range(modules)}
    files["tiny/__init__.py"] = ""
    files[f"{info}/METADATA"] = "Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n"
    files[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)


def _tools(root: Path) -> None:
    """pytest and pip from this virtualenv, for a PYTHONPATH in the container."""
    spec = importlib.util.find_spec("pytest")
    assert spec is not None and spec.origin is not None
    site = Path(spec.origin).parents[1]
    root.mkdir()
    for name in TOOLS:
        source = site / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.is_file():
            shutil.copy2(source, root / name)


def prepare(root: Path, *, files: int, tests: int, modules: int) -> None:
    """The jobs' inputs under `root` (mounted at IN_BOX)."""
    _repository(root / "repo", files)
    _tests(root / "tests", tests)
    _wheel(root / "tiny-1.0-py3-none-any.whl", modules)
    _tools(root / "tools")


def _container(client: DockerClient, image: str, runtime: str, root: Path) -> Any:
    """A hardened container of `image` under `runtime`, idle: the jobs are exec'd in it."""
    return client.containers.run(
        image,
        ["sleep", "3600"],
        runtime=runtime,
        network_mode="none",
        user=f"{os.getuid()}:{os.getgid()}",
        read_only=True,
        tmpfs={"/tmp": "rw,nosuid,nodev,size=256m"},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        environment={
            "PYTHONPATH": f"{IN_BOX}/tools",
            "HOME": "/tmp",
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        volumes={str(root): {"bind": IN_BOX, "mode": "rw"}},
        init=True,
        detach=True,
    )


def timed(
    client: DockerClient, image: str, root: Path, repeats: int
) -> dict[str, dict[str, float]]:
    """runtime -> job -> median seconds: one container per runtime, the rounds interleaved
    (runc, runsc, runc, ...) after a warm-up round each, so both see the same machine."""
    boxes = {runtime: _container(client, image, runtime, root) for runtime in RUNTIMES}
    seen: dict[str, dict[str, list[float]]] = {r: {job: [] for job in JOBS} for r in RUNTIMES}
    try:
        for round_ in range(repeats + 1):
            for runtime, box in boxes.items():
                command = ["python", "-c", TIMER, json.dumps(JOBS), str(round_)]
                code, output = box.exec_run(command)
                if code != 0:
                    raise RuntimeError(f"a job failed under {runtime}: {output[-2000:]!r}")
                if round_:  # round 0 warms up (page cache, first imports)
                    for job, seconds in json.loads(output).items():
                        seen[runtime][job].append(float(seconds))
    finally:
        for box in boxes.values():
            box.remove(force=True)
    return {
        r: {job: statistics.median(times) for job, times in jobs.items()}
        for r, jobs in seen.items()
    }
