"""Where flowerbox keeps its own records: a per-user folder that no box ever mounts.

    $XDG_STATE_HOME/flowerbox/              0700 (default ~/.local/state/flowerbox)
        runs/<run_id>/                      one run's host-only records (flowerbox.runs.records):
            meta.json, meta.json.lock       the run, its BoxSpec, status, cost (resume reads
                                            only this)
            output.log, supervisor.log      the detached agent's output, its keeper's lines
            agent.stderr.log,               each container's stderr, kept as it is removed
            gateway.stderr.log
            report.html                     `flowerbox report`'s page
            provenance-start.json           the repository before the run
            watched/                        the start copies of files a box must not change
            gateway/                        mounted into the gateway container only: the
                                            usage ledger, the request log, the egress log
        no-hooks/                           0555, empty: core.hooksPath of every git the host
                                            runs (flowerbox.hostgit)
        secrets/<run_id>/credentials.env    0600, read once by the gateway as it starts, then
                                            removed (and swept after a killed CLI)
    /tmp/flowerbox-<uid>/fbx-*/             0700 each: one run's socket folder, mounted into its
                                            box at /run/flowerbox (short: a unix socket's path
                                            fits in 108 bytes); the root is what a broker in a
                                            container mounts to bind in every run's folder
                                            ($FLOWERBOX_SOCKET_ROOT: another root, the suite's)
    $XDG_STATE_HOME/flowerbox-box/<run_id>/ what a box may write outside the workspace: the
                                            shadow git directory (flowerbox.box.gitshadow);
                                            hostile input once the box has run

Everything the agent can write (the workspace, runs/, the workbench, the shadow gitdir) is
read through flowerbox.box.untrusted; nothing here is ever read from there.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from flower import text
from flowerbox.errors import RunError, StateError

if TYPE_CHECKING:
    from flowerbox.hostgit import HostGit

RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")


def base() -> Path:
    """$XDG_STATE_HOME (default ~/.local/state): flowerbox's folders are made in it."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")


def _private(path: Path) -> Path:
    """`path` made (with its missing parents) and left 0700, whatever the umask.

    Raises:
        StateError: it cannot be (not ours, read-only, a file in the way).
    """
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        if path.stat().st_mode & 0o077:
            path.chmod(0o700)
    except OSError as exc:
        raise StateError(text("state.unusable", path=path, problem=exc.strerror or exc)) from exc
    return path


def home() -> Path:
    """flowerbox's host-only state folder."""
    return _private(base() / "flowerbox")


def host_git() -> HostGit:
    """git for the host (flowerbox.hostgit), its hooks path an empty folder in the state."""
    from flowerbox.hostgit import HostGit, empty_hooks  # lazy: `ps` needs no git (issue 31)

    return HostGit(hooks=empty_hooks(home()))


SOCKET_ROOT = "FLOWERBOX_SOCKET_ROOT"  # another root than /tmp/flowerbox-<uid> (a test suite's)


def socket_root(under: Path = Path("/tmp")) -> Path:
    """The folder of this user's runs' socket folders (`under`/flowerbox-<uid>, or the absolute
    path $FLOWERBOX_SOCKET_ROOT names), 0700 and theirs.

    Raises:
        StateError: it is a link, or another user's (someone made it first in the shared
            /tmp): the message says to remove it; or it cannot be made.
    """
    named = os.environ.get(SOCKET_ROOT)
    root = Path(named) if named else under / f"flowerbox-{os.getuid()}"
    if not root.is_absolute():
        raise StateError(text("state.socket_root_relative", var=SOCKET_ROOT, named=named))
    try:
        root.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise StateError(
            text(
                "state.socket_root_unmade", root=root, problem=exc.strerror or exc, var=SOCKET_ROOT
            ),
            path=root,
        ) from exc
    info = root.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise StateError(text("state.socket_root_foreign", root=root), path=root)
    if info.st_mode & 0o077:
        root.chmod(0o700)
    return root


def check_run_id(run_id: str) -> str:
    """`run_id` if it has the shape flowerbox gives run ids (it becomes a folder name)."""
    if not RUN_ID.fullmatch(run_id):
        raise RunError(text("state.bad_run_id", run_id=repr(run_id)))
    return run_id


def broker_folder() -> Path:
    """The broker's host-only folder: its control socket and ledger (flowerbox.broker)."""
    return _private(home() / "broker")


def runs_folder() -> Path:
    return _private(home() / "runs")


def run_folder(run_id: str) -> Path:
    """The host-only folder of one run (made 0700 on first use)."""
    return _private(runs_folder() / check_run_id(run_id))


def secrets_folder(run_id: str) -> Path:
    """Where the run's credentials file is written just before its gateway starts (the path
    only: flowerbox.box.prepare.write_secrets makes it)."""
    return home() / "secrets" / check_run_id(run_id)


def box_folder(run_id: str) -> Path:
    """The run's box-writable folder outside the workspace (the shadow gitdir lives here);
    its parent is made 0700, the folder itself by whoever fills it."""
    return _private(base() / "flowerbox-box") / check_run_id(run_id)


def kept_folder(run_id: str) -> Path:
    """Where a run's box area waits, host-only, when its commits could not come back at its
    end (`flowerbox deliver RUN` tries again); moved here whole, so no box reaches it."""
    return _private(base() / "flowerbox-kept") / check_run_id(run_id)


SECRETS_TTL_S = 120.0  # a gateway reads its file within seconds of it being written


def sweep_secrets(*, older_than_s: float = SECRETS_TTL_S) -> list[str]:
    """Remove every run's credentials file left older than `older_than_s` (a CLI killed
    before its gateway read it leaves one behind; a starting run's is younger); the run ids
    swept."""
    folder = home() / "secrets"
    swept = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        try:
            stale = time.time() - entry.lstat().st_mtime > older_than_s
        except OSError:
            continue
        if stale:
            shutil.rmtree(entry, ignore_errors=True)
            swept.append(entry.name)
    return swept


def tell_once(key: str, tell: Callable[[], object]) -> None:
    """Call `tell` the first time `key` is seen for this user, never again."""
    import hashlib  # lazy: OpenSSL's load, for the few commands that tell something once

    folder = _private(home() / "told")
    marker = folder / hashlib.sha256(key.encode()).hexdigest()[:32]
    if not marker.exists():
        tell()
        marker.touch()
