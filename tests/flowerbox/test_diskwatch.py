"""The disk and inode budgets: what the run grew by stops it (its folders, the files its
processes hold open unlinked, its host-side logs); someone else's writes on the same disk
never do."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from flowerbox.runs import diskwatch
from flowerbox.runs.diskwatch import DiskWatch, Usage, tree_usage, unlinked_usage
from flowerbox.runs.outputlog import CappedLog

MB = 1024 * 1024
# How long a watcher polling every 0.05 s may take to see what it must see: generous, as
# the suite runs beside other tests on a busy machine; waiting on an event, a pass is quick.
STOPS_WITHIN = 120.0


def write(path: Path, size: int) -> None:
    with path.open("wb") as handle:
        handle.write(b"x" * size)
        handle.flush()


def watch(
    folder: Path, budget: int, *, inodes: int = 0, held: Callable[[], Iterable[int]] = tuple
) -> tuple[DiskWatch, threading.Event, list[str]]:
    said: list[str] = []
    fired = threading.Event()

    def exceeded(message: str) -> None:
        said.append(message)
        fired.set()

    return (
        DiskWatch(
            [folder],
            budget=Usage(budget, inodes),
            on_exceeded=exceeded,
            held=held,
            interval_s=0.05,
        ),
        fired,
        said,
    )


def begin(watcher: DiskWatch) -> None:
    """Start `watcher`: it measures the start before it returns, so what is written after
    counts."""
    watcher.start()


def test_growth_past_the_budget_stops_the_run_once(tmp_path: Path) -> None:
    box = tmp_path / "ws"
    box.mkdir()
    watcher, fired, said = watch(box, 2 * MB)
    begin(watcher)
    try:
        write(box / "small.bin", MB)
        assert not fired.wait(0.5)  # inside the budget
        write(box / "big.bin", 4 * MB)
        assert fired.wait(STOPS_WITHIN)
    finally:
        watcher.stop()
    assert len(said) == 1 and "past its disk budget of 0.00195312 GB" in said[0]


def test_writes_elsewhere_on_the_same_disk_are_not_the_runs(tmp_path: Path) -> None:
    box, other = tmp_path / "ws", tmp_path / "elsewhere"
    box.mkdir()
    other.mkdir()
    watcher, fired, _ = watch(box, 2 * MB)
    begin(watcher)
    try:
        write(other / "big.bin", 8 * MB)
        assert not fired.wait(1.0)
        write(box / "big.bin", 4 * MB)  # after that, the run's own growth still counts
        assert fired.wait(STOPS_WITHIN)
    finally:
        watcher.stop()


@pytest.mark.parametrize("together", [True, False], ids=["same-tick", "freed-first"])
def test_space_freed_elsewhere_never_hides_the_runs_growth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, together: bool
) -> None:
    """A neighbour deleting 8 MB as the run writes 4 MB: the disk as a whole shrank, yet the
    run grew past its budget. (A CI run of a detached box's budget test missed it so, while
    the previous test's 700 MiB were freed.) The disk's used figure is the test's, so other
    writers on this machine cannot blur it."""
    box = tmp_path / "ws"
    box.mkdir()
    disk = [Usage(100 * MB, 1000)]
    monkeypatch.setattr(diskwatch, "used", lambda path: disk[0])
    watcher, fired, _ = watch(box, 2 * MB)
    watcher.start()
    try:
        disk[0] -= Usage(8 * MB, 1)  # the neighbour's delete
        if not together:
            assert not fired.wait(0.5)
        write(box / "big.bin", 4 * MB)
        disk[0] += Usage(4 * MB, 1)
        assert fired.wait(10)
    finally:
        watcher.stop()


def test_space_freed_elsewhere_as_the_run_writes_does_not_hide_its_growth(
    tmp_path: Path,
) -> None:
    """The disk as a whole did not grow (someone freed more than the run wrote), so statvfs
    never shows the run's growth: the watcher measures the run every MEASURED_EVERY ticks."""
    box, other = tmp_path / "ws", tmp_path / "elsewhere"
    box.mkdir()
    other.mkdir()
    write(other / "old.bin", 8 * MB)
    watcher, fired, said = watch(box, 2 * MB)
    begin(watcher)
    try:
        (other / "old.bin").unlink()
        write(box / "big.bin", 4 * MB)
        assert fired.wait(STOPS_WITHIN)
    finally:
        watcher.stop()
    assert len(said) == 1 and "disk budget" in said[0]


def test_a_link_is_not_followed_when_measuring(tmp_path: Path) -> None:
    box, outside = tmp_path / "ws", tmp_path / "outside"
    box.mkdir()
    outside.mkdir()
    write(outside / "big.bin", 4 * MB)
    (box / "link").symlink_to(outside)
    assert tree_usage(box).bytes < MB


HOLDER = """
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
os.write(fd, b"x" * int(sys.argv[2]))
os.fsync(fd)
os.unlink(sys.argv[1])
if sys.argv[3] == "mapped":
    kept = mmap.mmap(fd, 0)
    os.close(fd)
print("held", flush=True)
time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """A real process that writes a file, unlinks it and keeps it open (as a box's would)."""
    started: list[subprocess.Popen[str]] = []

    def start(path: Path, size: int, how: str = "open") -> subprocess.Popen[str]:
        argv = [sys.executable, "-c", HOLDER, str(path), str(size), how]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.communicate()


def test_a_file_unlinked_while_open_counts_against_the_budget(
    tmp_path: Path, holder: Callable[..., subprocess.Popen[str]]
) -> None:
    """D1 (issue 37): 700 MiB written, unlinked, kept open: no folder shows it."""
    box = tmp_path / "ws"
    box.mkdir()
    pids: list[int] = []
    watcher, fired, said = watch(box, 2 * MB, held=lambda: pids)
    begin(watcher)
    try:
        pids.append(holder(box / "hidden.bin", 4 * MB).pid)
        assert fired.wait(STOPS_WITHIN)
    finally:
        watcher.stop()
    assert len(said) == 1 and "disk budget" in said[0]


def test_unlinked_files_of_processes_not_the_boxs_are_not_the_runs(
    tmp_path: Path, holder: Callable[..., subprocess.Popen[str]]
) -> None:
    box = tmp_path / "ws"
    box.mkdir()
    watcher, fired, _ = watch(box, 2 * MB, held=list)  # the box's processes: none of these
    begin(watcher)
    try:
        holder(tmp_path / "someone-elses.bin", 8 * MB)
        assert not fired.wait(1.0)
    finally:
        watcher.stop()


def test_unlinked_usage_counts_each_file_once_on_the_watched_devices_only(
    tmp_path: Path, holder: Callable[..., subprocess.Popen[str]]
) -> None:
    proc = holder(tmp_path / "a.bin", 2 * MB)
    device = tmp_path.stat().st_dev
    once = unlinked_usage([proc.pid], {device})
    assert once.inodes >= 1 and once.bytes >= 2 * MB
    assert unlinked_usage([proc.pid, proc.pid], {device}) == once
    assert unlinked_usage([proc.pid], {device + 1}) == Usage()
    assert unlinked_usage([2**22 + 7], {device}) == Usage()  # no such process
    mapped = holder(tmp_path / "b.bin", 3 * MB, "mapped")  # its descriptor closed
    assert unlinked_usage([mapped.pid], {device}).bytes >= 3 * MB


def test_many_empty_files_pass_the_inode_budget(tmp_path: Path) -> None:
    """D3 (issue 37): 150,000 empty files took no space, so no disk budget saw them."""
    box = tmp_path / "ws"
    box.mkdir()
    watcher, fired, said = watch(box, 0, inodes=500)
    begin(watcher)
    try:
        for n in range(100):
            (box / f"f{n}").touch()
        assert not fired.wait(0.5)
        for n in range(100, 1000):
            (box / f"f{n}").touch()
        assert fired.wait(STOPS_WITHIN)
    finally:
        watcher.stop()
    assert len(said) == 1 and "past its inode budget of 500" in said[0]


def test_the_output_log_keeps_the_latest_output_within_its_cap(tmp_path: Path) -> None:
    """D2 (issue 37): a detached run's output log reached 446 MiB under a 0.2 GB budget."""
    path = tmp_path / "output.log"
    with CappedLog(path, cap=1000) as log:
        for n in range(50):
            log.write(f"{n:04d}".encode() * 90)  # 360 bytes a chunk
        log.write(b"last")
    kept = tmp_path / "output.log.1"
    assert path.stat().st_size <= 1000 and kept.stat().st_size == 1000
    assert (kept.read_bytes() + path.read_bytes()).endswith(b"0049" * 90 + b"last")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["output.log", "output.log.1"]
