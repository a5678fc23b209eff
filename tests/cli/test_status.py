"""`flower status` on run dirs a real `flower once` left, live and at rest."""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flower.core.inbox import write_asks
from flower.core.manifest import record_rows
from flower.testing import FakeAPI, sequence, text, tool

FLOWER = [sys.executable, "-m", "flower.cli"]
LEAKY = ("ANTHROPIC_", "CLAUDE_", "FLOWER_")


def offline_env(home: Path, api: FakeAPI | None = None) -> dict[str, str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "FLOWER_"))
    }
    served = api.env(home=home) if api is not None else {"HOME": str(home)}
    return {**base, **served, "XDG_CONFIG_HOME": str(home / ".config"), "COLUMNS": "200"}


def flower(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOWER, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def run_dir(fake_api: FakeAPI, claude_home: Path, workspace: Path) -> Path:
    """The run dir of a real two-tool `flower once` against the fake API."""
    fake_api.script = sequence(
        tool("Bash", {"command": "echo hello", "description": "greet"}),
        tool("Write", {"file_path": str(workspace / "a.md"), "content": "# a\n"}),
        text("done"),
    )
    runs = workspace.parent / "runs"
    done = flower(
        "once",
        "greet",
        "-w",
        str(workspace),
        "--run-dir",
        str(runs),
        env=offline_env(claude_home, fake_api),
        cwd=workspace.parent,
    )
    assert done.returncode == 0, done.stderr
    return runs


def test_status_of_a_real_run(run_dir: Path, claude_home: Path) -> None:
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    (row,) = json.loads((run_dir / "manifest.json").read_text())
    done = flower("status", str(run_dir), env=offline_env(claude_home), cwd=run_dir.parent)
    assert done.returncode == 0, done.stderr
    assert "once" in done.stdout and "yes" in done.stdout
    assert row["session_id"][:8] in done.stdout
    assert f"total cost: ${row['cost_usd']:.4f}" in done.stdout
    # Nothing written, not even SQLite's -shm/-wal beside a database at rest.
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


def test_status_json_is_the_same_data(run_dir: Path, claude_home: Path) -> None:
    (row,) = json.loads((run_dir / "manifest.json").read_text())
    done = flower(
        "status", str(run_dir), "--json", env=offline_env(claude_home), cwd=run_dir.parent
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    (step,) = data["steps"]
    assert step["step"] == "once" and step["ok"] is True
    assert step["session_id"] == row["session_id"] and step["num_turns"] == 3
    (session,) = data["sessions"]
    assert session["session_id"] == row["session_id"] and session["steps"] == ["once"]
    assert session["entries"] > 10 and session["subagents"] == 0
    assert data["total_cost_usd"] == pytest.approx(row["cost_usd"])
    assert data["pending_asks"] == [] and data["errors"] == [] and data["problems"] == []


def test_pending_questions_show_with_their_ids(tmp_path: Path, claude_home: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    ask = {
        "id": "q7",
        "question": "Which database should the service use?",
        "options": ["sqlite", "postgres"],
        "asked_at": time.time(),
    }
    write_asks(runs, [ask])
    shown = flower("status", str(runs), env=offline_env(claude_home), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "waiting for you" in shown.stdout and "q7" in shown.stdout
    assert "Which database should the service use?" in shown.stdout
    assert "sqlite / postgres" in shown.stdout and '"answer": "q7"' not in shown.stdout
    data = json.loads(
        flower("status", str(runs), "--json", env=offline_env(claude_home), cwd=tmp_path).stdout
    )
    assert data["pending_asks"] == [ask]


def test_failed_attempts_are_listed(tmp_path: Path, claude_home: Path) -> None:
    runs = tmp_path / "runs"
    row = {"step": "build", "ok": False, "error": "Invalid API key", "errors": ["HTTP 529"]}
    record_rows(runs / "manifest.json", [row], run="r1")
    done = flower("status", str(runs), env=offline_env(claude_home), cwd=tmp_path)
    assert done.returncode == 0
    assert "Invalid API key" in done.stdout and "build: HTTP 529" in done.stdout


def test_a_missing_run_dir_exits_two(tmp_path: Path, claude_home: Path) -> None:
    done = flower("status", str(tmp_path / "nope"), env=offline_env(claude_home), cwd=tmp_path)
    assert done.returncode == 2
    assert "no run directory at" in done.stderr and "default ./runs" in done.stderr


def test_a_locked_database_is_a_problem_line_not_a_crash(tmp_path: Path, claude_home: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    record_rows(runs / "manifest.json", [{"step": "s", "ok": True}], run="r1")
    # A rollback-journal database held exclusively: the worst a reader can meet.
    holder = sqlite3.connect(runs / "sessions.db", isolation_level=None)
    try:
        holder.execute("CREATE TABLE meta (store_key TEXT, mtime INTEGER, next_seq INTEGER)")
        holder.execute("CREATE TABLE entries (store_key TEXT, seq INTEGER, payload TEXT)")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("INSERT INTO meta VALUES ('p/s', 1, 1)")
        (runs / "sessions.db-wal").touch()  # look live, so the reader takes locks
        done = flower("status", str(runs), "--json", env=offline_env(claude_home), cwd=tmp_path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["steps"][0]["step"] == "s" and data["sessions"] == []
    (problem,) = data["problems"]
    assert "sessions.db is busy" in problem and "locked" in problem
    assert "retry in a moment" in problem


class Following:
    """`flower status --follow` in a subprocess, its stdout read by a thread, so a test can
    wait for a line with a deadline; killed on exit if the test did not end it."""

    def __init__(self, *args: str, env: dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [*FLOWER, "status", *args],
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._queue: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line)

    def wait_for(self, needle: str, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while not any(needle in line for line in self.seen):
            try:
                self.seen.append(self._queue.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                return False
        return True

    def interrupt(self) -> int:
        """Ctrl+C, as a terminal sends it; the exit status."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=10)

    def __enter__(self) -> Following:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()


def test_follow_redraws_when_the_manifest_changes_and_ctrl_c_exits_zero(
    tmp_path: Path, claude_home: Path
) -> None:
    runs = tmp_path / "runs"
    record_rows(runs / "manifest.json", [{"step": "first-step", "ok": True}], run="r1")
    env = offline_env(claude_home)
    with Following(str(runs), "--follow", "--json", env=env, cwd=tmp_path) as follow:
        assert follow.wait_for("first-step"), follow.seen
        rows = [{"step": "first-step", "ok": True}, {"step": "second-step", "ok": False}]
        record_rows(runs / "manifest.json", rows, run="r1")
        assert follow.wait_for("second-step"), follow.seen
        assert json.loads(follow.seen[-1])["steps"][1]["step"] == "second-step"
        assert follow.interrupt() == 0


def test_follow_in_tables_redraws_too(tmp_path: Path, claude_home: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    with Following(str(runs), "-f", env=offline_env(claude_home), cwd=tmp_path) as follow:
        assert follow.wait_for("no step has finished yet"), follow.seen
        write_asks(runs, [{"id": "q1", "question": "Go on?", "options": [], "asked_at": 0}])
        assert follow.wait_for("Go on?"), follow.seen
        assert follow.interrupt() == 0
