"""manifest.json: one row per finished step, shared by every flower writing to a run_dir.

The file is a JSON list of rows (dicts). Each row carries a `run` field, the id of the
flower process that wrote it. A write replaces that run's rows and keeps everyone else's, so
two flowers under one run_dir never erase each other's accounts as long as their run ids
differ. The read-dedupe-write cycle runs under the file's lock (statefile.update_json), which
makes it safe where the seeds' plain re-read was racy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flower.core.statefile import CorruptStateError, update_json

__all__ = ["merge_rows", "record_rows"]


def merge_rows(current: Sequence[Any], rows: Sequence[Mapping[str, Any]], *, run: str) -> list[Any]:
    """`current` with the rows of `run` replaced by `rows`, each stamped with `run`.

    Other runs' rows keep their order; this run's rows take the place of its first old row,
    or go at the end. A row whose `run` names another run is a caller bug and raises.
    """
    stamped = []
    for row in rows:
        if row.get("run", run) != run:
            raise ValueError(f"row {row!r} belongs to run {row['run']!r}, not {run!r}")
        stamped.append({**row, "run": run})
    merged: list[Any] = []
    placed = False
    for old in current:
        if not (isinstance(old, dict) and old.get("run") == run):
            merged.append(old)
        elif not placed:
            merged.extend(stamped)
            placed = True
    if not placed:
        merged.extend(stamped)
    return merged


def record_rows(path: Path, rows: Sequence[Mapping[str, Any]], *, run: str) -> list[Any]:
    """Write `rows` as run `run`'s rows of the manifest at `path`; return the whole list.

    Raises:
        CorruptStateError: the manifest is not valid JSON or not a list; it is left as is.
        LockTimeoutError: the manifest's lock stayed held (statefile.DEFAULT_LOCK_TIMEOUT).
    """

    def merge(current: Any) -> list[Any]:
        if not isinstance(current, list):
            raise CorruptStateError(
                path,
                f"{path} holds a JSON {type(current).__name__}, not a list of rows; it was "
                "left untouched: move it aside and rerun",
            )
        return merge_rows(current, rows, run=run)

    return update_json(path, merge, default=[])
