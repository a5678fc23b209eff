"""The Claude Code CLI lives no longer than the flower process that started it.

Without this, a SIGKILLed flower leaves its CLI running: it finishes the turn it is in and
sends more API requests (paid traffic, and writes racing the next run). On Linux, flower
therefore hands the SDK `reaper.sh` as `cli_path`, which runs the CLI the SDK would have run
(the bundled binary, else `claude` on PATH, as the SDK looks it up) under reaper.py: a process
that the kernel signals when flower dies, and that then kills the CLI and everything the CLI
started (reaper.py's docstring has the whole picture).

Elsewhere (macOS has no prctl) the SDK runs the CLI itself, as before: there a killed flower
can still leave its CLI running until the CLI notices that its stdin has closed.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from flower.core.bundled import sdk_folder
from flower.core.reaper import ENV_CLI, ENV_PARENT, ENV_PYTHON

LAUNCHER = Path(__file__).with_name("reaper.sh")


@dataclass(frozen=True)
class Lifeline:
    """What build_options adds: the launcher as cli_path and what it needs to know."""

    cli_path: str
    env: dict[str, str]


def bundled_cli() -> str | None:
    """The CLI the SDK runs when no cli_path is given: its bundled binary, else PATH's."""
    folder = sdk_folder()
    bundled = folder / "_bundled" / "claude" if folder else None
    return str(bundled) if bundled and bundled.is_file() else shutil.which("claude")


def lifeline() -> Lifeline | None:
    """The launcher for this process, or None where it cannot work (not Linux, no CLI).

    Without a CLI the SDK raises its own CLINotFoundError, which says how to install one.
    """
    cli = bundled_cli()
    if not sys.platform.startswith("linux") or cli is None:
        return None
    env = {ENV_PYTHON: sys.executable, ENV_CLI: cli, ENV_PARENT: str(os.getpid())}
    return Lifeline(cli_path=str(LAUNCHER), env=env)
