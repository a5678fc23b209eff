"""Guard overhead: a 100-tool-call step with the workbench hooks firing vs none, same run.

Guarded: a delegate_only spec with glance on a Runtime with a workbench, calling `ls`: every
call goes through delegate_guard (PreToolUse, allowed as a glance) and spill_guard
(PostToolUse), each a control round trip between the CLI and this process. Plain: the same
script with no hook that matches Bash. Target: <= 15 ms added per tool call. `--smoke`: 5 calls,
one round, the target not judged (python -m bench --smoke).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import _args
from flower.core.agent import AgentSpec
from flower.core.runtime import Runtime
from flower.core.workbench import Workbench
from flower.testing import FakeAPI, Sequence, text, tool

CALLS = 100
ROUNDS = 3
SMOKE_CALLS, SMOKE_ROUNDS = 5, 1
TARGET_MS = 15.0


def script(calls: int) -> Sequence:
    return Sequence([*(tool("Bash", {"command": "ls"}) for _ in range(calls)), text("done")])


async def one(root: Path, calls: int, *, guarded: bool) -> float:
    workspace, home = root / "ws", root / "home"
    workspace.mkdir(parents=True)
    home.mkdir()
    with FakeAPI(script(calls)) as api:
        os.environ.update(api.env(home=home))
        runtime = Runtime(
            workspace=workspace,
            run_dir=root / "runs",
            workbench=Workbench(workspace) if guarded else False,
            spill_threshold=4000 if guarded else None,
        )
        spec = AgentSpec("bench", "", allowed_tools=["Bash"], delegate_only=guarded, glance=guarded)
        try:
            started = time.perf_counter()
            result = await runtime.run(spec, "go")
            elapsed = time.perf_counter() - started
        finally:
            runtime.close()
    errors = [r for r in api.requests[-1].tool_results() if r.is_error]
    assert result.ok and not errors, (result, errors[:1])
    return elapsed


async def measure(calls: int, rounds: int) -> tuple[list[float], list[float]]:
    plain, guarded = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(rounds):
            plain.append(await one(Path(tmp) / f"plain-{round_}", calls, guarded=False))
            guarded.append(await one(Path(tmp) / f"guarded-{round_}", calls, guarded=True))
    return plain, guarded


def main(*, smoke: bool = False) -> int:
    for name in [k for k in os.environ if k.startswith(("ANTHROPIC_", "CLAUDE_"))]:
        del os.environ[name]
    calls, rounds = (SMOKE_CALLS, SMOKE_ROUNDS) if smoke else (CALLS, ROUNDS)
    plain, guarded = asyncio.run(measure(calls, rounds))
    p, g = statistics.median(plain), statistics.median(guarded)
    added_ms = (g - p) / calls * 1000
    print(f"{calls} tool calls, median of {rounds} (seconds):")
    print(f"  no hooks          {p:6.2f}   {' '.join(f'{t:.2f}' for t in plain)}")
    print(f"  workbench hooks   {g:6.2f}   {' '.join(f'{t:.2f}' for t in guarded)}")
    print(f"  ratio {g / p:.3f}x; added per call {added_ms:.1f} ms (target <= {TARGET_MS} ms)")
    return 0 if added_ms <= TARGET_MS or smoke else 1


if __name__ == "__main__":
    sys.exit(main(smoke=_args.parse("bench.guards", __doc__).smoke))
