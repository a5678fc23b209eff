"""`flower ... --events PATH`: the JSON lines flowerbox logs renders, written by the real CLI
against the fake API, and read back into the Events flower rendered."""

from __future__ import annotations

import json
from pathlib import Path

from flower import Event
from flower.testing import FakeAPI, sequence, text, tool
from tests.cli.conftest import flower, offline_env


def test_once_writes_each_event_as_one_json_line(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    target = workspace / "note.md"
    fake_api.script = sequence(
        tool("Write", {"file_path": str(target), "content": "# note\n"}), text("wrote note.md")
    )
    events = workspace.parent / "runs" / "flowerbox" / "r1" / "events.jsonl"
    done = flower(
        "once",
        "write a note",
        "-w",
        str(workspace),
        "--events",
        str(events),
        env=offline_env(fake_api, claude_home),
        cwd=workspace.parent,
    )
    assert done.returncode == 0, done.stderr
    lines = events.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]  # every line whole JSON
    kinds = [row["kind"] for row in rows]
    assert {"session", "tool_call", "tool_result", "text", "result"} <= set(kinds)
    [call] = [Event.from_json(row) for row in rows if row["kind"] == "tool_call"]
    assert call.tool == "Write" and str(target) in call.text  # the same line the terminal showed
    assert f"[Write] {call.text}" in done.stdout
    assert [Event.from_json(r).text for r in rows if r["kind"] == "text"] == ["wrote note.md"]
    assert all(isinstance(row["t"], float) and "raw" not in row for row in rows)
