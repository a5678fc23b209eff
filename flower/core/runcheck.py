"""Before a run spends anything: the state files of its run dir, read as the run will read
them, so a corrupt one stops it at once instead of after a paid step (issue 21).

    manifest.json      a list of JSON objects (flower.core.manifest.checked_rows)
    lineage.json       this flower's shape (flower.core.lineage)
    progress.json      this flower's shape (flower.core.progress)
    asks.json          a list of JSON objects (flower.core.inbox reads it)
    ask-history.json   JSON (the starter)
    wake.json          JSON (the starter's unfinished wake, flower.workflow.wake)

sessions.db is checked where it is opened (flower.stores: PRAGMA quick_check and its
tables), which Runtime does at construction too. Nothing is written; each file that is
missing is fine (a fresh run dir).
"""

from __future__ import annotations

from pathlib import Path

from flower.core.lang import text
from flower.core.lineage import Lineage
from flower.core.manifest import checked_rows
from flower.core.progress import Progress
from flower.core.rundir import RunDir
from flower.core.statefile import CorruptStateError, read_json

__all__ = ["check_state_files"]


def check_state_files(run_dir: Path, workspace: Path) -> None:
    """Read every JSON state file of `run_dir` (the run of `workspace`).

    Raises:
        CorruptStateError: one does not parse or has a shape this flower does not write;
            the message names it and the fix, and the file is left untouched.
    """
    layout = RunDir(run_dir)
    checked_rows(layout.manifest, read_json(layout.manifest, []))
    Lineage(run_dir, workspace).sessions()
    Progress(run_dir, workspace).check()
    asks = read_json(layout.asks, [])
    if not isinstance(asks, list) or not all(isinstance(ask, dict) for ask in asks):
        raise CorruptStateError(layout.asks, text("state.asks_corrupt", path=layout.asks))
    read_json(layout.ask_history, [])
    read_json(layout.wake, {})
