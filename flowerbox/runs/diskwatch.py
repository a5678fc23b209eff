"""The run's disk and inode budgets: a bind mount has no quota, so the run's keeper watches.

    watch = DiskWatch([spec.workspace, ...], budget=Usage(bytes=..., inodes=...),
                      on_exceeded=stop, held=box.pids)
    watch.start()  ...  watch.stop()

Every INTERVAL_S the filesystems' used space and inodes are read (statvfs: cheap). When
either grew by more than its budget since the start, the run's own use is measured, so a large
write by someone else on the same disk never stops a run: the budget is what the run grew by.
Space someone else frees lowers that starting point, and the run's use is measured every
MEASURED_EVERY ticks anyway (and on a filesystem that counts no inodes, btrfs): a neighbour
deleting as fast as the run writes never hides the run's growth.
The run's use counts everything the run can make the host keep:

- the watched folders (the box's folders, and the host-only folder of the run's records and
  logs), walked without following a link: the blocks and the entries (inodes) below them;
- files the box's processes hold open after unlinking them: no folder shows them, and they
  keep their space until the last process closes them. `held()` names the box's processes
  (host pids); each one's /proc/<pid>/fd links are stat'ed and a regular file with no name
  left (`st_nlink == 0`) on a watched filesystem counts, once per inode; so does a deleted
  file only mapped into memory (/proc/<pid>/maps), by the extent mapped.

`on_exceeded` is called once, with a message.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from flowerbox.box.spec import BoxSpec
from flowerbox.runs import records

INTERVAL_S = 2.0
GB = 1024**3
MAX_ENTRIES = 2_000_000  # a walk stops counting here (the budget is then checked on that)
MEASURED_EVERY = 15  # the run's own use measured each 30 s whatever the filesystem says


@dataclass(frozen=True)
class Usage:
    """Space (bytes of blocks in use) and inodes."""

    bytes: int = 0
    inodes: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.bytes + other.bytes, self.inodes + other.inodes)

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.bytes - other.bytes, self.inodes - other.inodes)

    def past(self, budget: Usage) -> bool:
        """Whether either figure is past its budget (a budget of 0 is no limit)."""
        return bool(budget.bytes and self.bytes > budget.bytes) or bool(
            budget.inodes and self.inodes > budget.inodes
        )


def used(path: Path) -> Usage:
    """Space and inodes in use on the filesystem that holds `path` (inodes 0: not counted
    there)."""
    vfs = os.statvfs(path)
    return Usage((vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize, vfs.f_files - vfs.f_ffree)


def tree_usage(root: Path) -> Usage:
    """Space the files under `root` take (blocks, so sparse files count as what they use)
    and how many entries there are; links are not followed, other filesystems mounted below
    are not entered."""
    total, entries = 0, 0
    try:
        device = root.lstat().st_dev
    except OSError:
        return Usage()
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
    return Usage(total, entries)


def unlinked_usage(pids: Iterable[int], devices: set[int]) -> Usage:
    """Space and inodes of the regular files on `devices` that the processes `pids` hold
    with no name left (unlinked), each file once: through an open descriptor (its blocks),
    or only mapped into memory after the descriptor was closed (the mapping's extent). A
    process that is gone, or whose /proc entries cannot be read, adds nothing."""
    seen: dict[tuple[int, int], int] = {}
    for pid in pids:
        seen |= _mapped_unlinked(pid, devices)
        fds = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fds)
        except OSError:
            continue
        for name in names:
            try:
                info = os.stat(f"{fds}/{name}")  # the magic link: the open file itself
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 0 and info.st_dev in devices:
                seen[(info.st_dev, info.st_ino)] = info.st_blocks * 512
    return Usage(sum(seen.values()), len(seen))


def _mapped_unlinked(pid: int, devices: set[int]) -> dict[tuple[int, int], int]:
    """{(device, inode): extent} of the deleted files `pid` maps (/proc/<pid>/maps lines:
    `start-end perms offset major:minor inode path (deleted)`)."""
    found: dict[tuple[int, int], int] = {}
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as handle:
            lines = [line for line in handle if line.endswith(" (deleted)\n")]
    except OSError:
        return found
    for line in lines:
        span, _, offset, dev, inode, *_ = line.split()
        start, end = (int(part, 16) for part in span.split("-"))
        major, minor = (int(part, 16) for part in dev.split(":"))
        key = (os.makedev(major, minor), int(inode))
        if key[0] in devices and key[1]:
            found[key] = max(found.get(key, 0), int(offset, 16) + end - start)
    return found


class DiskWatch:
    """Calls `on_exceeded(message)` once when the run's use grew past `budget`."""

    def __init__(
        self,
        folders: Iterable[Path],
        *,
        budget: Usage,
        on_exceeded: Callable[[str], object],
        held: Callable[[], Iterable[int]] = tuple,
        interval_s: float = INTERVAL_S,
    ) -> None:
        self.folders = [folder for folder in folders if folder.is_dir()]
        self.budget = budget
        self._on_exceeded = on_exceeded
        self._held = held
        self._interval = interval_s
        self._stop = threading.Event()

    def start(self) -> None:
        """The starting point is taken here, before the caller lets the run write; then the
        watching goes on in a thread."""
        if self.folders and (self.budget.bytes or self.budget.inodes):
            start = self._used(), self._size()
            threading.Thread(target=self._watch, args=start, name="disk-watch", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _devices(self) -> dict[int, Path]:
        return {folder.stat().st_dev: folder for folder in self.folders}

    def _size(self) -> Usage:
        folders = sum((tree_usage(folder) for folder in self.folders), Usage())
        try:
            pids = list(self._held())
        except Exception:  # noqa: BLE001 - the engine's answer is a best effort; folders still count
            pids = []
        return folders + unlinked_usage(pids, set(self._devices()))

    def _used(self) -> Usage:
        return sum((used(folder) for folder in self._devices().values()), Usage())

    def _watch(self, used_start: Usage, size_start: Usage) -> None:
        counts_inodes = all(os.statvfs(folder).f_files for folder in self._devices().values())
        tick = 0
        while not self._stop.wait(self._interval):
            tick += 1
            now = self._used()
            used_start = Usage(min(used_start.bytes, now.bytes), min(used_start.inodes, now.inodes))
            grown = now - used_start
            if not grown.past(self.budget) and counts_inodes and tick % MEASURED_EVERY:
                continue
            size = self._size()
            if (size - size_start).past(self.budget):
                self._on_exceeded(self._message(size - size_start))
                return
            used_start += grown - (size - size_start)  # someone else's writes: not the run's

    def _message(self, grown: Usage) -> str:
        if self.budget.bytes and grown.bytes > self.budget.bytes:
            return (
                f"the run's folders grew by {grown.bytes / GB:.2f} GB, past its disk budget "
                f"of {self.budget.bytes / GB:g} GB: stopping it (resumable; --disk-budget GB "
                "sets another)"
            )
        return (
            f"the run made {grown.inodes} files and folders, past its inode budget of "
            f"{self.budget.inodes}: stopping it (resumable; --inode-budget N sets another)"
        )


@contextlib.contextmanager
def watch_disk(
    spec: BoxSpec, stop: Callable[[], object], *, held: Callable[[], Iterable[int]] = tuple
) -> Iterator[None]:
    """While the block runs, the run's box-writable folders (workspace, workbench, the box's
    own area), its host-only records and logs, and the files the box's processes (`held`)
    keep open unlinked, against its disk and inode budgets; past one, the reason goes to the
    run's record (the end of the run reports it) and `stop` stops the agent (resumable, as
    `flowerbox stop`)."""
    budget = Usage(int((spec.disk_budget_gb or 0) * GB), spec.inode_budget or 0)
    if not (budget.bytes or budget.inodes):
        yield
        return

    def exceeded(message: str) -> None:
        records.record(spec, stop_reason=message)  # the end of the run reports it (boundary)
        stop()

    folders = [spec.workspace, spec.workbench, records.box_area(spec), spec.state_dir]
    watch = DiskWatch(
        (folder for folder in folders if folder is not None),
        budget=budget,
        on_exceeded=exceeded,
        held=held,
    )
    watch.start()
    try:
        yield
    finally:
        watch.stop()
