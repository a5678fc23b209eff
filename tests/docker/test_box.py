"""The appliance end to end on a real engine, run as an unprivileged host user created for it.

The fake API listens on the host's loopback and requires the "real" key; only the gateway
(on the host network) can reach it. From inside the box a Bash tool call probes what the
agent really gets. Nothing here sends traffic anywhere but this machine.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from docker import DockerClient  # noqa: TID251 - these tests inspect the engine's containers

from flower.testing import Always, FakeAPI, Reply, Request, Usage, When, rules, text, tool
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.cli.test_delivery import ASK, BUGGY, FIXED, calc_worker
from tests.docker.e2e import (
    FLOWERBOX,
    REAL,
    as_user,
    box_env,
    home_of,
    ledger,
    usage_of,
    user_argv,
)
from tests.json_contract import parse_document

pytestmark = pytest.mark.docker


def unattended(
    api: FakeAPI, user: tuple[str, int, int], ws: Path, ask: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`flowerbox ASK --timeout 0 --json` as `user`, which must succeed; its JSON summary."""
    done = as_user(
        user,
        [FLOWERBOX, ask, "--timeout", "0", "--json", "-w", str(ws)],
        cwd=ws,
        env=box_env(api, user),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done, parse_document(done.stdout)  # stdout is the one document, nothing else


def test_an_unattended_run_leaves_the_users_files_and_state_on_the_host(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    real_api.script = starter_cast()
    _, summary = unattended(real_api, host_user, user_workspace, DEMO_ASK)
    assert summary["status"] == "achieved"
    # One run id for both CLIs: flower inside ran under the id flowerbox gave the box.
    assert {
        row["run"] for row in json.loads((user_workspace / "runs/manifest.json").read_text())
    } == {summary["run_id"]}
    logs = as_user(
        host_user,
        [FLOWERBOX, "logs", summary["run_id"]],
        cwd=user_workspace,
        env=box_env(real_api, host_user),
    )
    assert logs.returncode == 0, logs.stderr
    # Isolation is on: the worker's work is on the run's branch, the checkout untouched.
    branch = summary["delivery"]["branch"]
    assert branch == f"flower/{summary['run_id']}"
    git = ["git", "-C", str(user_workspace)]
    shown = as_user(host_user, [*git, "show", f"{branch}:hello.py"], cwd=user_workspace)
    assert shown.stdout == 'print("hello")\n' and not (user_workspace / "hello.py").exists()
    runs = user_workspace / "runs"
    assert (runs / "manifest.json").is_file() and (runs / "sessions.db").is_file()
    assert (runs / "manifest.json").stat().st_uid == host_user[1]
    workbench = user_workspace.parent / f".flower-{user_workspace.name}"
    assert (workbench / "notes" / "需求.md").is_file()  # isolation on: the workbench outside
    assert real_api.saw_key(REAL) and not real_api.saw_key("sk-flowerbox-placeholder")
    usage = usage_of(host_user, user_workspace)
    assert usage["requests"] >= 5 and REAL not in ledger(host_user, user_workspace).read_text()
    # Every request the agent's side sent carried the placeholder, and nothing else.
    assert usage["client_credentials"] == {"placeholder": usage["requests"]}


def test_an_isolated_box_run_stacks_its_rounds_on_one_branch_on_the_host(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    """Issue 20, item 3 from a box: round 2 starts from round 1's file, the host ends with the
    branch flower/<run id> (no prefix, no stray worktree or branch), the checkout and its
    `git status` untouched (runs/ excluded on the first run), and says where the work is."""
    git = ["git", "-C", str(user_workspace)]

    def repo(*args: str) -> str:
        done = as_user(host_user, [*git, *args], cwd=user_workspace)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    head, checked_out = repo("rev-parse", "HEAD"), repo("symbolic-ref", "--short", "HEAD")
    real_api.script = starter_cast(verdict=["未达成", "达成"], ask_human=False, worker=calc_worker)
    done, summary = unattended(real_api, host_user, user_workspace, ASK)
    delivery = summary["delivery"]
    branch = delivery["branch"]
    assert branch.startswith("flower/") and delivery["files"] == ["calc.py"]
    commits = repo("rev-list", "--reverse", f"{head}..{branch}").split()
    assert [c["sha"] for c in delivery["commits"]] == commits and len(commits) == 2
    assert repo("show", f"{commits[0]}:calc.py") + "\n" == BUGGY
    assert repo("show", f"{branch}:calc.py") + "\n" == FIXED
    looks = [r.text.strip() for q in real_api.subagent_requests() for r in q.tool_results()]
    assert BUGGY.strip() in looks  # round 2's worker saw round 1's file
    assert repo("rev-parse", "HEAD") == head and repo("status", "--porcelain") == ""
    branches = repo("for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    assert sorted(branches) == sorted([branch, checked_out])
    assert repo("worktree", "list", "--porcelain").count("worktree ") == 1
    assert not (user_workspace / "calc.py").exists()
    assert not (user_workspace / ".claude").exists()
    assert not (user_workspace / "runs" / "worktrees").exists()
    assert "/runs/" in (user_workspace / ".git" / "info" / "exclude").read_text()
    assert f"the run's work is on {branch}: 2 commit(s), 1 file(s): calc.py" in done.stderr
    assert f"apply it: git -C '{user_workspace}' merge {branch}" in done.stderr


PROBE = r"""
id -u
grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
(touch /probe 2>/dev/null && echo ROOT_WRITABLE) || echo ROOT_READONLY
echo NET: $(ls /sys/class/net)
python3 -c "import socket; socket.create_connection(('127.0.0.1', {port}), 2)" 2>/dev/null \
  && echo DIRECT_OK || echo DIRECT_FAILED
(test -S /var/run/docker.sock || test -S /run/docker.sock) \
  && echo DOCKER_SOCK || echo NO_DOCKER_SOCK
python3 - <<'PY'
import glob, os, subprocess
key = "sk-ant-real-" + "e2e-0123456789abcdef"
found = key in "".join(f"{k}={v}" for k, v in os.environ.items())
for path in glob.glob("/proc/[0-9]*/environ") + glob.glob("/run/**", recursive=True):
    try:
        found |= key.encode() in open(path, "rb").read()
    except OSError:
        pass
print("KEY_FOUND" if found else "KEY_ABSENT")
kids = []
try:
    for _ in range(1000):
        kids.append(subprocess.Popen(["sleep", "30"]))
    print("FORK_UNLIMITED")
except OSError:
    print("FORK_LIMITED", len(kids))
for kid in kids:
    kid.kill()
PY
sleep 8
"""


def test_inside_the_box_the_agent_has_nothing_to_steal_and_nowhere_to_go(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    def worker(request: Request) -> Reply:
        if request.tool_results():
            return text("probed")
        return tool("Bash", {"command": PROBE.replace("{port}", str(real_api.port))})

    real_api.script = rules((When(kind="subagent"), worker), (When(), starter_cast()))
    seen: dict[str, Any] = {}

    def inspect_while_running() -> None:
        real_api.wait_for(lambda reqs: any(r.kind == "subagent" for r in reqs), 300)
        time.sleep(3)
        mine = f"dev.flower.box.workspace={user_workspace}"  # other boxes may share the engine
        containers = docker_client.containers.list(filters={"label": mine})
        seen["inspect"] = json.dumps([c.attrs for c in containers])
        seen["roles"] = sorted(c.labels.get("dev.flower.box.role", "") for c in containers)
        seen["ps"] = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout

    watcher = threading.Thread(target=inspect_while_running)
    watcher.start()
    try:
        done = as_user(
            host_user,
            [FLOWERBOX, DEMO_ASK, "--timeout", "0", "-w", str(user_workspace)],
            cwd=user_workspace,
            env=box_env(real_api, host_user),
        )
    finally:
        watcher.join()
    assert done.returncode == 0, done.stderr[-3000:]
    [probe] = [r.text for req in real_api.subagent_requests() for r in req.tool_results()]
    lines = probe.splitlines()
    assert lines[0] == str(host_user[1]) != "0"
    assert "CapEff:\t0000000000000000" in probe and "CapBnd:\t0000000000000000" in probe
    assert "NoNewPrivs:\t1" in probe and "Seccomp:\t2" in probe
    assert "ROOT_READONLY" in probe and "NET: lo" in probe
    assert "DIRECT_FAILED" in probe and "NO_DOCKER_SOCK" in probe
    assert "KEY_ABSENT" in probe and "FORK_LIMITED" in probe
    assert seen["roles"] == ["agent", "gateway"]
    assert REAL not in seen["inspect"] and REAL not in seen["ps"]


def test_a_killed_box_resumes_the_same_session_on_the_next_ask(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    def slow_worker(request: Request) -> Reply:
        if request.tool_results():
            return text("slept")
        return tool("Bash", {"command": "python3 -c 'import time; time.sleep(120)'"})

    real_api.script = rules((When(kind="subagent"), slow_worker), (When(), starter_cast()))
    env = box_env(real_api, host_user)
    command = [FLOWERBOX, DEMO_ASK, "--timeout", "0", "-w", str(user_workspace)]
    first = subprocess.Popen(
        user_argv(host_user, command, env),
        cwd=user_workspace,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert real_api.wait_for(lambda reqs: any(r.kind == "subagent" for r in reqs), 300)
        time.sleep(2)
        [agent] = docker_client.containers.list(
            filters={
                "label": [f"dev.flower.box.workspace={user_workspace}", "dev.flower.box.role=agent"]
            }
        )
        agent.kill()  # SIGKILL: nothing gets to say goodbye
        first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGKILL)
    lineage = json.loads((user_workspace / "runs" / "lineage.json").read_text())
    [entry] = lineage["workspaces"].values()
    stopped = entry["steps"]["干活"]
    real_api.script = starter_cast()
    again = as_user(
        host_user,
        [FLOWERBOX, "", "--timeout", "0", "-w", str(user_workspace)],
        cwd=user_workspace,
        env=env,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    boss = [r for r in real_api.main_requests() if "你是协调者" in r.system_text]
    assert boss[-1].headers.get("x-claude-code-session-id") == stopped


def test_a_budget_stops_flower_and_says_why(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    cast = starter_cast()

    def dear(request: Request) -> Reply:  # $4 of input: the whole budget in one call
        return replace(cast(request), usage=Usage(input_tokens=1_000_000))

    real_api.script = dear
    # The gateway admits a call only while its worst case fits (claude-opus-5-5's 128000
    # max_tokens at $20/M is $2.56, plus the prompt): a budget must hold one call.
    done = as_user(
        host_user,
        [FLOWERBOX, DEMO_ASK, "--budget", "4", "--timeout", "0", "-w", str(user_workspace)],
        cwd=user_workspace,
        env=box_env(real_api, host_user),
    )
    assert done.returncode == 1
    # The step stops and says why: the CLI's own budget stop, or (the call filled the
    # context too, and the handoff's hook ended the turn first: a race of the two) flower's,
    # in the run's language; either way after the one call
    stops = ("确认需求: Reached maximum budget ($4)", "确认需求: 运行的预算 $4.00 已用完")
    assert any(stop in done.stdout for stop in stops), done.stdout[-2000:]
    assert len(real_api.requests) == 1  # the first call spent it: nothing more reached the API


TWO_STEPS = """
from flower.core.agent import AgentSpec
from flower.workflow import Step, Workflow

greeter = AgentSpec("greeter", "Greet.")
workflow = Workflow([Step("one", greeter, "say hi"), Step("two", greeter, "say it again")])
"""


def test_the_gateway_refuses_model_calls_past_the_budget(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    """flower run has no budget of its own: the gateway is the only wall, and it holds."""
    # $4 of input in one call: step one spends the whole budget (its worst case fitted).
    real_api.script = Always(text("hi", usage=Usage(input_tokens=1_000_000, output_tokens=100)))
    flow = user_workspace / "two.py"
    flow.write_text(TWO_STEPS)
    done = as_user(
        host_user,
        [FLOWERBOX, "run", str(flow), "--budget", "4", "--timeout", "0"],
        cwd=user_workspace,
        env=box_env(real_api, host_user),
    )
    assert done.returncode != 0
    assert "运行的预算 $4.00 已用完" in done.stdout + done.stderr  # the gateway speaks the run's zh
    assert len(real_api.requests) == 1  # step two's call was refused before the API
    usage = usage_of(host_user, user_workspace)
    assert usage["refused"] >= 1 and usage["requests"] == 1


def test_flowerbox_demo_runs_the_whole_appliance_without_a_key(
    host_user: tuple[str, int, int], flowerbox_image: str, box_runtime: str
) -> None:
    """On each runtime the engine has: under gVisor too, the whole cycle achieves, and the
    run's provenance note names the runtime the engine really gave the agent."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home_of(host_user))}
    command = [FLOWERBOX, "demo", "--image", flowerbox_image, "--runtime", box_runtime]
    done = as_user(host_user, command, cwd=Path("/tmp"), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "达成 · $" in done.stdout and "演示工作区：" in done.stderr  # zh
    [workspace] = re.findall(r"演示工作区：(\S+?)（", done.stderr)
    try:
        notes = as_user(
            host_user, ["git", "log", "--all", "--notes=flowerbox"], cwd=Path(workspace)
        ).stdout
        assert f"runtime {box_runtime}," in notes, notes
    finally:
        shutil.rmtree(Path(workspace).parent, ignore_errors=True)
