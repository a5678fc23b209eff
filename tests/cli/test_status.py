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
from flower.core.manifest import WriterLock, record_rows
from flower.core.rundir import RunDir
from flower.core.runlock import holding_the_run
from flower.core.times import iso_utc
from flower.testing import FakeAPI, sequence, text, tool
from tests.conftest import hearing_ctrl_c
from tests.json_contract import parse_document

FLOWER = [sys.executable, "-m", "flower.cli"]
LEAKY = ("ANTHROPIC_", "CLAUDE_", "FLOWER_")


def offline_env(home: Path, api: FakeAPI | None = None) -> dict[str, str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "FLOWER_")) or k == "FLOWER_LANG"
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
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}  # events/ too
    (row,) = json.loads((run_dir / "manifest.json").read_text())
    done = flower("status", str(run_dir), env=offline_env(claude_home), cwd=run_dir.parent)
    assert done.returncode == 0, done.stderr
    assert "once" in done.stdout and "是" in done.stdout  # ok: yes, in the suite's zh
    assert row["session_id"][:8] in done.stdout
    assert f"总花费:${row['cost_usd']:.4f}" in done.stdout  # the suite's zh (--lang)
    # Nothing written, not even SQLite's -shm/-wal beside a database at rest.
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


def test_status_json_is_the_same_data(run_dir: Path, claude_home: Path) -> None:
    (row,) = json.loads((run_dir / "manifest.json").read_text())
    done = flower(
        "status", str(run_dir), "--json", env=offline_env(claude_home), cwd=run_dir.parent
    )
    assert done.returncode == 0, done.stderr
    data = parse_document(done.stdout)
    (run,) = data["runs"]
    assert run["run_id"] == row["run"] and run["state"] == "done" and not data["live"]
    (step,) = run["steps"]
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
    assert "等你回答" in shown.stdout and "q7" in shown.stdout
    assert "Which database should the service use?" in shown.stdout
    assert "sqlite / postgres" in shown.stdout and '"answer": "q7"' not in shown.stdout
    data = parse_document(
        flower("status", str(runs), "--json", env=offline_env(claude_home), cwd=tmp_path).stdout
    )
    assert data["pending_asks"] == [{**ask, "asked_at": iso_utc(ask["asked_at"])}]


def test_status_groups_the_attempts_by_run_with_each_runs_state(
    tmp_path: Path, claude_home: Path
) -> None:
    runs = tmp_path / "runs"
    now = time.time()
    record_rows(runs / "manifest.json", [{"step": "a", "ok": True, "state": "ended",
        "cost_usd": 0.25, "started_at": now - 60, "ended_at": now - 50}], run="old")  # fmt: skip
    stopped = {"step": "b", "ok": False, "state": "ended", "error": "stopped-from-outside"}
    record_rows(runs / "manifest.json", [stopped], run="stopped")
    record_rows(runs / "manifest.json", [{"step": "c", "state": "running"}], run="killed")
    live = [
        {"step": "干活", "ok": True, "state": "ended", "cost_usd": 0.5, "started_at": now - 9},
        {"step": "干活·判定#1", "state": "running", "cost_usd": 0.125, "pid": os.getpid()},
    ]
    record_rows(runs / "manifest.json", live, run="live")
    write_asks(runs, [{"id": "q1", "question": "Which?", "options": [], "asked_at": now}])
    lock = WriterLock(RunDir(runs).writer("live"))
    lock.hold()
    try:
        with holding_the_run(runs, ["flower", "go", "x"]):
            data = parse_document(
                flower(
                    "status", str(runs), "--json", env=offline_env(claude_home), cwd=tmp_path
                ).stdout
            )
            table = flower("status", str(runs), env=offline_env(claude_home), cwd=tmp_path)
    finally:
        lock.release()
    states = {run["run_id"]: run["state"] for run in data["runs"]}
    assert states == {"old": "done", "stopped": "stopped", "killed": "lost", "live": "waiting"}
    [running] = [run for run in data["runs"] if run["run_id"] == "live"]
    assert running["pid"] == os.getpid() and running["waiting_for"] == ["q1"]
    assert running["current"]["step"] == "work" and running["current"]["role"] == "judge"
    assert running["cost_usd"] == 0.625 and data["total_cost_usd"] == 0.875
    assert data["live"] and not data["final"]
    assert [run["run_id"] for run in data["runs"]][0] == "old"  # oldest first
    assert "运行 old · 完成" in table.stdout
    assert f"运行 live · 等人回答 · 进程 {os.getpid()} · $0.6250" in table.stdout
    assert "正在 干活·判定#1(已花 $0.1250)" in table.stdout
    assert "等你回答:q1" in table.stdout


def test_failed_attempts_are_listed(tmp_path: Path, claude_home: Path) -> None:
    runs = tmp_path / "runs"
    row = {"step": "build", "ok": False, "error": "Invalid API key", "errors": ["HTTP 529"]}
    record_rows(runs / "manifest.json", [row], run="r1")
    done = flower("status", str(runs), env=offline_env(claude_home), cwd=tmp_path)
    assert done.returncode == 0
    assert "Invalid API key" in done.stdout and "build: HTTP 529" in done.stdout


def test_escape_sequences_the_box_wrote_never_reach_the_terminal(
    tmp_path: Path, claude_home: Path
) -> None:
    """T3 (issue 37): a flowerbox workspace's runs/ is the box's to write; plain `flower
    status` (and `flower analyze`) on the host showed its escape sequences (a title, a
    clipboard write)."""
    runs = tmp_path / "runs"
    osc52 = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"
    row = {"step": f"build{osc52}", "ok": False, "error": "\x1b]0;pwned\x07x\u202eyz"}
    record_rows(runs / "manifest.json", [row], run="r1\x1b[2J")
    write_asks(runs, [{"id": "q\x9b2J", "question": f"Which?{osc52}", "options": ["\x1b[31m"]}])
    for command in (["status"], ["status", "--json"], ["analyze"], ["analyze", "--json"]):
        done = flower(*command, str(runs), env=offline_env(claude_home), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "build" in done.stdout and ("Which?" in done.stdout or command[0] == "analyze")
        for unsafe in ("\x1b", "\x07", "\x9b", "\u202e", "\\u001b", "\\u202e"):
            assert unsafe not in done.stdout + done.stderr, (command, unsafe)


@pytest.mark.english  # its English (issue 36)
def test_a_missing_run_dir_exits_two(tmp_path: Path, claude_home: Path) -> None:
    done = flower("status", str(tmp_path / "nope"), env=offline_env(claude_home), cwd=tmp_path)
    assert done.returncode == 2
    assert "no run directory at" in done.stderr and "default ./runs" in done.stderr


@pytest.mark.english
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
    data = parse_document(done.stdout)
    assert data["runs"][0]["steps"][0]["step"] == "s" and data["sessions"] == []
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
            preexec_fn=hearing_ctrl_c,  # interrupt() sends it, even from `make check &`
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
    with (
        holding_the_run(runs, ["a run"]),  # a live run: --follow keeps following
        Following(str(runs), "--follow", "--json", env=env, cwd=tmp_path) as follow,
    ):
        assert follow.wait_for("first-step"), follow.seen
        rows = [{"step": "first-step", "ok": True}, {"step": "second-step", "ok": False}]
        record_rows(runs / "manifest.json", rows, run="r1")
        assert follow.wait_for("second-step"), follow.seen
        last = parse_document(follow.seen[-1])
        assert last["runs"][0]["steps"][1]["step"] == "second-step" and not last["final"]
        assert follow.interrupt() == 0


def test_follow_ends_with_a_final_record_when_the_run_ends(
    tmp_path: Path, claude_home: Path
) -> None:
    runs = tmp_path / "runs"
    record_rows(runs / "manifest.json", [{"step": "only-step", "ok": True}], run="r1")
    env = offline_env(claude_home)
    with Following(str(runs), "-f", "--json", env=env, cwd=tmp_path) as follow:
        with holding_the_run(runs, ["a run"]):
            assert follow.wait_for("only-step"), follow.seen
            assert not parse_document(follow.seen[-1])["final"]
        assert follow.wait_for('"final": true'), follow.seen
        assert follow.process.wait(timeout=10) == 0  # it ended on its own
    records = [parse_document(line) for line in follow.seen]
    assert [r["final"] for r in records][-1] is True and not records[-1]["live"]
    assert [r["final"] for r in records].count(True) == 1


def test_follow_of_a_run_dir_nobody_holds_prints_once_and_ends(
    tmp_path: Path, claude_home: Path
) -> None:
    runs = tmp_path / "runs"
    record_rows(runs / "manifest.json", [{"step": "only-step", "ok": True}], run="r1")
    done = flower("status", str(runs), "-f", "--json", env=offline_env(claude_home), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [record] = [parse_document(line) for line in done.stdout.splitlines()]
    assert record["final"] and record["runs"][0]["state"] == "done"


def test_follow_in_tables_redraws_too(tmp_path: Path, claude_home: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    with (
        holding_the_run(runs, ["a run"]),
        Following(str(runs), "-f", env=offline_env(claude_home), cwd=tmp_path) as follow,
    ):
        assert follow.wait_for("还没有步骤开始"), follow.seen
        write_asks(runs, [{"id": "q1", "question": "Go on?", "options": [], "asked_at": 0}])
        assert follow.wait_for("Go on?"), follow.seen
        assert follow.interrupt() == 0


@pytest.mark.english
def test_status_shows_one_run_by_its_id_or_its_start(tmp_path: Path, claude_home: Path) -> None:
    runs = tmp_path / "runs"
    for run in ("20261201-100000-aaaaaa", "20261201-110000-bbbbbb"):
        record_rows(runs / "manifest.json", [{"step": f"step-{run[-1]}", "ok": True}], run=run)
    env = offline_env(claude_home)
    picked = flower("status", str(runs), "--run", "20261201-11", "--json", env=env, cwd=tmp_path)
    assert picked.returncode == 0, picked.stderr
    [run] = parse_document(picked.stdout)["runs"]
    assert run["run_id"] == "20261201-110000-bbbbbb" and run["steps"][0]["step"] == "step-b"
    several = flower("status", str(runs), "-r", "20261201", "--json", env=env, cwd=tmp_path)
    assert several.returncode == 2
    assert "several runs" in parse_document(several.stdout)["error"]["message"]
    none = flower("status", str(runs), "-r", "nope", env=env, cwd=tmp_path)
    assert none.returncode == 2 and "20261201-100000-aaaaaa" in none.stderr


@pytest.mark.parametrize("command", ["status", "analyze"])
def test_off_a_terminal_no_cell_is_cut(tmp_path: Path, claude_home: Path, command: str) -> None:
    """In CI (no tty, COLUMNS=80) the tables print every cell whole: costs, names, errors."""
    runs = tmp_path / "runs"
    name = "a step whose name is long enough to need more than eighty columns on its own"
    error = "the upstream answered 529 overloaded three times in a row, then the step gave up"
    row = {"step": name, "ok": False, "cost_usd": 0.041234, "error": error, "state": "ended"}
    record_rows(runs / "manifest.json", [row], run="r1")
    env = offline_env(claude_home) | {"COLUMNS": "80"}
    done = flower(command, str(runs), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert name in done.stdout and error in done.stdout and "$0.0412" in done.stdout
    assert "…" not in done.stdout
