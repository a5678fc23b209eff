"""Which filesystem a path lives on, and the refusal of network filesystems.

SQLite's WAL mode needs shared memory and POSIX locks that work only between processes of
one kernel on a local filesystem ("WAL does not work over a network filesystem",
sqlite.org/wal.html). ``os.statvfs`` does not name the filesystem type, so the type is read
from ``/proc/mounts``: the longest mount point that contains the path wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from flower import text
from flower.stores.errors import StoreError

__all__ = ["Mount", "NETWORK_FS", "ensure_local", "mount_of"]

#: Filesystem types refused for sessions.db: remote ones, and FUSE (whose lock semantics
#: depend on the daemon behind it; sshfs and most cloud mounts have none).
NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb", "smb2", "smb3", "smbfs", "fuse"})

_OCTAL = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    """One line of ``/proc/mounts``: where a filesystem is mounted and its type."""

    point: Path
    fstype: str

    @property
    def is_network(self) -> bool:
        """True for the remote and FUSE types in :data:`NETWORK_FS` (``fuse.sshfs`` too)."""
        return self.fstype in NETWORK_FS or self.fstype.startswith("fuse.")


def _unescape(field: str) -> str:
    # /proc/mounts writes space, tab, newline and backslash as octal escapes (\040 ...).
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def mount_of(path: str | Path, *, mounts_file: str | Path = "/proc/mounts") -> Mount | None:
    """The mount that holds ``path`` (which need not exist yet), or None without /proc."""
    target = Path(path).resolve()
    try:
        lines = Path(mounts_file).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    best: Mount | None = None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = Path(_unescape(fields[1]))
        if target.is_relative_to(point) and (
            best is None or len(point.parts) >= len(best.point.parts)
        ):
            # ">=": a later line mounted over the same point hides the earlier one.
            best = Mount(point, fields[2])
    return best


def ensure_local(path: str | Path, *, mounts_file: str | Path = "/proc/mounts") -> None:
    """Raise :class:`StoreError` if ``path`` lives on a network or FUSE filesystem."""
    mount = mount_of(path, mounts_file=mounts_file)
    if mount is not None and mount.is_network:
        raise StoreError(
            path,
            text("store.network_fs", fstype=mount.fstype, point=mount.point),
            text("store.fix_local_disk"),
        )
