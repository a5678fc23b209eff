"""Runtime overhead: a scripted 50-turn step through Runtime.run vs bare query(), same run.

Both drive the same CLI against the same fake API script (49 Bash calls, then an answer).
Runtime adds the SQLite session store (eager mirror flush), event normalisation and the
manifest. Target: Runtime's wall time <= 1.15 x the bare SDK's. `--smoke`: 5 turns, one round,
the target not judged (python -m bench --smoke).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from claude_agent_sdk import ClaudeAgentOptions, query

from bench import _args
from flower.core.agent import AgentSpec
from flower.core.runtime import Runtime
from flower.testing import FakeAPI, Sequence, text, tool

TURNS = 50
ROUNDS = 3
SMOKE_TURNS, SMOKE_ROUNDS = 5, 1
TARGET = 1.15


def script(turns: int) -> Sequence:
    calls = [tool("Bash", {"command": f"echo turn {i}"}) for i in range(turns - 1)]
    return Sequence([*calls, text("all turns done")])


async def bare(api: FakeAPI, workspace: Path, home: Path, turns: int) -> float:
    options = ClaudeAgentOptions(
        cwd=workspace,
        env=api.env(home=home),
        system_prompt={"type": "preset", "preset": "claude_code"},
        allowed_tools=["Bash"],
    )
    started = time.perf_counter()
    async for _ in query(prompt="go", options=options):
        pass
    return time.perf_counter() - started


async def through_runtime(api: FakeAPI, workspace: Path, home: Path, turns: int) -> float:
    os.environ.update(api.env(home=home))
    runtime = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        started = time.perf_counter()
        result = await runtime.run(AgentSpec("bench", "", allowed_tools=["Bash"]), "go")
        elapsed = time.perf_counter() - started
    finally:
        runtime.close()
    assert result.ok and result.num_turns == turns, result
    return elapsed


async def measure(turns: int, rounds: int) -> tuple[list[float], list[float]]:
    bare_times, runtime_times = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(rounds):
            for name, runner, times in (
                ("bare", bare, bare_times),
                ("runtime", through_runtime, runtime_times),
            ):
                root = Path(tmp) / f"{name}-{round_}"
                (root / "ws").mkdir(parents=True)
                (root / "home").mkdir()
                with FakeAPI(script(turns)) as api:
                    times.append(await runner(api, root / "ws", root / "home", turns))
    return bare_times, runtime_times


def main(*, smoke: bool = False) -> int:
    for name in [k for k in os.environ if k.startswith(("ANTHROPIC_", "CLAUDE_"))]:
        del os.environ[name]
    turns, rounds = (SMOKE_TURNS, SMOKE_ROUNDS) if smoke else (TURNS, ROUNDS)
    bare_times, runtime_times = asyncio.run(measure(turns, rounds))
    b, r = statistics.median(bare_times), statistics.median(runtime_times)
    ratio = r / b
    print(f"{turns}-turn step, median of {rounds} (seconds):")
    print(f"  bare query()   {b:7.2f}   {' '.join(f'{t:.2f}' for t in bare_times)}")
    print(f"  Runtime.run    {r:7.2f}   {' '.join(f'{t:.2f}' for t in runtime_times)}")
    print(f"  ratio          {ratio:7.3f}x  (target <= {TARGET}x)")
    return 0 if ratio <= TARGET or smoke else 1


if __name__ == "__main__":
    sys.exit(main(smoke=_args.parse("bench.runtime", __doc__).smoke))
