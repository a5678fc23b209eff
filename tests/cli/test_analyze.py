"""`flower analyze`: the report of a real run, compared with what the fake API was asked."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flower.cli.analyze import transcript_stats
from flower.testing import FakeAPI, When, rules, sequence, text, tool
from tests.json_contract import parse_document

FLOWER = [sys.executable, "-m", "flower.cli"]
LEAKY = ("ANTHROPIC_", "CLAUDE_", "FLOWER_")


def offline_env(home: Path, api: FakeAPI | None = None) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(LEAKY)}
    served = api.env(home=home) if api is not None else {"HOME": str(home)}
    return {**base, **served, "XDG_CONFIG_HOME": str(home / ".config"), "COLUMNS": "200"}


def flower(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOWER, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def run_dir(fake_api: FakeAPI, claude_home: Path, workspace: Path) -> Path:
    """A real `flower once`: Write, Read of a 3000-char file, a subagent that runs Bash, and a
    Bash call of the main thread that once's guard denies."""
    big = workspace / "big.txt"
    fake_api.script = rules(
        (
            When(kind="subagent"),
            sequence(tool("Bash", {"command": "echo from-sub"}), text("sub done")),
        ),
        (
            When(kind="main"),
            sequence(
                tool("Write", {"file_path": str(big), "content": "x" * 3000}),
                tool("Read", {"file_path": str(big)}),
                tool(
                    "Agent",
                    {
                        "description": "help",
                        "prompt": "say hi",
                        "subagent_type": "general-purpose",
                        "run_in_background": False,
                    },
                ),
                tool("Bash", {"command": "rm -rf nothing"}),
                text("done"),
            ),
        ),
    )
    runs = workspace.parent / "runs"
    done = flower(
        "once",
        "go",
        "-w",
        str(workspace),
        "--run-dir",
        str(runs),
        "--allow",
        "Write",
        "--allow",
        "Agent",
        env=offline_env(claude_home, fake_api),
        cwd=workspace.parent,
    )
    assert done.returncode == 0, done.stderr
    return runs


def test_analyze_counts_what_the_model_was_asked_to_do(
    run_dir: Path, fake_api: FakeAPI, claude_home: Path
) -> None:
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}  # events/ too
    done = flower("analyze", str(run_dir), "--json", env=offline_env(claude_home), cwd=run_dir)
    assert done.returncode == 0, done.stderr
    data = parse_document(done.stdout)
    (row,) = json.loads((run_dir / "manifest.json").read_text())
    (session,) = data["sessions"]
    assert session["session_id"] == row["session_id"] and session["steps"] == ["once"]
    assert session["api_calls"] == len(fake_api.main_requests())
    assert session["tools"] == {"Write": 1, "Read": 1, "Agent": 1, "Bash": 1}
    assert session["denied"] == {"Bash": 1}
    assert session["api_errors"] == 0 and session["compactions"] == 0
    (sub,) = session["subagents"]
    assert sub["agent_type"] == "general-purpose" and sub["subkey"].startswith("subagents/agent-")
    assert sub["api_calls"] == len(fake_api.subagent_requests()) == 2
    assert sub["tools"] == {"Bash": 1} and sub["denied"] == {}
    assert session["all"]["tools"] == {"Bash": 2, "Write": 1, "Read": 1, "Agent": 1}
    assert data["totals"]["api_calls"] == len(fake_api.messages_requests())
    assert data["totals"]["cost_usd"] == pytest.approx(row["cost_usd"])
    assert session["cost_usd"] == pytest.approx(row["cost_usd"])
    # The fake API answers input_tokens = request size // 4; the transcript records them.
    assert session["input_tokens"] == sum(r.size // 4 for r in fake_api.main_requests())
    biggest = data["largest_results"][0]
    assert biggest["tool"] == "Read" and biggest["chars"] >= 3000
    path = str(run_dir.parent / "ws" / "big.txt")  # long under pytest's tmp: cut at 60
    assert path.startswith(biggest["target"].removesuffix("…"))
    assert len(data["largest_results"]) == 5
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before  # unwritten


def test_analyze_tables_name_tools_and_the_subagent(run_dir: Path, claude_home: Path) -> None:
    done = flower("analyze", str(run_dir), env=offline_env(claude_home), cwd=run_dir)
    assert done.returncode == 0, done.stderr
    for needle in ("tool calls", "Agent", "general-purpose", "largest tool results", "rm -rf"):
        assert needle in done.stdout
    zh = flower("--lang", "zh", "analyze", str(run_dir), env=offline_env(claude_home), cwd=run_dir)
    for needle in ("工具调用", "Agent", "最大的工具结果", "合计:"):  # issue 36: --lang zh
        assert needle in zh.stdout, zh.stdout


@pytest.mark.english  # its English (issue 36)
def test_analyze_of_a_missing_or_empty_run_dir_exits_two(tmp_path: Path) -> None:
    env = offline_env(tmp_path)
    missing = flower("analyze", str(tmp_path / "nope"), env=env, cwd=tmp_path)
    assert missing.returncode == 2 and "no run directory at" in missing.stderr
    empty = flower("analyze", str(tmp_path), env=env, cwd=tmp_path)
    assert empty.returncode == 2 and "nothing ran" in empty.stderr


@pytest.mark.english
def test_analyze_of_a_garbage_sessions_db_says_move_it_aside_not_retry(tmp_path: Path) -> None:
    """It said "if a run holds it busy, retry": waiting never repairs a corrupt file."""
    (tmp_path / "manifest.json").write_text("[]")
    (tmp_path / "sessions.db").write_bytes(b"not a database at all" * 100)
    done = flower("analyze", str(tmp_path), env=offline_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    said = " ".join(done.stderr.split())
    assert "sessions.db cannot be read as a sessions database (file is not a database)" in said
    assert "move it aside" in said and "retry" not in said
    assert len(done.stderr.strip().splitlines()) <= 2 and "Traceback" not in done.stderr


def _assistant(mid: str, block: dict[str, Any], **extra: Any) -> dict[str, Any]:
    message = {"id": mid, "model": "m", "content": [block], "usage": {"input_tokens": 10}}
    return {"type": "assistant", "message": message, **extra}


def _result(tool_id: str, content: str, **extra: Any) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    return {"type": "user", "message": {"content": [block | extra]}}


def test_a_transcript_entry_nested_too_deep_is_left_out_not_a_crash(
    run_dir: Path, claude_home: Path
) -> None:
    """Issue 37, T2: in a flowerbox workspace the box writes sessions.db too; an entry of 10 KB
    of nested JSON was a RecursionError in the store's decoder."""
    with sqlite3.connect(run_dir / "sessions.db") as conn:
        (key, seq) = conn.execute(
            "SELECT store_key, max(seq) FROM entries WHERE store_key NOT LIKE '%/%/%'"
        ).fetchone()
        deep = '{"type": "user", "x": ' + "[" * 10_000 + "]" * 10_000 + "}"
        conn.execute(
            "INSERT INTO entries (store_key, seq, uid, payload) VALUES (?, ?, ?, ?)",
            (key, seq + 1, "deep", deep),
        )
    done = flower("analyze", str(run_dir), "--json", env=offline_env(claude_home), cwd=run_dir)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    [session] = parse_document(done.stdout)["sessions"]
    assert session["tools"]["Write"] == 1


def test_transcript_stats_counts_denials_synthetic_errors_and_compactions() -> None:
    entries = [
        _assistant("m1", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}),
        _result("t1", "PreToolUse:Bash hook error: no", is_error=True),
        {"type": "system", "subtype": "api_error", "error": {"status": 529}},
        {
            "type": "assistant",
            "isApiErrorMessage": True,
            "message": {"model": "<synthetic>", "content": [{"type": "text", "text": "API Error"}]},
        },
        {"type": "system", "subtype": "compact_boundary", "compactMetadata": {"trigger": "auto"}},
        _assistant("m2", {"type": "tool_use", "id": "t2", "name": "Read", "input": {"path": "a"}}),
        _result("t2", "y" * 50),
        _assistant("m3", {"type": "text", "text": "done"}),
    ]
    stats = transcript_stats(entries, session_id="s")
    assert stats["tools"] == {"Bash": 1, "Read": 1} and stats["denied"] == {"Bash": 1}
    assert stats["api_errors"] == 1  # the synthetic message, not each retry's system entry
    assert stats["compactions"] == 1 and stats["api_calls"] == 3
    assert stats["input_tokens"] == 30 and stats["cost_usd"] is None
    read = next(r for r in stats["results"] if r["tool"] == "Read")
    assert read == {"session_id": "s", "subagent": None, "tool": "Read", "chars": 50, "target": "a"}
