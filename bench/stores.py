"""Session-store benchmark: append throughput and load() latency, next to the SDK's
InMemorySessionStore measured in the same run.

Transcripts are shaped like the CLI's (a parentUuid chain, one assistant entry per content
block, Bash/Read/Write tool calls with structured ``toolUseResult`` copies, some big Bash
outputs, some ephemeral glances, refusals and synthetic API errors). Appends go in batches
of 500, as the SDK's mirror flushes them. load() runs every layer (expire, trim, prune,
heal). Three load figures: "first" writes the spill files; "cold" is a store opened afresh
(nothing decoded yet: a new process resuming); "repeat" follows an append to a store that
loaded the session before (a run resuming the same session again, which decodes only the
new rows, flower/stores/recent.py).

Targets are checked on the best of those loads (as timeit advises: slower repeats come from
other processes, and this is a 2-core VM with neighbours); the median is printed beside it.
Targets, on the cold figure: load() of 10k entries <= 150 ms; 100k <= 12 x 10k; and
append >= 20k entries/s. `--smoke`: 500, 1k and 10k entries (the 10k figure in the place of
100k), the targets not judged (python -m bench --smoke).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
from claude_agent_sdk import InMemorySessionStore, SessionKey, SessionStore

from bench import _args
from flower.stores import PruningSessionStore, SqliteSessionStore

SIZES = (1_000, 10_000, 100_000)
SMOKE_SIZES = (500, 1_000, 10_000)
BATCH = 500
KEY: SessionKey = {"project_key": "-bench-ws", "session_id": "4f1c2d3e-0000-4000-8000-000000000001"}
GLANCES = (
    "git status",
    "git diff --stat",
    "ls -la src",
    "git log --oneline -5",
    "ps aux | grep py",
)
COMMANDS = ("pytest -q", "make build", "python scripts/gen.py", "npm run lint", "cargo test")


class Transcript:
    """A deterministic CLI-shaped transcript of ``size`` entries."""

    def __init__(self, size: int, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.entries: list[dict[str, Any]] = []
        self.responses = 0
        while len(self.entries) < size:
            self._exchange()
        del self.entries[size:]

    def _add(self, entry: dict[str, Any]) -> None:
        n = len(self.entries)
        self.entries.append(
            {
                "parentUuid": self.entries[-1]["uuid"] if self.entries else None,
                "isSidechain": False,
                "userType": "external",
                "cwd": "/home/dev/project",
                "sessionId": KEY["session_id"],
                "version": "2.1.332",
                "gitBranch": "main",
                "uuid": f"00000000-0000-4000-8000-{n:012d}",
                "timestamp": f"2026-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
                **entry,
            }
        )

    def _response(self, *blocks: dict[str, Any]) -> None:
        self.responses += 1
        message_id = f"msg_{self.responses:08d}"
        for block in blocks:
            usage = {"input_tokens": 12, "cache_read_input_tokens": 40_000, "output_tokens": 300}
            message = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-5-5",
            }
            message |= {"content": [block], "stop_reason": None, "usage": usage}
            self._add(
                {"type": "assistant", "message": message, "requestId": f"req_{self.responses}"}
            )

    def _result(
        self, tool_id: str, content: str, *, is_error: bool = False, structured: Any = None
    ) -> None:
        block = {
            "type": "tool_result",
            "tool_use_id": tool_id,
            "content": content,
            "is_error": is_error,
        }
        self._add(
            {
                "type": "user",
                "message": {"role": "user", "content": [block]},
                "toolUseResult": structured if structured is not None else content,
                "sourceToolAssistantUUID": self.entries[-1]["uuid"],
            }
        )

    def _exchange(self) -> None:
        rng = self.rng
        roll = rng.random()
        if not self.entries or roll < 0.01:
            self._add(
                {
                    "type": "user",
                    "message": {"role": "user", "content": "Continue with the next item. " * 5},
                }
            )
        if roll < 0.005:
            system = {"type": "system", "subtype": "api_error", "level": "error", "retryAttempt": 1}
            self._add(
                system | {"error": {"status": 529, "formatted": "Overloaded"}, "maxRetries": 2}
            )
            message = {"id": f"err{len(self.entries)}", "role": "assistant", "model": "<synthetic>"}
            message |= {"content": [{"type": "text", "text": "API Error: 529 Overloaded"}]}
            self._add(
                {
                    "type": "assistant",
                    "isApiErrorMessage": True,
                    "error": "server_error",
                    "message": message,
                }
            )
            return
        tool_id = f"toolu_{len(self.entries):010d}"
        thinking = {
            "type": "thinking",
            "thinking": "Let me look. " * rng.randint(5, 40),
            "signature": "sig" * 20,
        }
        tool = rng.choices(("glance", "bash", "read", "write", "deny"), (25, 35, 20, 19, 1))[0]
        if tool in ("glance", "bash", "deny"):
            command = rng.choice(GLANCES if tool == "glance" else COMMANDS)
            self._response(
                thinking,
                {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}},
            )
            if tool == "deny":
                self._result(
                    tool_id, "PreToolUse:Bash hook error: delegate this to a worker", is_error=True
                )
                return
            big = tool == "bash" and rng.random() < 0.05
            output = "test_module.py::test_case PASSED\n" * (
                rng.randint(150, 900) if big else rng.randint(1, 40)
            )
            self._result(
                tool_id,
                output,
                structured={"stdout": output, "stderr": "", "interrupted": False, "isImage": False},
            )
        elif tool == "read":
            self._response(
                thinking,
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": "Read",
                    "input": {"file_path": "/home/dev/project/src/app.py"},
                },
            )
            text = "     1\tdef handler(event, context):\n" * rng.randint(10, 150)
            self._result(
                tool_id,
                text,
                structured={"type": "text", "file": {"filePath": "src/app.py", "content": text}},
            )
        else:
            body = "x = compute(value)\n" * rng.randint(5, 60)
            self._response(
                thinking,
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": "Write",
                    "input": {"file_path": "/home/dev/project/out.py", "content": body},
                },
            )
            self._result(tool_id, "File created successfully at: /home/dev/project/out.py")
        if rng.random() < 0.3:
            self._response(
                {"type": "text", "text": "Done with this part; moving on. " * rng.randint(1, 8)}
            )


def _timed(run: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    asyncio.run(run())  # type: ignore[arg-type]
    return time.perf_counter() - start


def _append_rate(store: SessionStore, entries: list[dict[str, Any]]) -> float:
    async def run() -> None:
        for start in range(0, len(entries), BATCH):
            await store.append(KEY, entries[start : start + BATCH])  # type: ignore[arg-type]

    return len(entries) / _timed(run)


def _load_ms(store: SessionStore, repeats: int) -> list[float]:
    async def run() -> None:
        assert await store.load(KEY) is not None

    return [_timed(run) * 1000 for _ in range(repeats)]


def _cold_ms(open_store: Callable[[], SqliteSessionStore], repeats: int) -> list[float]:
    """Loads by stores opened afresh on the same file, as a new process would."""
    times = []
    for _ in range(repeats):
        store = open_store()
        try:
            times += _load_ms(store, 1)
        finally:
            store.close()
    return times


def _repeat_ms(store: SessionStore, repeats: int) -> list[float]:
    """Loads of a session this store loaded before, each after a small append."""
    times = []
    for n in range(repeats):
        extra = [{"type": "progress", "n": n}]
        asyncio.run(store.append(KEY, extra))
        times += _load_ms(store, 1)
    return times


def measure(size: int, workdir: Path) -> dict[str, float]:
    entries = Transcript(size).entries
    repeats = 3 if size >= 100_000 else 7
    memory = InMemorySessionStore()
    sqlite = PruningSessionStore(workdir / f"{size}.db", workdir / "ws")
    try:
        figures = {
            "mb": sum(len(str(e)) for e in entries) / 1e6,
            "append_sqlite": _append_rate(sqlite, entries),
            "append_memory": _append_rate(memory, entries),
        }
        first = _load_ms(sqlite, 1)[0]
        path = workdir / f"{size}.db"
        cold = _cold_ms(lambda: PruningSessionStore(path, workdir / "ws"), repeats)
        figures |= {
            "load_first": first,
            "load_layers": min(cold),
            "load_layers_median": statistics.median(cold),
            "load_repeat": min(_repeat_ms(sqlite, repeats)),
            "load_raw": min(_cold_ms(lambda: SqliteSessionStore(path), repeats)),
            "load_memory": min(_load_ms(memory, repeats)),
        }
        report = sqlite.last_report
        figures |= {f"report_{k}": v for k, v in report.items()}
    finally:
        sqlite.close()
    return figures


async def _thread_offload() -> None:
    await anyio.to_thread.run_sync(lambda: None)


def main(*, smoke: bool = False) -> int:
    # The first thread offload of a process imports anyio's asyncio backend (50-90 ms here).
    # A real run has paid that before its first append (the SDK runs on anyio); left in,
    # it would land in the first figure measured, the 1k append rate.
    asyncio.run(_thread_offload())
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="flower-bench-") as tmp:
        for size in SMOKE_SIZES if smoke else SIZES:
            results[size] = measure(size, Path(tmp))
    print(
        f"{'entries':>8} {'~MB':>6} | {'append/s sqlite':>15} {'memory':>10} {'ratio':>6} |"
        f" {'load ms cold':>12} {'median':>7} {'repeat':>7} {'first':>7} {'raw':>7}"
        f" {'memory':>7} {'cold/mem':>9}"
    )
    for size, r in results.items():
        print(
            f"{size:>8} {r['mb']:>6.1f} | {r['append_sqlite']:>15,.0f} {r['append_memory']:>10,.0f}"
            f" {r['append_memory'] / r['append_sqlite']:>5.0f}x |"
            f" {r['load_layers']:>12.1f} {r['load_layers_median']:>7.1f}"
            f" {r['load_repeat']:>7.1f} {r['load_first']:>7.1f} {r['load_raw']:>7.1f}"
            f" {r['load_memory']:>7.2f} {r['load_layers'] / r['load_memory']:>8.0f}x"
        )
    small, large = list(results)[-2:]  # 10k and 100k (smoke: 1k and 10k)
    ten, hundred = results[small], results[large]
    print(
        f"what the layers did at {small // 1000}k:",
        {k[7:]: int(v) for k, v in ten.items() if k.startswith("report_")},
    )
    growth = hundred["load_layers"] / ten["load_layers"]
    checks = {
        f"load() of {small // 1000}k entries with every layer <= 150 ms": ten["load_layers"] <= 150,
        f"load() grows linearly: {large // 1000}k / {small // 1000}k = {growth:.1f} <= 12": growth
        <= 12,
        "append >= 20k entries/s (batches of 500)": min(
            r["append_sqlite"] for r in results.values()
        )
        >= 20_000,
    }
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'MISSED'}] {name}")
    return 0 if all(checks.values()) or smoke else 1


if __name__ == "__main__":
    sys.exit(main(smoke=_args.parse("bench.stores", __doc__).smoke))
