"""The context economy: input bytes sent to the API over a long resumed run, flower vs bare.

4 steps x 50 turns, each step resuming the previous step's session; every 5th turn a 20 KB
Bash output, every 3rd a `git status`, the rest a short echo. (a) runs through Runtime with a
workbench (spill guard), trim, expire and prune; (b) runs the same script as bare SDK
sessions resumed by id. The figure is the total request bytes the fake API received.
Target: (a) / (b) <= 0.35. `--smoke`: 2 steps x 6 turns (one big output each), the target not
judged (python -m bench --smoke).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

from bench import _args
from flower.core.agent import AgentSpec
from flower.core.runtime import Runtime
from flower.testing import FakeAPI, Reply, Sequence, text, tool

STEPS = 4
TURNS = 50
SMOKE_STEPS, SMOKE_TURNS = 2, 6
TARGET = 0.35
BIG = "python3 -c \"print(('y' * 99 + chr(10)) * 200, end='')\""  # 20,000 characters


def command(turn: int) -> str:
    if turn % 5 == 0:
        return BIG
    if turn % 3 == 0:
        return "git status"
    return f"echo turn {turn}"


def script(steps: int, turns: int) -> Sequence:
    replies: list[Reply] = []
    for step in range(steps):
        replies += [tool("Bash", {"command": command(t)}) for t in range(1, turns)]
        replies.append(text(f"step {step} done"))
    return Sequence(replies)


def workspace_in(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    (ws / "README").write_text("a small repository\n")
    return ws


async def through_flower(api: FakeAPI, root: Path, steps: int) -> None:
    os.environ.update(api.env(home=root / "home"))
    runtime = Runtime(
        workspace=workspace_in(root),
        run_dir=root / "runs",
        trim=True,
        workbench=True,
        handoff=False,
    )
    spec = AgentSpec("longrun", "", allowed_tools=["Bash"])
    session = None
    try:
        for step in range(steps):
            result = await runtime.run(spec, f"do step {step}", resume=session)
            assert result.ok, result
            session = result.session_id
    finally:
        runtime.close()


async def bare(api: FakeAPI, root: Path, steps: int) -> None:
    ws = workspace_in(root)
    session = None
    for step in range(steps):
        options = ClaudeAgentOptions(
            cwd=ws,
            env=api.env(home=root / "home"),
            system_prompt={"type": "preset", "preset": "claude_code"},
            allowed_tools=["Bash"],
            resume=session,
        )
        async for message in query(prompt=f"do step {step}", options=options):
            if isinstance(message, ResultMessage):
                assert not message.is_error, message
                session = message.session_id


async def measure(steps: int, turns: int) -> tuple[int, int]:
    sent = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, runner in (("flower", through_flower), ("bare", bare)):
            root = Path(tmp) / name
            (root / "home").mkdir(parents=True)
            with FakeAPI(script(steps, turns)) as api:
                await runner(api, root, steps)
                assert len(api.main_requests()) == steps * turns, len(api.main_requests())
                sent.append(sum(r.size for r in api.main_requests()))
    return sent[0], sent[1]


def main(*, smoke: bool = False) -> int:
    for name in [k for k in os.environ if k.startswith(("ANTHROPIC_", "CLAUDE_"))]:
        del os.environ[name]
    steps, turns = (SMOKE_STEPS, SMOKE_TURNS) if smoke else (STEPS, TURNS)
    flower_bytes, bare_bytes = asyncio.run(measure(steps, turns))
    ratio = flower_bytes / bare_bytes
    print(f"{steps} resumed steps x {turns} turns, input bytes received by the API:")
    print(f"  (a) flower: spill + trim + expire + prune   {flower_bytes / 1e6:9.2f} MB")
    print(f"  (b) bare SDK sessions, resumed the same way {bare_bytes / 1e6:9.2f} MB")
    print(f"  ratio (a)/(b) {ratio:.3f}  (target <= {TARGET})")
    return 0 if ratio <= TARGET or smoke else 1


if __name__ == "__main__":
    sys.exit(main(smoke=_args.parse("bench.longrun", __doc__).smoke))
