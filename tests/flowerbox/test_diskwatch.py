"""The disk budget: what the watched folders grew by stops a run; someone else's writes on the
same disk never do."""

from __future__ import annotations

import threading
from pathlib import Path

from flowerbox.runs.diskwatch import DiskWatch, tree_bytes

MB = 1024 * 1024


def write(path: Path, size: int) -> None:
    with path.open("wb") as handle:
        handle.write(b"x" * size)
        handle.flush()


def watch(folder: Path, budget: int) -> tuple[DiskWatch, threading.Event, list[str]]:
    said: list[str] = []
    fired = threading.Event()

    def exceeded(message: str) -> None:
        said.append(message)
        fired.set()

    return (
        DiskWatch([folder], budget_bytes=budget, on_exceeded=exceeded, interval_s=0.05),
        fired,
        said,
    )


def test_growth_past_the_budget_stops_the_run_once(tmp_path: Path) -> None:
    box = tmp_path / "ws"
    box.mkdir()
    watcher, fired, said = watch(box, 2 * MB)
    watcher.start()
    try:
        write(box / "small.bin", MB)
        assert not fired.wait(0.5)  # inside the budget
        write(box / "big.bin", 4 * MB)
        assert fired.wait(10)
    finally:
        watcher.stop()
    assert len(said) == 1 and "past its disk budget of 0.00195312 GB" in said[0]


def test_writes_elsewhere_on_the_same_disk_are_not_the_runs(tmp_path: Path) -> None:
    box, other = tmp_path / "ws", tmp_path / "elsewhere"
    box.mkdir()
    other.mkdir()
    watcher, fired, _ = watch(box, 2 * MB)
    watcher.start()
    try:
        write(other / "big.bin", 8 * MB)
        assert not fired.wait(1.0)
        write(box / "big.bin", 4 * MB)  # after that, the run's own growth still counts
        assert fired.wait(10)
    finally:
        watcher.stop()


def test_a_link_is_not_followed_when_measuring(tmp_path: Path) -> None:
    box, outside = tmp_path / "ws", tmp_path / "outside"
    box.mkdir()
    outside.mkdir()
    write(outside / "big.bin", 4 * MB)
    (box / "link").symlink_to(outside)
    assert tree_bytes(box) < MB
