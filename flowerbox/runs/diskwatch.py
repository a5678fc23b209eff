"""The workspace's disk budget: a bind mount has no quota, so the run's keeper watches it.

    watch = DiskWatch([spec.workspace, ...], budget_bytes=..., on_exceeded=stop)
    watch.start()  ...  watch.stop()

Every INTERVAL_S the filesystems' used space is read (statvfs: cheap). Only when it has grown
by more than the budget since the start are the watched folders themselves measured (a walk
that follows no link), so a large write by someone else on the same disk never stops a run:
the budget is what the box's folders grew by. `on_exceeded` is called once, with a message.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from flowerbox.box.spec import BoxSpec
from flowerbox.runs import records

INTERVAL_S = 2.0
GB = 1024**3
MAX_ENTRIES = 2_000_000  # a walk stops counting here (the budget is then checked on that)


def used_bytes(path: Path) -> int:
    """Space in use on the filesystem that holds `path`."""
    vfs = os.statvfs(path)
    return (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize


def tree_bytes(root: Path) -> int:
    """Space the files under `root` take (blocks, so sparse files count as what they use);
    links are not followed, other filesystems mounted below are not entered."""
    total, entries = 0, 0
    try:
        device = root.lstat().st_dev
    except OSError:
        return 0
    stack = [root]
    while stack and entries < MAX_ENTRIES:
        folder = stack.pop()
        try:
            with os.scandir(folder) as found:
                for entry in found:
                    entries += 1
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += info.st_blocks * 512
                    if stat.S_ISDIR(info.st_mode) and info.st_dev == device:
                        stack.append(Path(entry.path))
        except OSError:
            continue
    return total


class DiskWatch:
    """Calls `on_exceeded(message)` once when `folders` grew by more than `budget_bytes`."""

    def __init__(
        self,
        folders: Iterable[Path],
        *,
        budget_bytes: int,
        on_exceeded: Callable[[str], object],
        interval_s: float = INTERVAL_S,
    ) -> None:
        self.folders = [folder for folder in folders if folder.is_dir()]
        self.budget = budget_bytes
        self._on_exceeded = on_exceeded
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="disk-watch", daemon=True)

    def start(self) -> None:
        if self.folders:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _size(self) -> int:
        return sum(tree_bytes(folder) for folder in self.folders)

    def _used(self) -> int:
        devices = {folder.stat().st_dev: folder for folder in self.folders}
        return sum(used_bytes(folder) for folder in devices.values())

    def _watch(self) -> None:
        used_start, size_start = self._used(), self._size()
        while not self._stop.wait(self._interval):
            grown = self._used() - used_start
            if grown <= self.budget:
                continue
            size = self._size()
            if size - size_start > self.budget:
                self._on_exceeded(
                    f"the run's folders grew by {(size - size_start) / GB:.2f} GB, past its "
                    f"disk budget of {self.budget / GB:g} GB: stopping it (resumable; "
                    "--disk-budget GB sets another)"
                )
                return
            used_start += grown - (size - size_start)  # someone else's writes: not the run's


@contextlib.contextmanager
def watch_disk(spec: BoxSpec, stop: Callable[[], object]) -> Iterator[None]:
    """While the block runs, the run's box-writable folders (workspace, workbench, the box's
    own area) against its disk budget; past it, the reason goes to the run's record (the end
    of the run reports it) and `stop` stops the agent (resumable, as `flowerbox stop`)."""
    if not spec.disk_budget_gb:
        yield
        return

    def exceeded(message: str) -> None:
        records.record(spec, stop_reason=message)  # the end of the run reports it (boundary)
        stop()

    folders = [spec.workspace, spec.workbench, records.box_area(spec)]
    watch = DiskWatch(
        (folder for folder in folders if folder is not None),
        budget_bytes=int(spec.disk_budget_gb * GB),
        on_exceeded=exceeded,
    )
    watch.start()
    try:
        yield
    finally:
        watch.stop()
