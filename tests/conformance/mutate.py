"""Run the mutation registry (tests/conformance/mutations.py): each mutation breaks one seed
statement of docs/conformance.md in a scratch copy of the source tree, and the tests its row
names must then fail (issue 35: "each conformance test fails under the mutation of its
statement").

    python -m tests.conformance.mutate [--row ID ...] [--only-new] [--phase quick|cli] [-j N]
                                       [--no-baseline] [--results FILE [--resume]]

The checkout is never edited. Each worker gets a copy of the tree (git's tracked and
untracked-but-not-ignored files, made a git repository of its own: some tests ask git about
their checkout) and a virtualenv of its own whose only link to the checkout's .venv is a path
to its site-packages: the editable install of flowerbox (a .pth there) is not read, so
nothing can import the checkout's code, whatever environment a test gives its subprocesses;
the copy is on the scratch virtualenv's path instead. Before a mutation's tests run, the
scratch interpreter imports the mutated module and the runner checks it is the copy's file
and holds the mutated text (otherwise a "survived" would prove nothing).

A baseline run of the selected tests on the unmutated copy comes first: a test that fails
anyway would "kill" every mutation. Mutations whose tests drive the real CLI run last (they
take minutes under load; `--phase` picks one of the two groups). `--results FILE` appends
each verdict as a JSON line; with `--resume`, mutations that file records as killed are
skipped (the registry is run in batches). Exit 0 only when every selected mutation is
killed, every snippet occurs exactly once in the checkout, and the baseline passes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.conformance.mutations import MUTATIONS, Mutation

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 900  # a hanging mutant counts as killed, but not after more than this


def stale(mutation: Mutation, root: Path = ROOT) -> str | None:
    """Why `mutation` no longer fits the source at `root` (None when its snippet occurs
    exactly once): a refactor that moves the code fails the registry loudly."""
    path = root / mutation.file
    if not path.is_file():
        return f"{mutation.file}: no such file"
    found = path.read_text(encoding="utf-8").count(mutation.old)
    if found != 1:
        return f"{mutation.file}: the original snippet occurs {found} times, not once"
    if mutation.old == mutation.new:
        return f"{mutation.file}: the replacement is the original"
    return None


def _tree_files(root: Path) -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout
    return [name for name in listed.decode().split("\0") if name and (root / name).is_file()]


@dataclass
class Scratch:
    """One worker's copy of the tree and the interpreter that imports it, not the checkout."""

    src: Path
    python: Path

    @classmethod
    def make(cls, base: Path, root: Path = ROOT) -> Scratch:
        src = base / "src"
        for name in _tree_files(root):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, src / name)
        git = ["git", "-C", str(src), "-c", "user.name=mutate", "-c", "user.email=m@localhost"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "scratch"], check=True)
        venv = base / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = venv / "bin" / "python"
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # The copy first, then the checkout venv's packages (a path line: the .pth files in
        # that folder, the editable install among them, are not processed).
        ours = sysconfig.get_paths()["purelib"]
        Path(purelib, "_mutate.pth").write_text(f"{src}\n{ours}\n", encoding="utf-8")
        scratch = cls(src, python)
        scratch.check_imports("flower", "flowerbox", "tests")
        return scratch

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # a restored file never meets a mutant's .pyc
        env["PATH"] = f"{self.python.parent}{os.pathsep}{env.get('PATH', '')}"
        return env

    def check_imports(self, *modules: str, holds: str | None = None) -> None:
        """The scratch interpreter finds `modules` in the copy (and the first one's source
        holds `holds`), from a neutral folder with no PYTHONPATH: else the run proves nothing.
        (find_spec resolves the file an import would load, importing only the parents.)"""
        code = (
            "import importlib.util, sys\n"
            "for name in sys.argv[1:]:\n"
            "    print(importlib.util.find_spec(name).origin)\n"
        )
        done = subprocess.run(
            [str(self.python), "-P", "-c", code, *modules],
            capture_output=True,
            text=True,
            cwd=tempfile.gettempdir(),
            env=self.env(),
            check=False,
        )
        files = done.stdout.split()
        if done.returncode != 0 or len(files) != len(modules):
            raise RuntimeError(f"the scratch interpreter cannot import {modules}: {done.stderr}")
        for name, file in zip(modules, files, strict=True):
            if not Path(file).resolve().is_relative_to(self.src.resolve()):
                raise RuntimeError(f"{name} was imported from {file}, not the scratch copy")
        if holds is not None and holds not in Path(files[0]).read_text(encoding="utf-8"):
            raise RuntimeError(f"{files[0]} does not hold the mutation")

    def pytest(self, tests: list[str], workers: int = 1) -> tuple[int, str]:
        command = [str(self.python), "-P", "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
        if workers > 1:
            command += ["-n", str(workers), "--dist", "loadgroup"]
        command += ["-o", "addopts=--strict-markers", *(f"tests/{t}" for t in tests)]
        try:
            done = subprocess.run(
                command,
                cwd=self.src,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return -1, f"timed out after {TIMEOUT_S} s"
        return done.returncode, (done.stdout + done.stderr)


def module_of(file: str) -> str | None:
    """The dotted name of a .py file of the packages, else None (a data file)."""
    if not file.endswith(".py"):
        return None
    parts = file[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def apply(scratch: Scratch, mutation: Mutation) -> tuple[str, str]:
    """Run `mutation`'s tests with it applied to the copy, restored after: (verdict, detail)."""
    path = scratch.src / mutation.file
    original = path.read_text(encoding="utf-8")
    path.write_text(original.replace(mutation.old, mutation.new, 1), encoding="utf-8")
    try:
        if (module := module_of(mutation.file)) is not None:
            scratch.check_imports(module, holds=mutation.new)
        code, output = scratch.pytest(list(mutation.tests))
    except RuntimeError as exc:  # the mutant does not import: no meaningful break
        return "error", str(exc)
    finally:
        path.write_text(original, encoding="utf-8")
    last = output.strip().splitlines()[-1] if output.strip() else ""
    if code == 1 and " failed" in f" {last}":
        return "killed", last
    if code == 1:  # only errors (a fixture's setup, say): no test saw the mutant and failed
        return "error", output[-2000:]
    if code == -1:
        return "killed", output
    if code == 0:
        return "survived", last
    return "error", f"pytest exit {code}: {output[-2000:]}"


def select(rows: list[str], only_new: bool, registry: list[Mutation]) -> list[Mutation]:
    chosen = [m for m in registry if not rows or m.row in rows]
    chosen = [m for m in chosen if not (only_new and m.hand)]
    return sorted(chosen, key=slow)  # stable: the registry's order within each group


def slow(mutation: Mutation) -> bool:
    """Whether a test of `mutation` drives the real CLI (minutes each under load)."""
    return any(mark in t for t in mutation.tests for mark in ("_cli.py", "cli/", "survival"))


def identity(mutation: Mutation) -> str:
    """A mutation's name in a results file: its row and a digest of what it changes."""
    what = json.dumps([mutation.file, mutation.old, mutation.new])
    return f"{mutation.row}#{hashlib.sha256(what.encode()).hexdigest()[:12]}"


def killed_before(results: Path) -> set[str]:
    if not results.is_file():
        return set()
    lines = results.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return {r["id"] for r in records if r["verdict"] == "killed"}


def main(argv: list[str] | None = None, registry: list[Mutation] = MUTATIONS) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance.mutate", description=__doc__)
    parser.add_argument("--row", action="append", default=[], help="a row id, e.g. 000:305")
    parser.add_argument("--only-new", action="store_true", help="skip the 94 hand mutations")
    parser.add_argument(
        "--phase", choices=("quick", "cli"), help="only the quick mutations, or only the CLI's"
    )
    parser.add_argument("-j", type=int, default=1, help="workers (each runs one pytest)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    parser.add_argument("--results", type=Path, help="append each verdict here (JSON lines)")
    parser.add_argument("--resume", action="store_true", help="skip what --results killed")
    args = parser.parse_args(argv)
    chosen = select(args.row, args.only_new, registry)
    if args.phase is not None:
        chosen = [m for m in chosen if slow(m) == (args.phase == "cli")]
    if args.resume and args.results is not None:
        done = killed_before(args.results)
        chosen = [m for m in chosen if identity(m) not in done]
    if not chosen:
        print("no mutation matches", file=sys.stderr)
        return 2
    broken = [(m, why) for m in chosen if (why := stale(m)) is not None]
    for m, why in broken:
        print(f"STALE    {m.row}  {why}")
    runnable = [m for m in chosen if stale(m) is None]
    workers = max(1, min(args.j, len(runnable)))
    with tempfile.TemporaryDirectory(prefix="flower-mutate-") as tmp:
        scratches = [Scratch.make(Path(tmp, f"w{i}")) for i in range(workers)]
        free = list(scratches)
        lock = threading.Lock()
        counts = {"killed": 0, "survived": 0, "error": 0}

        def one(mutation: Mutation) -> None:
            with lock:
                scratch = free.pop()
            started = time.monotonic()
            try:
                verdict, detail = apply(scratch, mutation)
            finally:
                with lock:
                    free.append(scratch)
            with lock:
                counts[verdict] += 1
                took = time.monotonic() - started
                print(f"{verdict.upper():8} {mutation.row:10} {mutation.file}  ({took:.0f} s)")
                if verdict != "killed":
                    print(f"         {mutation.old!r} -> {mutation.new!r}\n         {detail}")
                sys.stdout.flush()
                if args.results is not None:
                    record = {"id": identity(mutation), "row": mutation.row, "verdict": verdict}
                    with args.results.open("a", encoding="utf-8") as f:
                        f.write(json.dumps({**record, "tests": list(mutation.tests)}) + "\n")

        # Two phases, each with its own baseline: the CLI-driven tests are slow, and a quick
        # phase should not wait for their baseline (nor fail with it).
        for phase in ([m for m in runnable if not slow(m)], [m for m in runnable if slow(m)]):
            tests = sorted({t for m in phase for t in m.tests})
            if phase and not args.no_baseline:
                code, output = scratches[0].pytest(tests, workers=workers)
                if code != 0:
                    print(f"BASELINE fails (exit {code}), {len(phase)} mutations not run:")
                    print(output[-3000:])
                    counts["error"] += len(phase)
                    continue
                print(f"baseline: {len(tests)} tests pass unmutated")
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(one, phase))
    print(
        f"summary: {len(chosen)} mutations, {counts['killed']} killed, "
        f"{counts['survived']} survived, {counts['error']} errors, {len(broken)} stale"
    )
    return 0 if counts["killed"] == len(chosen) and not broken else 1


if __name__ == "__main__":
    sys.exit(main())
