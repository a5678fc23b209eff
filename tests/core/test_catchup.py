"""flower.core.catchup: the store takes from the CLI's own transcript files what a kill kept
from it, and nothing that would move a session back."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from claude_agent_sdk import project_key_for_directory

from flower.core.catchup import catch_up, salvage
from flower.stores import PruningSessionStore

SID = str(uuid.UUID(int=7))


def entry(n: int, **extra: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": f"u{n}", "message": {"content": f"said {n}"}, **extra}


def write(config: Path, ws: Path, name: str, entries: list[dict[str, Any]]) -> Path:
    path = config / "projects" / project_key_for_directory(ws) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in entries) + '{"cut sho')  # a torn line
    return path


def test_what_the_store_lacks_is_added_and_a_file_behind_the_store_is_left(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    config = tmp_path / "config"
    store = PruningSessionStore(tmp_path / "s.db", ws)
    key = {"project_key": project_key_for_directory(ws), "session_id": SID}
    try:
        store.add(key, [entry(1)])  # type: ignore[arg-type]
        write(config, ws, f"{SID}.jsonl", [entry(1), {"type": "cost-state"}, entry(2)])
        sub = [{"type": "user", "uuid": "s1", "agentId": "a1"}]
        write(config, ws, f"{SID}/subagents/agent-a1.jsonl", sub)
        meta = config / "projects" / key["project_key"] / SID / "subagents" / "agent-a1.meta.json"
        meta.write_text(json.dumps({"agentType": "coder", "toolUseId": "d1"}))
        assert catch_up(store, ws, SID, config=config) == 3  # u2, and the subagent + its meta
        assert [e.get("uuid") for e in store.read(key) or []] == ["u1", "u2"]  # no cost-state
        subkey = {**key, "subpath": "subagents/agent-a1"}
        assert [e["type"] for e in store.read(subkey) or []] == ["agent_metadata", "user"]
        assert catch_up(store, ws, SID, config=config) == 0  # again: nothing new
        store.add(key, [entry(3)])  # type: ignore[arg-type]  # a later process wrote past
        write(config, ws, f"{SID}.jsonl", [entry(1), entry(2), entry(4)])
        assert salvage(store, ws, config) == 0
        assert [e.get("uuid") for e in store.read(key) or []] == ["u1", "u2", "u3"]
    finally:
        store.close()
