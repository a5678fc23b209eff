"""The automatic update: at most once a day, in the background, never in the way.

At CLI start `maybe_update()` decides in microseconds and, when an update is due, starts
`python -m pip install --upgrade --quiet flowerbox` for the interpreter running flower as a
detached process (its own session, so Ctrl+C in the terminal does not reach it) and returns.
Its output goes to `${XDG_CACHE_HOME:-~/.cache}/flower/update.log`; the stamp file beside it
records the last attempt, written before the start so that parallel flowers do not all upgrade.
The new version is used from the next start on.

No update happens when (first match wins, `should_update` says which):

1. flower runs from a git checkout (a `.git` beside the source root): the developer's tree
   is never replaced by a release, and FLOWER_NO_UPDATE is then a no-op;
2. FLOWER_NO_UPDATE has any non-empty value (the container image sets it);
3. the last attempt is less than a day old.

A failure to decide or to start (an unwritable cache, no pip) is swallowed: an update must
never stop flower from starting.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from flower.core.env import source_root

__all__ = [
    "INTERVAL",
    "PACKAGE",
    "cache_dir",
    "maybe_update",
    "should_update",
    "update_command",
]

PACKAGE = "flowerbox"
"""The distribution the update upgrades (PyPI's `flower` is Celery Flower)."""

INTERVAL = 24 * 3600.0
"""Seconds between two update attempts."""

STAMP = "last-update"
LOG = "update.log"

Spawn = Callable[[list[str], Path], None]


def cache_dir(env: Mapping[str, str], home: Path) -> Path:
    """`${XDG_CACHE_HOME:-~/.cache}/flower` (an empty XDG_CACHE_HOME counts as unset)."""
    xdg = env.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else home / ".cache") / "flower"


def should_update(
    now: float, env: Mapping[str, str], source: Path | None, stamp: Path
) -> tuple[bool, str]:
    """Whether to update now, and why (or why not). Pure but for reading the stamp's mtime.

    Args:
        source: the source root flower runs from (`flower.core.env.source_root()`), or None
            for an installed flower.
        stamp: the file whose mtime is the last attempt.
    """
    if source is not None and (source / ".git").exists():
        return False, f"running from the git checkout {source}"
    if env.get("FLOWER_NO_UPDATE"):
        return False, "FLOWER_NO_UPDATE is set"
    try:
        last = stamp.stat().st_mtime
    except FileNotFoundError:
        return True, "never checked"
    age = now - last
    if 0 <= age < INTERVAL:
        return False, f"checked {age / 3600:.1f} h ago (at most once a day)"
    return True, f"last checked {age / 3600:.1f} h ago"


def update_command(
    *,
    env: Mapping[str, str] | None = None,
    now: float | None = None,
    source: Path | None = None,
    home: Path | None = None,
) -> list[str] | None:
    """The pip command to run now, or None when no update is due (see `should_update`).

    Every argument defaults to this process: os.environ, the clock, `source_root()`, the
    real home. Tests pass their own.
    """
    env = os.environ if env is None else env
    stamp = cache_dir(env, home or Path.home()) / STAMP
    due, _ = should_update(
        time.time() if now is None else now,
        env,
        source_root() if source is None else source,
        stamp,
    )
    if not due:
        return None
    return [sys.executable, "-m", "pip", "install", "--upgrade", "--quiet", PACKAGE]


def _spawn(command: list[str], log: Path) -> None:
    """Start `command` detached, appending its output to `log`; reap it from a daemon thread
    (so it leaves no zombie in a long run, and no thread keeps flower from exiting)."""
    with log.open("a", encoding="utf-8") as out:
        out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n")
        out.flush()
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    threading.Thread(target=process.wait, name="flower-update", daemon=True).start()


def maybe_update(*, spawn: Spawn = _spawn, source: Path | None = None) -> None:
    """Start a background upgrade of flowerbox if one is due; return at once either way.

    `spawn(command, log_path)` starts the command and `source` replaces `source_root()`
    (tests pass a recorder and a tree without .git: they never run pip).
    """
    with contextlib.suppress(Exception):  # an update must never break start-up
        command = update_command(source=source)
        if command is None:
            return
        folder = cache_dir(os.environ, Path.home())
        folder.mkdir(parents=True, exist_ok=True)
        (folder / STAMP).touch()
        spawn(command, folder / LOG)
