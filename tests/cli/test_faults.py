"""The long job through six faults and a SIGKILL (issue 19), end to end: the real CLI, the
scripted fake model of bench/faults.py. It must end achieved, having redone nothing it had
finished and left nothing of the killed run behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bench.faults import SEND, run_faulted
from flower.core.manifest import INTERRUPTED, row_state
from tests.json_contract import parse_document


def test_six_faults_and_a_kill_end_achieved_with_nothing_redone_or_left(tmp_path: Path) -> None:
    job = run_faulted(tmp_path)
    assert job.first.returncode == -9  # SIGKILL: the killed run had no say
    assert job.code == 0, job.summary
    assert parse_document(json.dumps(job.summary))["status"] == "achieved"
    notes = job.workspace / ".flower" / "notes"
    assert (notes / "目标.md").read_bytes() == job.goal_at_kill  # the frozen goal, untouched
    assert (notes / "需求.md").read_bytes() == job.brief_at_kill  # the same ask amends nothing
    assert job.after_kill == []  # nothing of the killed process tree called the API
    assert any(r.contains(SEND) for r in job.requests)  # the message from another process
    steps = [step["name"] for step in job.summary["steps"]]  # type: ignore[union-attr,index]
    assert "设定目标" not in steps  # the goal is not set again after the kill
    assert "干活·判定#2" in steps and "干活·判定#1" not in steps  # round 2 is still round 2
    runs = job.workspace.parent / "runs"
    rows = json.loads((runs / "manifest.json").read_text())
    killed = [row for row in rows if row_state(row, runs) == INTERRUPTED]
    assert len(killed) == 1 and killed[0]["session_id"]  # the attempt the kill cut short
    assert killed[0]["usage"]["input_tokens"] > 0 and killed[0]["cost_usd"] > 0
    temp = Path(os.environ.get("TMPDIR", "/tmp"))
    assert not [p for p in temp.glob("claude-resume-*") if str(job.workspace) in _owner(p)]


def _owner(folder: Path) -> str:
    """What a claude-resume folder says about the workspace it was made for (its files)."""
    try:
        return " ".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())
    except OSError:
        return ""
