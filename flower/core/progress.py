"""progress.json: how far a workspace's run has come, for the process that wakes it.

Per workspace realpath (as lineage.json keys them): `runs`, the ids of the flower processes
that worked on the run since it started fresh (a woken run adds itself; its budget counts
what the others' manifest rows cost, a killed attempt's included), and `steps`, each step
under way with the index of its current attempt and the round its judge last ruled on, so a
wake continues the round (round 2 stays round 2, and `--rounds` counts across the kill) — with
the prompt that attempt began with when it was not the step's own (a judge's feedback) and
how many of the session's prompts held it then (`seen`), so a wake says it again if it never
reached the session (flower.core.told) —, and
`branch`, the git branch the run's isolated workers deliver to and the commit it started from
(flower.core.worktrees), so every process of the run stacks its work on the same branch::

    {"workspaces": {"/home/me/proj": {"runs": ["20260101-120000-ab12cd", ...],
                                      "steps": {"干活": {"attempt": 1, "round": 1,
                                                         "told": "...", "seen": 0}},
                                      "branch": {"name": "flower/20260101-120000-ab12cd",
                                                 "base": "<sha>"}}}}

A step's entry is dropped when the step ends (passed or given up), so a later wake of a
finished run starts its rounds afresh. Writes go through statefile (lock + atomic replace).
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path
from typing import Any

from flower.core.lang import text
from flower.core.rundir import RunDir
from flower.core.statefile import CorruptStateError, read_json, update_json

__all__ = ["Progress"]

_EMPTY: dict[str, Any] = {"workspaces": {}}


class Progress:
    """The progress of `workspace`'s run in `<run_dir>/progress.json`."""

    def __init__(self, run_dir: str | Path, workspace: str | Path) -> None:
        self.path = RunDir(Path(run_dir)).progress
        self.workspace = unicodedata.normalize("NFC", os.path.realpath(workspace))

    def join(self, run_id: str, *, woke: bool) -> list[str]:
        """Record that process `run_id` works on the run now; return the earlier processes'
        ids (none when the run starts fresh: `woke` False forgets them, every step and the
        branch)."""
        earlier: list[str] = []

        def add(data: Any) -> Any:
            mine = self._workspaces(data).setdefault(self.workspace, {})
            runs = [r for r in mine.get("runs", []) if isinstance(r, str)] if woke else []
            if not woke:
                mine["steps"] = {}
                mine.pop("branch", None)
            earlier.extend(r for r in runs if r != run_id)
            mine["runs"] = [*earlier, run_id]
            return data

        update_json(self.path, add, default=_EMPTY)
        return earlier

    def check(self) -> None:
        """Read the file as a wake will (CorruptStateError if it cannot be); writes nothing."""
        self._workspaces(read_json(self.path, _EMPTY))

    def step(self, name: str) -> dict[str, int]:
        """Where step `name` stood ({"attempt": index, "round": judged}), or {} if it is
        not under way."""
        entry = self._mine(read_json(self.path, _EMPTY)).get("steps", {}).get(name)
        if not isinstance(entry, dict):
            return {}
        return {k: v for k, v in entry.items() if k != "seen" and isinstance(v, int) and v >= 0}

    def told(self, name: str) -> tuple[str, int] | None:
        """The prompt step `name`'s current attempt began with, if it was not the step's
        own (a judge's feedback), and how many of its session's prompts held it before."""
        entry = self._mine(read_json(self.path, _EMPTY)).get("steps", {}).get(name)
        said = entry.get("told") if isinstance(entry, dict) else None
        seen = entry.get("seen", 0) if isinstance(entry, dict) else 0
        if not isinstance(said, str) or not isinstance(seen, int) or seen < 0:
            return None
        return said, seen

    def record(
        self, name: str, *, attempt: int, round: int, told: tuple[str, int] | None = None
    ) -> None:
        """Step `name` is at attempt index `attempt`, its judge has ruled `round` times;
        `told`: the attempt's own prompt and how many of the session's prompts held it."""
        entry: dict[str, int | str] = {"attempt": attempt, "round": round}
        if told is not None:
            entry.update(told=told[0], seen=told[1])
        self._update(name, entry)

    def forget(self, name: str) -> None:
        """Step `name` ended: a later wake starts its rounds afresh."""
        self._update(name, None)

    def branch(self) -> dict[str, str]:
        """The run's branch ({"name": ..., "base": ...}), or {} before its first worker."""
        entry = self._mine(read_json(self.path, _EMPTY)).get("branch")
        if not isinstance(entry, dict):
            return {}
        return {k: v for k, v in entry.items() if k in ("name", "base") and isinstance(v, str)}

    def claim_branch(self, name: str, base: str) -> dict[str, str]:
        """Record `name` (from `base`) as the run's branch unless it has one already; the
        branch that stands (a run's processes agree on the first one recorded)."""

        def claim(data: Any) -> Any:
            mine = self._workspaces(data).setdefault(self.workspace, {})
            if not isinstance(mine.get("branch"), dict):
                mine["branch"] = {"name": name, "base": base}
            return data

        update_json(self.path, claim, default=_EMPTY)
        return self.branch()

    def _update(self, name: str, entry: dict[str, int | str] | None) -> None:
        def change(data: Any) -> Any:
            steps = self._workspaces(data).setdefault(self.workspace, {}).setdefault("steps", {})
            if entry is None:
                steps.pop(name, None)
            else:
                steps[name] = entry
            return data

        update_json(self.path, change, default=_EMPTY)

    def _mine(self, data: Any) -> dict[str, Any]:
        mine = self._workspaces(data).get(self.workspace)
        return mine if isinstance(mine, dict) else {}

    def _workspaces(self, data: Any) -> dict[str, Any]:
        workspaces = data.get("workspaces") if isinstance(data, dict) else None
        if not isinstance(workspaces, dict) or not all(
            isinstance(e, dict) and isinstance(e.get("steps", {}), dict)
            for e in workspaces.values()
        ):
            raise CorruptStateError(self.path, text("state.progress_corrupt", path=self.path))
        return workspaces
