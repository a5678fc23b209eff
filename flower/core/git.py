"""flower's own git calls: bookkeeping that must behave the same on every machine.

A worker's commit, the run's branch, a merge or a patch for the user are flower's doing, not
the user's, so none of them may stop on what a user's setup adds around a commit: no hook runs
(`core.hooksPath=/dev/null`), nothing is signed (a signing key would ask for a passphrase
nobody types in an unattended run), no prompt waits for a terminal, and the caller's
repository variables (`GIT_DIR`, `GIT_WORK_TREE`, ...) never redirect a call. A repository
without a committer identity (a fresh box, a CI runner) commits as `flower
<flower@localhost>`.

Errors::

    GitError    git refused or could not run; `args` and git's own words on the exception
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from flower.core.lang import text
from flower.errors import FlowerError

__all__ = ["FALLBACK_IDENTITY", "GitError", "git", "must"]

FALLBACK_IDENTITY = ("flower", "flower@localhost")
GIT_TIMEOUT = 600.0
_SETTINGS = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",  # an included tracked file could name one (issue 37, G1)
    "-c", "commit.gpgSign=false",
    "-c", "tag.gpgSign=false",
    "-c", "merge.autoStash=false",
    "-c", "core.quotePath=false",
)  # fmt: skip


class GitError(FlowerError):
    """git refused a call (or could not run); `said` is its complaint, on one line."""

    def __init__(self, args: tuple[str, ...], said: str) -> None:
        super().__init__(text("git.failed", command=" ".join(args[:3]), said=said))
        self.said = said


@functools.cache
def _identity(cwd: Path) -> tuple[tuple[str, str], ...]:
    """The fallback identity as environment entries, when `cwd` has none of its own."""
    done = subprocess.run(
        ["git", "-C", str(cwd), "var", "GIT_COMMITTER_IDENT"],
        capture_output=True,
        env=_base_env(),
        check=False,
    )
    if done.returncode == 0:
        return ()
    name, email = FALLBACK_IDENTITY
    return tuple(
        (f"GIT_{role}_{what}", value)
        for role in ("AUTHOR", "COMMITTER")
        for what, value in (("NAME", name), ("EMAIL", email))
    )


@functools.cache
def _local_env() -> frozenset[str]:
    """The variables that name a caller's repository (`GIT_DIR`, `GIT_WORK_TREE`, ...), as
    this git lists them: never ours to follow."""
    listed = subprocess.run(
        ["git", "rev-parse", "--local-env-vars"], capture_output=True, text=True, check=False
    )
    return frozenset(listed.stdout.split())


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _local_env()}
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def git(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`git -C cwd args` with flower's settings; the result, whatever git answered."""
    try:
        return subprocess.run(
            ["git", "-C", str(cwd), *_SETTINGS, *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            env={**_base_env(), **dict(_identity(cwd))},
            timeout=GIT_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(args, str(exc)) from exc


def must(cwd: Path, *args: str, stdin: str | None = None) -> str:
    """git's stdout; GitError when it refused."""
    done = git(cwd, *args, stdin=stdin)
    if done.returncode != 0:
        raise GitError(args, " ".join(done.stderr.split())[-500:] or f"exit {done.returncode}")
    return done.stdout
