"""lineage.json: which session each step of a workspace last ran in, across processes.

The workflow remembers a step's session id after the step ran, and a later flower in the same
folder recalls it to resume instead of starting over. The SDK finds a session through a
project key derived from the workspace's realpath, so a session id is only worth recalling
from the same realpath: a workspace that moved silently starts fresh (recall returns None).

One file may serve several workspaces (a shared run_dir, or a folder that moved): each
realpath keeps its own mapping, so remembering from a new path never erases the old path's
lineage, and moving the folder back resumes again::

    {"workspaces": {"/home/me/proj": {"project_key": "-home-me-proj",
                                      "steps": {"clarify": "6f1c..."}}}}

Writes go through statefile (lock + atomic replace); reads take no lock.
"""

from __future__ import annotations

import os
import unicodedata
from functools import cached_property
from pathlib import Path
from typing import Any

from flower.core.lang import text
from flower.core.rundir import RunDir
from flower.core.statefile import CorruptStateError, read_json, update_json

__all__ = ["Lineage"]

_EMPTY: dict[str, Any] = {"workspaces": {}}  # read_json and update_json hand out copies


class Lineage:
    """The lineage of `workspace` in `<run_dir>/lineage.json`."""

    def __init__(self, run_dir: str | Path, workspace: str | Path) -> None:
        self.path = RunDir(Path(run_dir)).lineage
        # The SDK's own canonical form of a directory (realpath, then NFC), so a symlinked or
        # differently normalised spelling of the same folder finds the same lineage.
        self.workspace = unicodedata.normalize("NFC", os.path.realpath(workspace))

    @cached_property
    def project_key(self) -> str:
        """The session-store project key the SDK derives from this workspace."""
        # lazy: the SDK takes about a second to import, and recall() (wake_state,
        # `flower status`) must not pay for it.
        from claude_agent_sdk import project_key_for_directory

        return project_key_for_directory(self.workspace)

    def recall(self, step: str) -> str | None:
        """The session id `step` last ran in from this workspace's realpath, or None.

        Raises:
            CorruptStateError: lineage.json does not parse or has an unknown shape.
        """
        return self.sessions().get(step)

    def sessions(self) -> dict[str, str]:
        """Every remembered step of this workspace: {step name: session id}."""
        workspaces = self._workspaces(read_json(self.path, _EMPTY))
        steps: dict[str, str] = workspaces.get(self.workspace, {}).get("steps", {})
        return steps

    def remember(self, step: str, session_id: str) -> None:
        """Record that `step` ran in `session_id`; other steps and workspaces are kept.

        Raises:
            ValueError: `session_id` is empty (a step without a session has nothing to resume).
            CorruptStateError: lineage.json is unreadable; it is left untouched.
        """
        if not session_id:
            raise ValueError(f"step {step!r}: an empty session id cannot be resumed; skip it")
        project_key = self.project_key

        def add(data: dict[str, Any]) -> dict[str, Any]:
            mine = self._workspaces(data).setdefault(self.workspace, {})
            mine["project_key"] = project_key
            mine.setdefault("steps", {})[step] = session_id
            return data

        update_json(self.path, add, default=_EMPTY)

    def _workspaces(self, data: Any) -> dict[str, Any]:
        workspaces = data.get("workspaces") if isinstance(data, dict) else None
        if not isinstance(workspaces, dict) or not all(
            isinstance(entry, dict) and isinstance(entry.get("steps", {}), dict)
            for entry in workspaces.values()
        ):
            raise CorruptStateError(self.path, text("state.lineage_corrupt", path=self.path))
        return workspaces
