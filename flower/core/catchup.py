"""Catch the store up with what the CLI wrote on this machine before a kill (issue 30).

The CLI writes each session to its own transcript file (`<config>/projects/<project key>/
<session>.jsonl`, its subagents beside it) and mirrors the entries to flower's store a little
later. A kill in between leaves the store short: of a tool's result, of a clarifier's whole
session while its question waits for a human. A wake would then resume without them, or
start the step over. A session resumed from the store writes its file in a temp folder
(`claude-resume-*`) that the next run removes (flower.core.leftovers): `salvage` catches the
store up from it first. `catch_up` appends to the store, per transcript, the entries the local
file has and the store lacks, but only where the store holds nothing the file lacks: a later
process that resumed the session wrote past the file (into a temp folder), and entries of
the file appended after its would move the session's leaf back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from claude_agent_sdk import SessionKey, project_key_for_directory

from flower.stores.prune import PruningSessionStore

__all__ = ["catch_up", "salvage", "transcript_file"]


def transcript_file(workspace: Path, session_id: str, *, config: Path | None = None) -> Path:
    """Where the CLI (started by flower in `workspace`) writes `session_id`'s transcript:
    in `config` (a resumed session's temp folder), else its own config folder."""
    home = config or Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
    return home / "projects" / project_key_for_directory(workspace) / f"{session_id}.jsonl"


def catch_up(
    store: PruningSessionStore, workspace: Path, session_id: str, *, config: Path | None = None
) -> int:
    """Append what the local transcript files of `session_id` hold and the store lacks;
    how many entries that was (0 when there is no file, or nothing is missing)."""
    main = transcript_file(workspace, session_id, config=config)
    if not main.is_file() or main.is_symlink():
        return 0
    key: SessionKey = {"project_key": main.parent.name, "session_id": session_id}
    added = _fill(store, key, _entries(main))
    folder = main.with_suffix("") / "subagents"
    for path in sorted(folder.glob("agent-*.jsonl")) if folder.is_dir() else []:
        sub: SessionKey = {**key, "subpath": f"subagents/{path.stem}"}
        local = _entries(path)
        meta = _sidecar(path.with_suffix(".meta.json"))
        added += _fill(store, sub, ([meta] if meta else []) + local)
    return added


def salvage(store: PruningSessionStore, workspace: Path, config: Path) -> int:
    """catch_up every session a killed run's resume folder `config` holds for `workspace`
    (flower.core.leftovers calls it before removing the folder)."""
    project = config / "projects" / project_key_for_directory(workspace)
    files = sorted(project.glob("*.jsonl")) if project.is_dir() else []
    return sum(catch_up(store, workspace, f.stem, config=config) for f in files)


def _fill(store: PruningSessionStore, key: SessionKey, local: list[dict[str, Any]]) -> int:
    stored = store.read(key) or []
    have = {e["uuid"] for e in stored if isinstance(e.get("uuid"), str)}
    known = {e["uuid"] for e in local if isinstance(e.get("uuid"), str)}
    if have - known:  # a later process wrote past this file: it is not the newest
        return 0
    missing = [e for e in local if isinstance(e.get("uuid"), str) and e["uuid"] not in have]
    if not stored:  # the store never had this transcript: take its metadata too
        missing = [e for e in local if e.get("type") == "agent_metadata"] + missing
    elif any(e.get("type") == "agent_metadata" and e.get("finished") for e in local) and not any(
        e.get("type") == "agent_metadata" and e.get("finished") for e in stored
    ):
        missing = [*missing, *(e for e in local if e.get("type") == "agent_metadata")]
    if missing:
        store.add(key, missing)  # type: ignore[arg-type]
    return len(missing)


def _entries(path: Path) -> list[dict[str, Any]]:
    """The file's entries; a line cut short by the kill (the last one) is left out."""
    found: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            found.append(entry)
    return found


def _sidecar(path: Path) -> dict[str, Any] | None:
    """A subagent's `.meta.json`, as the agent_metadata entry the live mirror sends."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {**meta, "type": "agent_metadata"} if isinstance(meta, dict) else None
