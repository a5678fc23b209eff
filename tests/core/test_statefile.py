"""Atomic JSON state files, their sidecar lock, and the manifest's row semantics.

The crash and concurrency tests run real processes (security checklist B.2 J1/J2/J5 and B.3
L1-L3): the workers are small scripts run with this interpreter, so they exercise the same
code a second flower would.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flower.core.manifest import merge_rows, record_rows
from flower.core.statefile import (
    CorruptStateError,
    LockTimeoutError,
    StateFileError,
    atomic_write_json,
    locked,
    read_json,
    sweep_temps,
    update_json,
)

MANIFEST_WRITER = """
import sys
from pathlib import Path
from flower.core.manifest import record_rows
path, run, writes = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for n in range(1, writes + 1):
    record_rows(path, [{"step": i} for i in range(n)], run=run)
"""

# Parses the file in a loop without the lock until the stop file appears; reports how many
# reads it made, how many did not parse, and how often a run's row count went backwards.
LOCK_FREE_READER = """
import json, sys
from pathlib import Path
path, stop = Path(sys.argv[1]), Path(sys.argv[2])
reads = torn = regressions = 0
seen = {}
while not stop.exists():
    try:
        rows = json.loads(path.read_bytes())
    except ValueError:
        torn += 1
        continue
    reads += 1
    counts = {}
    for row in rows:
        counts[row["run"]] = counts.get(row["run"], 0) + 1
    regressions += sum(counts.get(run, 0) < n for run, n in seen.items())
    seen = counts
print(json.dumps({"reads": reads, "torn": torn, "regressions": regressions}))
"""

COUNTER_WRITER = """
import sys
from pathlib import Path
from flower.core.statefile import update_json
path = Path(sys.argv[1])
bump = lambda d: {"counter": d["counter"] + 1, "pad": "x" * 50_000}
while True:
    print(update_json(path, bump, default={"counter": 0})["counter"], flush=True)
"""

LOCK_HOLDER = """
import sys, time
from pathlib import Path
from flower.core.statefile import locked
with locked(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def spawn(script: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE, text=True
    )


def temps(directory: Path) -> list[Path]:
    return sorted(directory.glob(".*.tmp"))


# --- atomic writes ----------------------------------------------------------------------------


def test_atomic_write_round_trips_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    atomic_write_json(path, {"步骤": ["確認"], "n": 1})
    assert read_json(path, None) == {"步骤": ["確認"], "n": 1}
    assert "步骤" in path.read_text(encoding="utf-8")
    assert temps(tmp_path) == []


def test_unserialisable_data_raises_before_touching_the_disk(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    atomic_write_json(path, {"n": 1})
    with pytest.raises(TypeError):
        atomic_write_json(path, {"n": object()})
    assert read_json(path, None) == {"n": 1}
    assert temps(tmp_path) == []


def test_an_fsync_failure_is_fatal_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    atomic_write_json(path, {"n": 1})

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        atomic_write_json(path, {"n": 2})
    assert read_json(path, None) == {"n": 1}
    assert temps(tmp_path) == []


def test_a_failed_replace_removes_its_temp(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write_json(target, {"n": 1})
    assert temps(tmp_path) == []


def test_sweep_removes_only_the_named_file_s_temps(tmp_path: Path) -> None:
    mine = tmp_path / ".manifest.json.k2j4.tmp"
    other = tmp_path / ".lineage.json.k2j4.tmp"
    for path in (mine, other, tmp_path / "manifest.json"):
        path.write_text("{")
    assert sweep_temps(tmp_path, "manifest.json") == [mine]
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name, "manifest.json"]


def test_update_json_sweeps_stale_temps(tmp_path: Path) -> None:
    stale = tmp_path / ".state.json.dead.tmp"
    stale.write_text('{"half')
    update_json(tmp_path / "state.json", lambda d: d, default={})
    assert not stale.exists()


# --- reading ----------------------------------------------------------------------------------


def test_read_json_of_a_missing_file_is_a_fresh_copy_of_the_default(tmp_path: Path) -> None:
    default: dict[str, list[int]] = {"rows": []}
    read_json(tmp_path / "none.json", default)["rows"].append(1)
    assert default == {"rows": []}


@pytest.mark.parametrize("content", [b'{"counter": 1,', b"", b"\xff\xfe{}"])
@pytest.mark.english
def test_a_corrupt_file_is_a_clear_error_and_stays_byte_for_byte(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    with pytest.raises(CorruptStateError, match="state.json is not valid JSON") as info:
        update_json(path, lambda d: {"counter": 0}, default={})
    assert info.value.path == path
    assert path.read_bytes() == content
    with pytest.raises(CorruptStateError):
        read_json(path, {})


# --- the lock ---------------------------------------------------------------------------------


def test_the_lock_file_is_a_sidecar_that_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "state.json"
    update_json(path, lambda d: d + [1], default=[])
    inode = (tmp_path / "runs" / "state.json.lock").stat().st_ino
    update_json(path, lambda d: d + [2], default=[])
    assert (tmp_path / "runs" / "state.json.lock").stat().st_ino == inode
    assert read_json(path, None) == [1, 2]


@pytest.mark.english
def test_the_lock_is_not_reentrant_and_says_so_at_once(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    with locked(path), pytest.raises(StateFileError, match="not reentrant"), locked(path):
        pass


def test_threads_do_not_lose_updates(tmp_path: Path) -> None:
    path = tmp_path / "counter.json"

    def bump() -> None:
        for _ in range(50):
            update_json(path, lambda n: n + 1, default=0)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert read_json(path, None) == 200


@pytest.mark.english
def test_a_lock_held_by_a_killed_process_is_released(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    holder = spawn(LOCK_HOLDER, path)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(LockTimeoutError) as info, locked(path, timeout=0.05):
            pass
        assert info.value.holder == holder.pid
        assert f"state.json.lock is still locked by process {holder.pid}" in str(info.value)
        holder.kill()
        killed = time.monotonic()
        with locked(path, timeout=0.5):
            released_after = time.monotonic() - killed
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()  # type: ignore[union-attr]
    assert released_after < 0.5  # checklist L2


# --- crashes and concurrency (real processes) -------------------------------------------------


def test_a_writer_killed_at_random_moments_never_leaves_an_unreadable_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.json"
    rng = random.Random(1)
    left_temps = 0
    for _ in range(20):
        writer = spawn(COUNTER_WRITER, path)
        assert writer.stdout is not None
        acks = [writer.stdout.readline()]  # it is writing by now
        time.sleep(rng.uniform(0, 0.05))
        writer.kill()
        writer.wait()
        acks += writer.stdout.readlines()
        writer.stdout.close()
        last_ack = max(int(line) for line in acks if line.strip())
        assert read_json(path, None)["counter"] >= last_ack  # J2
        left_temps += bool(temps(tmp_path))
        update_json(path, lambda d: d, default={})  # the next start sweeps
        assert temps(tmp_path) == []  # J5
    print(f"killed writers: 20 rounds, {left_temps} left a temp behind, all swept")


def test_eight_manifest_writers_and_two_lock_free_readers(tmp_path: Path) -> None:
    path, stop = tmp_path / "manifest.json", tmp_path / "stop"
    writes, runs = 50, [f"run-{i}" for i in range(8)]
    atomic_write_json(path, [])
    readers = [spawn(LOCK_FREE_READER, path, stop) for _ in range(2)]
    writers = [spawn(MANIFEST_WRITER, path, run, writes) for run in runs]
    try:
        assert [writer.wait(timeout=60) for writer in writers] == [0] * len(writers)
    finally:
        stop.touch()
        reports = [json.loads(reader.communicate(timeout=60)[0]) for reader in readers]
        for proc in writers:
            proc.kill()
            proc.wait()
            proc.stdout.close()  # type: ignore[union-attr]
    rows = read_json(path, None)
    for run in runs:  # L1: every writer's final rows are there, nothing lost or duplicated
        assert [row for row in rows if row["run"] == run] == [
            {"step": i, "run": run} for i in range(writes)
        ]
    assert len(rows) == len(runs) * writes
    assert [report["torn"] for report in reports] == [0, 0]  # J1, L3
    assert [report["regressions"] for report in reports] == [0, 0]
    assert all(report["reads"] > 0 for report in reports)
    print(f"manifest race: {len(rows)} rows, reads {[r['reads'] for r in reports]}, torn 0")


# --- manifest rows ----------------------------------------------------------------------------


def test_own_rows_are_replaced_in_place_and_others_kept() -> None:
    current = [{"run": "a", "step": 1}, {"run": "b", "step": 1}, {"run": "a", "step": 2}]
    merged = merge_rows(current, [{"step": 1}, {"step": 2}, {"step": 3}], run="a")
    assert merged == [
        {"run": "a", "step": 1},
        {"run": "a", "step": 2},
        {"run": "a", "step": 3},
        {"run": "b", "step": 1},
    ]


def test_a_new_run_s_rows_are_appended() -> None:
    assert merge_rows([{"run": "a"}], [{"step": 1}], run="b") == [
        {"run": "a"},
        {"step": 1, "run": "b"},
    ]


def test_a_row_of_another_run_is_refused() -> None:
    with pytest.raises(ValueError, match="belongs to run 'b', not 'a'"):
        merge_rows([], [{"run": "b"}], run="a")


def test_record_rows_keeps_other_runs_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "manifest.json"
    record_rows(path, [{"step": "x"}], run="a")
    record_rows(path, [{"step": "y"}], run="b")
    record_rows(path, [{"step": "x"}, {"step": "z"}], run="a")
    assert read_json(path, None) == [
        {"step": "x", "run": "a"},
        {"step": "z", "run": "a"},
        {"step": "y", "run": "b"},
    ]


@pytest.mark.english
def test_a_manifest_that_is_not_a_list_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text('{"run": "a"}')
    with pytest.raises(CorruptStateError, match="holds a JSON dict, not a list"):
        record_rows(path, [], run="a")
    assert path.read_text() == '{"run": "a"}'
