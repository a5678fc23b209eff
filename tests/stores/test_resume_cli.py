"""A real resume through the CLI in new processes: what the model is shown is the trimmed,
expired, pruned and healed history, and its next turn works."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from flower.testing import FakeAPI, Reply, Sequence, ToolUse, http_error, text, tool

STEP = """
import asyncio, sys
from flower.core.agent import AgentSpec
from flower.core.runtime import Runtime
from flower.stores import EphemeralPolicy, TrimPolicy

workspace, runs, resume = sys.argv[1], sys.argv[2], sys.argv[3] or None
# resilience off: the first process must let the 500 end its step (a synthetic error stays)
rt = Runtime(workspace=workspace, run_dir=runs, trim=TrimPolicy(keep_recent=2),
             ephemeral=EphemeralPolicy(keep_recent=1), resilience=False)
spec = AgentSpec("s", "", allowed_tools=["Bash"])
result = asyncio.run(rt.run(spec, "carry on" if resume else "start", resume=resume))
print(result.session_id, result.ok, result.text, flush=True)
rt.close()
"""

SLEEPER = "toolu_sleeper_0001"
# The CLI refuses a standalone `sleep N` (it wants Monitor), so sleep in Python.
LONG_CALL = "python3 -c 'import time; time.sleep(30)'"


def script() -> Sequence:
    return Sequence(
        [
            tool("Bash", {"command": "seq 1 2000"}),  # ~8.9k chars: old and big -> spilled
            tool("Bash", {"command": "ls"}),  # a glance: old -> expired
            *[tool("Bash", {"command": f"echo filler {i}"}) for i in range(3)],
            # First asked: a 500 ends the first process's step (a synthetic error is stored).
            # Asked again on resume: a long call, during which the second process is killed.
            Reply(
                blocks=(ToolUse("Bash", {"command": LONG_CALL}, id=SLEEPER),),
                fault=http_error(500, times=1),
            ),
            text("recovered and done"),
        ]
    )


def start(
    env: dict[str, str], workspace: Path, runs: Path, resume: str = ""
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", STEP, str(workspace), str(runs), resume],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so the kill takes the CLI child with it
    )


def stored(runs: Path, needle: str) -> bool:
    db = sqlite3.connect(f"file:{runs / 'sessions.db'}?mode=ro", uri=True)
    try:
        query = "SELECT count(*) FROM entries WHERE payload LIKE ?"
        return bool(db.execute(query, (f"%{needle}%",)).fetchone()[0])
    finally:
        db.close()


def test_resume_in_new_processes_sees_the_reshaped_history(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    fake_api.script = script()
    runs = workspace.parent / "runs"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env = {**base, **fake_api.env(home=claude_home), "XDG_CONFIG_HOME": str(claude_home)}

    first = start(env, workspace, runs)
    out, err = first.communicate(timeout=120)
    session_id, ok, _ = out.split(" ", 2)
    assert ok == "False", err  # the 500 ended it
    assert stored(runs, '"isApiErrorMessage": true') or stored(runs, '"isApiErrorMessage":true')

    second = start(env, workspace, runs, resume=session_id)
    deadline = time.monotonic() + 60
    while not stored(runs, SLEEPER) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert stored(runs, SLEEPER), "the sleep call never reached the store"
    os.killpg(second.pid, signal.SIGKILL)
    second.communicate(timeout=30)

    third = start(env, workspace, runs, resume=session_id)
    out, err = third.communicate(timeout=120)
    assert out.split(" ", 2)[:2] == [session_id, "True"], err
    assert out.split(" ", 2)[2].strip() == "recovered and done"

    shown = fake_api.main_requests()[-1]
    assert "工具结果已归档" in shown.conversation_text  # the big seq output became a pointer
    assert "\\n1999\\n2000" not in shown.conversation_text
    spilled = list((workspace / ".flower" / "spill").glob("*.txt"))
    assert len(spilled) == 1 and spilled[0].read_text().endswith("1999\n2000")
    assert "ls 的结果已过期" in shown.conversation_text  # the glance expired
    assert "API Error" not in shown.conversation_text  # the synthetic error was pruned
    healed = shown.result_for(SLEEPER)
    assert healed is not None and healed.is_error  # the orphan got a result
    assert [r.answered for r in fake_api.requests].count("tool_use:Bash") >= 6
