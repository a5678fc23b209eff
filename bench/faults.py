"""What faults cost: one scripted job run fault-free, then through six faults (issue 19).

The job: `flower "ask" --timeout 0 --json` on the fake model. A clarifier whose question
nobody answers, a goal, a coordinator that delegates calc.py and its test to a worker, and a
judge that rejects round 1 (no negative numbers tested) and accepts round 2. The faults, in
the second run: a stream cut mid-reply in the worker, four 529s on the judge (more than the
CLI's own retries), a 500 on the goal step, usage near the window on the coordinator (a
handoff), a `flower send` from another process, and SIGKILL of the flower process mid-work
followed by the documented way to continue (the same `flower "ask"` again). The woken
coordinator sends the cut worker's task out again (its delegation came back as an error), as
a real one would; that worker, handed the cut one's calls, does only what they lack.

The figures are ratios of the faulted run to the fault-free one: request bytes, and the same
bytes priced as a prompt-caching API would (the longest prefix a request shares with an
earlier one at 0.1x, the rest at 1.25x; the CLI's per-session billing header left out).
Targets: <= 1.35 bytes, <= 1.20 cache-aware. Also printed: what the handoff's new
generation's first request reads from a cache written at the earlier requests' cache_control
breakpoints (its tools + system whole, or only what precedes the first difference). The
fake model routes on the roles' rule texts in either language, so the job runs in both
(FLOWER_LANG=en, the default, and zh); `--smoke` runs it whole and does not judge the
targets (python -m bench --smoke runs it in both languages).

    python -m bench.faults
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import _args
from flower.core.texts.en import EN
from flower.core.texts.zh import ZH
from flower.testing import (
    Always,
    FakeAPI,
    Fault,
    Reply,
    Request,
    Script,
    Usage,
    When,
    drop,
    http_error,
    rules,
    text,
    tool,
    working_directory,
)
from flower.testing.demo import GOAL_MARKERS, ROLE_MARKERS

ASK = "写 calc.py 里的 add(a, b),并写 test_calc.py 测它"
LANGUAGES = ("en", "zh")  # what `python -m bench --smoke` runs it in
BYTES_TARGET = 1.35
CACHED_TARGET = 1.20
CACHE_READ, CACHE_WRITE = 0.1, 1.25
BILLING_HEADER = "x-anthropic-billing-header:"
FLOWER = [sys.executable, "-m", "flower.cli"]
HANDOFF_MARKERS = tuple(table["handoff.write"].split("{", 1)[0][:30] for table in (ZH, EN))
"""What the request that asks for a handoff starts with (zh, en)."""
HANDED_ON = tuple(table["cut.worker"].split("(", 1)[0] for table in (ZH, EN))
"""What a worker handed a killed one's list is shown first (zh, en; flower.core.cutwork)."""
OPEN = tuple(table["cut.open"].split("{call}", 1)[1] for table in (ZH, EN))
"""What marks a call of that list that was running at the kill (zh, en)."""
NEAR_WINDOW = 960_000  # past the default handoff level (a 1M window less 50k of headroom)

BRIEF = """## 目标
calc.py 里的 add(a, b),和测它的 test_calc.py

## 验收标准
- python3 test_calc.py 通过

## 边界
只新建 calc.py 和 test_calc.py

## 未知与假设
没人回答要不要测负数:先测正数"""

GOAL = """## 目标
calc.py 有 add(a, b),test_calc.py 测它并通过

## 验收清单
- python3 test_calc.py 通过
- 测试覆盖负数"""

CALC = "def add(a: int, b: int) -> int:\n    return a + b\n"
TEST = "from calc import add\n\nassert add(1, 2) == 3\n"
TEST_NEGATIVE = TEST + "assert add(-1, -2) == -3\n"
SEND = "记得保持函数简单"


@dataclass
class Job:
    """One run of the job: its folder, and what the fake API saw."""

    workspace: Path
    requests: list[Request]
    code: int
    summary: dict[str, object]


def cast(workspace: Path, *, faults: bool, stalled: list[int] | None = None) -> Script:
    """The whole cast; with `faults`, each role meets its fault once. `stalled` gets the
    index of the request the round-2 worker is kept waiting on (ten seconds: the kill comes
    then, at the same point in every run)."""
    question = tool("mcp__human__ask", {"question": "要测负数吗?"}, id="toolu_q_negative")

    def clarifier(request: Request) -> Reply:
        if request.result_for("toolu_q_negative") is None:
            return question
        return text(BRIEF)

    def judge(request: Request) -> Reply:
        test = workspace / "test_calc.py"
        negative = test.is_file() and "-1" in test.read_text()
        if negative:
            return text("## 结论\n达成\n\n## 理由\n两条都核对过")
        return text("## 结论\n未达成\n\n## 理由\n没测负数\n\n## 未通过项\n- 测试覆盖负数")

    handed_off: list[bool] = []  # the context fills once, in the first round

    def coordinator(request: Request) -> Reply:
        """Each round: look around, delegate, check the tests itself, report. A delegation
        that came back as an error (its worker cut short by the kill) is sent out again,
        as a real coordinator would: the work is not done until a worker reports it."""
        results = {r.tool_use_id: r for r in request.tool_results()}
        done = set(results)
        round_ = request.conversation_text.count("没测负数") + 1
        also = "也测负数。" if round_ > 1 else ""
        task = {
            "description": "写 calc.py 和测试",
            "prompt": f"在工作区写 calc.py 和 test_calc.py 并运行测试。{also}",
            "subagent_type": "coder",
            "run_in_background": False,
        }
        delegated = results.get(f"delegate_{round_}")
        calls = [
            tool("Bash", {"command": "ls -la"}, id=f"look_{round_}"),
            tool("Agent", task, id=f"delegate_{round_}"),
            *(
                [tool("Agent", task, id=f"again_{round_}")]
                if delegated and delegated.is_error
                else []
            ),
            tool("Bash", {"command": "python3 test_calc.py && echo ok"}, id=f"verify_{round_}"),
        ]
        for call in calls:
            if call.tool_ids[0] in done:
                continue
            if faults and not handed_off:  # the context fills once, on the first turn
                handed_off.append(True)
                return replace(call, usage=Usage(input_tokens=NEAR_WINDOW))
            return call
        return text(f"第 {round_} 轮:calc.py 和测试已写好并通过。")

    def worker(request: Request) -> Reply:
        """Write both files, run the test, look at the result. Handed a cut worker's list
        (flower.core.cutwork), it leaves out what the list shows done and does the rest."""
        where = working_directory(request)
        negative = "也测负数" in request.conversation_text
        done = {r.tool_use_id for r in request.tool_results()}
        suffix = f"{request.agent_id}_{int(negative)}"
        done |= {f"{kind}_{suffix}" for kind in _handed_done(request.conversation_text)}
        calls = [
            tool("Write", {"file_path": f"{where}/calc.py", "content": CALC}, id=f"w1_{suffix}"),
            tool(
                "Write",
                {
                    "file_path": f"{where}/test_calc.py",
                    "content": TEST_NEGATIVE if negative else TEST,
                },
                id=f"w2_{suffix}",
            ),
            tool("Bash", {"command": "python3 test_calc.py"}, id=f"run_{suffix}"),
        ]
        calls += [
            tool("Read", {"file_path": f"{where}/calc.py"}, id=f"read_{suffix}"),
            tool("Bash", {"command": "git status --short || ls"}, id=f"status_{suffix}"),
        ]
        for call in calls:
            if call.tool_ids[0] not in done:
                if stalled == [] and negative and call.tool_ids[0].startswith("read_"):
                    stalled.append(request.index)
                    return replace(call, delay=10.0)
                return call
        return text("写好了,测试通过。")

    judge_rule: Script = judge
    goal_rule: Script = Always(text(GOAL))
    worker_rule: Script = worker
    if faults:
        judge_rule = _first_fails(judge, http_error(529), 4)
        goal_rule = _first_fails(goal_rule, http_error(500), 1)
        worker_rule = _first_fails(worker, drop(after_blocks=1), 1, say="先写 calc.py")
    cast: list[tuple[When, Script]] = [(When(kind="subagent"), worker_rule)]
    for i, marker in enumerate(HANDOFF_MARKERS):  # zh, en: the roles' rules in either language
        cast += [
            (When(kind="main", last_user_contains=marker), Always(_handoff())),
            (When(kind="main", system_contains=ROLE_MARKERS["clarify"][i]), clarifier),
            (
                When(
                    kind="main", system_contains=ROLE_MARKERS["judge"][i], contains=GOAL_MARKERS[i]
                ),
                goal_rule,
            ),
            (When(kind="main", system_contains=ROLE_MARKERS["judge"][i]), judge_rule),
            (When(kind="main", system_contains=ROLE_MARKERS["coordinator"][i]), coordinator),
        ]
    return rules(*cast)


def _handed_done(conversation: str) -> set[str]:
    """Which of the worker's calls (w1, w2, run) the list it was handed shows done: a line
    of the list with a result, not one that "may have run"."""
    marker = next((m for m in HANDED_ON if m in conversation), None)
    if marker is None:
        return set()
    lines = conversation.split(marker, 1)[1].split("\\n")
    finished = [line for line in lines if "->" in line and not any(o in line for o in OPEN)]
    said = {"w1": '/calc.py\\"', "w2": '/test_calc.py\\"', "run": '\\"python3 test_calc.py\\"'}
    return {kind for kind, words in said.items() if any(words in line for line in finished)}


def is_coordinator(request: Request) -> bool:
    """A request of the coordinator's session, in either language."""
    return any(marker in request.system_text for marker in ROLE_MARKERS["coordinator"])


def _first_fails(script: Script, fault: Fault, count: int, *, say: str = "") -> Script:
    """`script`, except that its first `count` replies carry `fault` (a drop mid-reply cuts
    after `say`, a line of text put in front)."""
    served = [0]

    def faulty(request: Request) -> Reply:
        reply = script(request)
        if served[0] >= count:
            return reply
        served[0] += 1
        lead = text(say).blocks if say else ()
        return Reply(blocks=(*lead, *reply.blocks), usage=reply.usage, fault=fault)

    return faulty


def _handoff() -> Reply:
    sections = {
        "正在做": "第 1 轮刚开始,还没派活",
        "已定结论": "calc.py 的 add 用最简单的写法",
        "下一步": "看一眼工作区,把 calc.py 和测试派给实现者",
        "现场": "工作区根目录,还没有文件",
    }
    return text("\n\n".join(f"## {title}\n{body}" for title, body in sections.items()))


# --- running the job -----------------------------------------------------------------------


def job_env(api: FakeAPI, home: Path) -> dict[str, str]:
    """This process's environment minus any real credential, plus the fake API; the CLI
    retries twice on its own (so four 529s outlast it and flower's own retry takes over)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    return {**base, **api.env(home=home, retries=2), "XDG_CONFIG_HOME": str(home / ".config")}


def workspace_in(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir(parents=True)
    return ws.resolve()


def run_clean(root: Path) -> Job:
    """The job with no fault: one `flower "ask"` to the end."""
    ws = workspace_in(root)
    with FakeAPI(cast(ws, faults=False)) as api:
        done = _flower(ASK, ws=ws, env=job_env(api, root / "home"))
        return Job(ws, list(api.requests), done.returncode, _summary(done))


@dataclass
class Faulted(Job):
    """The faulted job, and what the kill left to look at."""

    after_kill: list[Request]  # requests that reached the API after flower was killed
    goal_at_kill: bytes
    brief_at_kill: bytes
    first: subprocess.CompletedProcess[str]  # the killed run's own output


def run_faulted(root: Path) -> Faulted:
    """The job through the six faults: killed in round 2, then the same ask again."""
    ws = workspace_in(root)
    stalled: list[int] = []
    with FakeAPI(cast(ws, faults=True, stalled=stalled)) as api:
        env = job_env(api, root / "home")
        proc = subprocess.Popen(
            [*FLOWER, ASK, "--timeout", "0", "--json", "-w", str(ws)],
            env=env,
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait(api, is_coordinator, proc)
            sent = _flower("send", SEND, ws=ws, env=env)
            if sent.returncode != 0:
                raise RuntimeError(f"flower send failed: {sent.stderr}")
            _wait(api, lambda r: r.index in stalled, proc)  # the round-2 worker, mid-work
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        killed_at = len(api.requests)
        time.sleep(3.0)  # anything of the killed run still alive would call the API now
        after_kill = list(api.requests[killed_at:])
        notes = ws / ".flower" / "notes"
        goal, brief = (notes / "目标.md").read_bytes(), (notes / "需求.md").read_bytes()
        done = _flower(ASK, ws=ws, env=env)  # the documented way on: the same ask again
        first = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        return Faulted(
            ws, list(api.requests), done.returncode, _summary(done), after_kill, goal, brief, first
        )


def _flower(*args: str, ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # `send` finds the run by its run dir (./runs of the same folder), the rest by -w
    extra = [] if args[0] == "send" else ["--timeout", "0", "--json", "-w", str(ws)]
    return subprocess.run(
        [*FLOWER, *args, *extra],
        env=env,
        cwd=ws.parent,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _summary(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    try:
        summary = json.loads(done.stdout)
    except ValueError:
        return {}
    return summary if isinstance(summary, dict) else {}


def _wait(
    api: FakeAPI, seen: Callable[[Request], bool], proc: subprocess.Popen[str], timeout: float = 300
) -> None:
    """Until a request `seen` arrives; an error if flower ends first or it takes `timeout`."""
    deadline = time.monotonic() + timeout
    while not api.wait_for(lambda requests: any(seen(r) for r in requests), 1.0):
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise RuntimeError(f"flower ended (exit {proc.returncode}) first:\n{err[-3000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError("the scripted job never got there")


# --- the figures -------------------------------------------------------------------------


def request_bytes(requests: list[Request]) -> int:
    return sum(r.size for r in requests)


def cache_aware(requests: list[Request]) -> float:
    """The requests' bytes priced as with prompt caching: each request's longest prefix in
    common with an earlier one (what a cache would hold; in the API's cache order: tools,
    system, messages) at CACHE_READ, the rest at CACHE_WRITE."""
    seen: list[bytes] = []
    total = 0.0
    for request in requests:
        body = json.dumps(_cached_part(request), ensure_ascii=False).encode()
        shared = max((_common_prefix(body, earlier) for earlier in seen), default=0)
        total += CACHE_READ * shared + CACHE_WRITE * (len(body) - shared)
        seen.append(body)
    return total


def handoff_prefix(requests: list[Request]) -> float | None:
    """How much of the tools + system of the new generation's first request (the first
    coordinator request after the handoff writer's) is a prefix the old generation's last
    request had: what a prompt cache would serve (issue 30, item 4). None: no handoff."""
    found = _handed_off(requests)
    if found is None:
        return None
    old, new = (
        json.dumps(
            {k: v for k, v in _cached_part(r).items() if k != "messages"}, ensure_ascii=False
        ).encode()
        for r in found
    )
    return _common_prefix(old, new) / len(new)


def handoff_cache_read(requests: list[Request]) -> tuple[int, int] | None:
    """What the new generation's first request would read from a prompt cache that works
    as the API's does: an entry is written at each cache_control breakpoint of a request
    (its blocks up to there: tools, system, messages), and a request reads the longest
    earlier entry that starts it. Returns (bytes read, bytes of its tools + system); None
    when there was no handoff. A breakpoint's marker itself, and a message's text sent as a
    string or as one text block, are the same prompt to the cache."""
    found = _handed_off(requests)
    if found is None:
        return None
    written: set[bytes] = set()
    for request in requests:
        blocks = _cache_blocks(request)
        sizes, keys, digest = [0], [b""], hashlib.sha256()
        for _, block, _ in blocks:
            digest.update(hashlib.sha256(block).digest())
            keys.append(digest.digest())
            sizes.append(sizes[-1] + len(block))
        if request is found[1]:
            read = max((sizes[k] for k, key in enumerate(keys) if key in written), default=0)
            return read, sum(len(block) for where, block, _ in blocks if where in _HEAD)
        written |= {keys[k + 1] for k, (_, _, marked) in enumerate(blocks) if marked}
    return None


_HEAD = ("tool", "prompt")  # the top-level tools and system, not a "system" message


def _handed_off(requests: list[Request]) -> tuple[Request, Request] | None:
    """The handoff writer's request and the new generation's first (None: no handoff)."""
    writer = next(
        (r for r in requests if any(r.prompt.startswith(m) for m in HANDOFF_MARKERS)),
        None,
    )
    if writer is None:
        return None
    later = requests[requests.index(writer) + 1 :]
    new = next((r for r in later if is_coordinator(r)), None)
    return None if new is None else (writer, new)


def _cache_blocks(request: Request) -> list[tuple[str, bytes, bool]]:
    """The request as a prompt cache sees it, block by block in its order (tools, system,
    messages): where each block is, its bytes without cache_control, whether it had one."""
    body = request.body
    system = _cached_part(request)["system"]
    listed: list[tuple[str, Any]] = [("tool", t) for t in body.get("tools") or []]
    listed += [("prompt", b) for b in (system if isinstance(system, list) else [system])]
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        listed += [(str(message.get("role")), block) for block in content or []]
    blocks = []
    for where, block in listed:
        bare = block
        if isinstance(block, dict):
            bare = {k: v for k, v in block.items() if k != "cache_control"}
        said = json.dumps([where, bare], ensure_ascii=False).encode()
        blocks.append((where, said, isinstance(block, dict) and "cache_control" in block))
    return blocks


def _cached_part(request: Request) -> dict[str, object]:
    """What a prompt cache keys on, in its order: tools, system, messages. The CLI's
    per-session `x-anthropic-billing-header` block is left out: it is attribution metadata
    (it differs in every session), not part of the prompt a cache holds."""
    system = request.body.get("system")
    if isinstance(system, list):
        system = [
            block for block in system if not str(block.get("text", "")).startswith(BILLING_HEADER)
        ]
    return {
        "tools": request.body.get("tools"),
        "system": system,
        "messages": request.body.get("messages"),
    }


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    low, high = 0, n
    while low < high:  # the longest k with a[:k] == b[:k]
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def main(*, smoke: bool = False) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as tmp:
        clean = run_clean(Path(tmp) / "clean")
        faulted = run_faulted(Path(tmp) / "faulted")
    if clean.code != 0 or faulted.code != 0:
        print(f"the job did not finish: clean exit {clean.code}, faulted exit {faulted.code}")
        return 1
    by_bytes = request_bytes(faulted.requests) / request_bytes(clean.requests)
    by_cache = cache_aware(faulted.requests) / cache_aware(clean.requests)
    print(f"requests:          {len(clean.requests)} clean, {len(faulted.requests)} faulted")
    print(f"request bytes:     {by_bytes:.3f}x the fault-free run (target <= {BYTES_TARGET})")
    print(f"cache-aware:       {by_cache:.3f}x the fault-free run (target <= {CACHED_TARGET})")
    print(f"after the kill:    {len(faulted.after_kill)} requests from the killed run")
    shared = handoff_prefix(faulted.requests)
    if shared is not None:
        print(f"handoff prefix:    {shared:.1%} of the new generation's tools + system shared")
    cache = handoff_cache_read(faulted.requests)
    if cache is not None:
        read, head = cache
        print(
            f"handoff cache read: {read:,} bytes of the new generation's first request come "
            f"from the cache (its tools + system: {head:,} bytes)"
        )
    met = by_bytes <= BYTES_TARGET and by_cache <= CACHED_TARGET
    return 0 if (met or smoke) and not faulted.after_kill else 1


if __name__ == "__main__":
    sys.exit(main(smoke=_args.parse("bench.faults", __doc__).smoke))
