"""Files the box can write, read and written on the host as hostile input (DESIGN.md, "The
trust boundary").

Everything under the workspace (runs/, the workbench, .git of a box) may have been replaced
by the agent with a symlink to a host file, a FIFO that never answers, `/dev/zero`, or a
gigabyte of junk. So every path here is walked from a trusted root one component at a time,
each opened with O_NOFOLLOW through its parent's descriptor (the same guarantee as openat2's
RESOLVE_NO_SYMLINKS, on any kernel), files are opened O_NONBLOCK and must be regular, and
reads are bounded. Nothing the host creates under the root can be redirected by a link.

    data = read_bytes(ws, "runs/asks.json", limit=MiB)      # None: not there
    asks = read_json(ws, "runs/asks.json", [])              # default when absent or bad
    drop(ws, "runs/inbox", "0001.json", b"{...}")           # temp + rename inside the dir fd

What is read is shown and parsed through flower's one sanitizer and bounded parser
(flower.core.untrusted: `printable`, `parse_json`), as flower's own commands do.

Errors:
    UntrustedFileError   a link, a non-regular file, a file too big, an unreadable path;
                         `path` names it; the message says what was found
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

from flower import parse_json, text
from flowerbox.errors import UntrustedFileError

Relative = str | PurePath  # a path below the root, without `..`
MiB = 1024 * 1024
DEFAULT_LIMIT = MiB
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _parts(relative: Relative) -> list[str]:
    parts = [part for part in PurePosixPath(relative).parts if part not in ("", ".")]
    if PurePosixPath(relative).is_absolute() or ".." in parts:
        raise ValueError(f"{relative!r} must be a path relative to its root, without ..")
    return parts


@contextlib.contextmanager
def open_dir(root: Path, relative: Relative = "", *, create: bool = False) -> Iterator[int]:
    """A descriptor of `root/relative`, every component below `root` a real folder (no link).
    `create`: make missing folders (0700... the umask applies) on the way.

    Raises:
        FileNotFoundError: a component is missing (and `create` is false).
        UntrustedFileError: a component is a link or not a folder.
    """
    fd = os.open(root, _DIR_FLAGS)
    try:
        where = root
        for part in _parts(relative):
            where = where / part
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UntrustedFileError(where, text("untrusted.link_or_not_folder")) from exc
                raise
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_file(root: Path, relative: Relative) -> Iterator[int | None]:
    """A read descriptor of the regular file `root/relative`, or None when it is missing.

    Raises:
        UntrustedFileError: a link anywhere on the way, or not a regular file (a FIFO, a
            device, a folder).
    """
    *folders, name = _parts(relative) or [""]
    path = root.joinpath(*folders, name)
    try:
        with open_dir(root, PurePosixPath(*folders) if folders else "") as parent:
            try:
                fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                yield None
                return
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UntrustedFileError(path, text("untrusted.symlink")) from exc
                raise
    except FileNotFoundError:
        yield None
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UntrustedFileError(path, text("untrusted.not_regular"))
        yield fd
    finally:
        os.close(fd)


def read_bytes(
    root: Path, relative: Relative, *, limit: int = DEFAULT_LIMIT, offset: int = 0
) -> bytes | None:
    """The file's bytes from `offset` (None: missing), at most `limit` of them.

    Raises:
        UntrustedFileError: see open_file; or more than `limit` bytes from `offset` on.
    """
    with open_file(root, relative) as fd:
        if fd is None:
            return None
        data = os.pread(fd, limit + 1, offset)
    if len(data) > limit:
        raise UntrustedFileError(root / relative, text("untrusted.larger_than", limit=limit))
    return data


def read_from(root: Path, relative: Relative, *, offset: int, limit: int) -> bytes | None:
    """At most `limit` bytes of the file from `offset` on (None: missing): for following a
    file that grows."""
    with open_file(root, relative) as fd:
        return None if fd is None else os.pread(fd, limit, offset)


def read_json(root: Path, relative: Relative, default: Any, *, limit: int = DEFAULT_LIMIT) -> Any:
    """The parsed file, or `default` when it is missing, unreadable, too big, a link, not
    JSON, nested too deep, or not of `default`'s type (a box-written file is never a reason
    to fail)."""
    try:
        data = read_bytes(root, relative, limit=limit)
        value = default if data is None else parse_json(data, limit=limit)
    except (OSError, ValueError):
        return default
    return value if isinstance(value, type(default)) else default


def drop(root: Path, folder: Relative, name: str, data: bytes) -> Path:
    """Write `data` as `root/folder/name` (folders made as needed): a dot-named temp created
    O_EXCL|O_NOFOLLOW in the folder's descriptor, then renamed within it, so neither a link
    planted in the path nor one at the name can redirect the write.

    Raises:
        UntrustedFileError: a component of `folder` is a link or not a folder.
    """
    [leaf] = _parts(name)
    with open_dir(root, folder, create=True) as parent:
        temp = f".{uuid.uuid4().hex}.tmp"
        fd = os.open(
            temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=parent
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.rename(temp, leaf, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=parent)
            raise
    return root.joinpath(*_parts(folder), leaf)


def exists(root: Path, relative: Relative) -> bool:
    """Whether `root/relative` is there (as anything) with no link on the way to it."""
    *folders, name = _parts(relative)
    try:
        with open_dir(root, PurePosixPath(*folders) if folders else "") as parent:
            os.stat(name, dir_fd=parent, follow_symlinks=False)
    except (OSError, ValueError):
        return False
    return True


def real_folder(root: Path, relative: Relative) -> bool:
    """Whether `root/relative` is a folder reached through folders only (no link anywhere):
    the only kind of path flowerbox hands Docker as a mount source (Docker follows links)."""
    try:
        with open_dir(root, relative):
            return True
    except (OSError, ValueError):
        return False


def regular_file(root: Path, relative: Relative) -> bool:
    """Whether `root/relative` is a regular file reached with no link on the way."""
    try:
        with open_file(root, relative) as fd:
            return fd is not None
    except (OSError, ValueError):
        return False
