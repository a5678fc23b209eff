"""Detached runs on a real engine, as the unprivileged e2e user: a question answered from the
host, a run stopped mid-step and resumed in the same session, and nothing left behind.

The fake API listens on the host's loopback; only the gateway reaches it. The answers travel
as files dropped into <workspace>/runs/inbox on the host and are picked up by the flower
process inside the box (watchfiles on the bind mount).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from docker import DockerClient  # noqa: TID251 - these tests inspect the engine's containers

from flower.core.lineage import Lineage
from flower.testing import FakeAPI, Reply, Request, When, rules, sequence, text, tool
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.conftest import hearing_ctrl_c
from tests.docker.e2e import FLOWERBOX, USER, as_user, box_env, metas, state_of, user_argv
from tests.flowerbox.conftest import wait_for
from tests.json_contract import parse_document

pytestmark = pytest.mark.docker

RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")
SLOW = "python3 -c 'import time; time.sleep(120)'"  # a bare `sleep` the CLI refuses
QUESTION = {"id": "q1", "question": "用哪个 Python 解释器?", "options": ["python3", "pypy"]}


@pytest.fixture(autouse=True)
def nothing_left(user_workspace: Path, docker_client: DockerClient) -> Iterator[None]:
    """Whatever a failed test leaves running (a detached run outlives its test): its
    containers, found by the workspace label, and the private folders its metas name."""
    yield
    label = f"dev.flower.box.workspace={user_workspace}"
    for container in docker_client.containers.list(all=True, filters={"label": label}):
        container.remove(force=True)
    for meta in metas((USER, 0, 0), user_workspace).values():
        for folder in (meta["spec"]["socket_dir"], meta["spec"]["secrets_dir"]):
            shutil.rmtree(folder, ignore_errors=True)


def meta_of(ws: Path, run_id: str) -> dict[str, Any]:
    """The run's record, in the e2e user's flowerbox state (never in the workspace)."""
    path = state_of((USER, 0, 0)) / "runs" / run_id / "meta.json"
    data: dict[str, Any] = json.loads(path.read_text())
    assert data["workspace"] == str(ws)
    return data


def wait_until_ended(ws: Path, run_id: str, timeout: float = 300) -> dict[str, Any]:
    """The run's meta once it has ended and its keeper has exited: the end is recorded
    first (whatever the aftermath does), the keeper then reports and cleans up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        meta = meta_of(ws, run_id)
        if meta["status"] not in ("starting", "running") and not _alive(meta.get("keeper_pid")):
            return meta
        time.sleep(0.5)
    raise AssertionError(f"{run_id} still {meta['status']} after {timeout:.0f}s")


def _alive(pid: object) -> bool:
    """Whether process `pid` runs (a zombie nobody reaped yet has ended)."""
    if not isinstance(pid, int):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def left_behind(client: DockerClient, meta: dict[str, Any]) -> list[str]:
    """Containers and private folders (sockets, secrets) of the run that still exist."""
    run = f"dev.flower.box.run={meta['run_id']}"
    found = [str(c.name) for c in client.containers.list(all=True, filters={"label": run})]
    folders = (meta["spec"]["socket_dir"], meta["spec"]["secrets_dir"])
    return found + [folder for folder in folders if Path(folder).exists()]


def detach(
    user: tuple[str, int, int], ws: Path, api: FakeAPI, *args: str
) -> tuple[str, dict[str, str]]:
    env = box_env(api, user)
    started = as_user(user, [FLOWERBOX, *args, "--detach", "-w", str(ws)], cwd=ws, env=env)
    assert started.returncode == 0, started.stderr[-3000:]
    assert RUN_ID.fullmatch(started.stdout.strip()), started.stdout  # the id, alone on stdout
    return started.stdout.strip(), env


def slow_run(
    api: FakeAPI, user: tuple[str, int, int], ws: Path, runtime: str = "runc"
) -> tuple[str, dict[str, str]]:
    """A detached unattended run whose worker's one Bash call takes two minutes."""

    def slow_worker(request: Request) -> Reply:
        return text("slept") if request.tool_results() else tool("Bash", {"command": SLOW})

    api.script = rules((When(kind="subagent"), slow_worker), (When(), starter_cast()))
    return detach(user, ws, api, DEMO_ASK, "--timeout", "0", "--runtime", runtime)


def worker_busy(api: FakeAPI) -> None:
    """Wait until the worker's slow call is running: the run is mid-step."""
    assert api.wait_for(lambda reqs: any(r.kind == "subagent" for r in reqs), 300)
    time.sleep(1.0)


def attach(user: tuple[str, int, int], ws: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """`flowerbox attach` as the user, in a process group of its own (for Ctrl+C)."""
    return subprocess.Popen(
        user_argv(user, [FLOWERBOX, "attach"], env),
        cwd=ws,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=hearing_ctrl_c,  # a test sends it Ctrl+C, even from `make check &`
    )


def test_a_detached_run_waits_for_a_question_answered_from_the_host(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
    box_runtime: str,
) -> None:
    ws = user_workspace
    real_api.script = starter_cast()  # the clarifier asks QUESTION first
    args = (DEMO_ASK, "--timeout", "600", "--runtime", box_runtime)
    run_id, env = detach(host_user, ws, real_api, *args)
    [row] = waiting_rows(host_user, ws, env)
    assert (row["run_id"], row["status"], row["pending_asks"]) == (run_id, "running", [QUESTION])
    gateway = docker_client.containers.get(f"flowerbox-gateway-{run_id}")
    assert gateway.status == "running"  # the run waits, its gateway with it
    table = as_user(host_user, [FLOWERBOX, "ps"], cwd=ws, env=env)
    assert f"{run_id} q1: 用哪个 Python 解释器?" in table.stdout
    nobody = as_user(host_user, [FLOWERBOX, "answer", "q2", "x"], cwd=ws, env=env)
    assert nobody.returncode == 2 and "（待回答：q1）" in nobody.stderr  # FLOWER_LANG=zh
    follower = attach(host_user, ws, env)

    answered = as_user(host_user, [FLOWERBOX, "answer", "q1", "python3"], cwd=ws, env=env)
    assert answered.returncode == 0, answered.stderr
    assert f"{run_id} q1: 已送达" in answered.stderr  # taken by the flower inside the box
    meta = wait_until_ended(ws, run_id)
    assert (meta["status"], meta["exit_code"], meta["detached"]) == ("done", 0, True)
    assert meta["box"]["runtime"] == box_runtime  # as the engine recorded the agent's
    assert meta["cost_usd"] > 0 and meta["ended"] >= meta["started"]
    shown = [r.result_for("toolu_demo_question") for r in real_api.requests]
    assert [r.text for r in shown if r is not None][0] == "python3"  # the model got the answer
    assert left_behind(docker_client, meta) == []  # gateway, agent, /tmp/fbx-* all gone
    logs = as_user(host_user, [FLOWERBOX, "logs", run_id], cwd=ws, env=env)
    assert "?? q1: 用哪个 Python 解释器?" in logs.stdout and "q1 answered: python3" in logs.stdout
    assert "[Agent]" in logs.stdout and f"{run_id}: 完成,退出码 0" in logs.stderr
    late = as_user(host_user, [FLOWERBOX, "answer", "q1", "pypy"], cwd=ws, env=env)
    assert late.returncode == 2 and "已经结束（完成,退出码 0）" in late.stderr
    out, err = follower.communicate(timeout=60)  # attach ends with the run, with its code
    assert follower.returncode == 0, err
    assert "?? q1: 用哪个 Python 解释器?" in out and "q1 answered: python3" in out


def test_ctrl_c_in_attach_detaches_and_the_run_goes_on(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    """Issue 36: Ctrl+C in attach stopped the run, and there was no way to leave it; now it
    detaches (as `gh run watch`, `kubectl logs -f`), and `flowerbox stop` stops."""
    ws = user_workspace
    run_id, env = slow_run(real_api, host_user, ws)
    follower = attach(host_user, ws, env)
    try:
        worker_busy(real_api)
        os.killpg(follower.pid, signal.SIGINT)
        out, err = follower.communicate(timeout=90)
    finally:
        if follower.poll() is None:
            os.killpg(follower.pid, signal.SIGKILL)
    assert follower.returncode == 0, err
    assert f"detached from {run_id}; it keeps running" in " ".join(err.split())
    assert "[Agent]" in out  # it was following the run's events
    assert "Traceback" not in err
    assert meta_of(ws, run_id)["status"] == "running"
    assert docker_client.containers.get(f"flowerbox-{run_id}").status == "running"
    stopped = as_user(host_user, [FLOWERBOX, "stop", run_id], cwd=ws, env=env)
    assert stopped.returncode == 0, stopped.stderr
    meta = wait_until_ended(ws, run_id)
    assert (meta["status"], meta["exit_code"]) == ("stopped", 130)
    assert left_behind(docker_client, meta) == []


def test_stop_mid_step_then_resume_continues_the_same_session(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
    box_runtime: str,
) -> None:
    """Under gVisor too: the resumed box is rebuilt from the record, runtime included."""
    ws = user_workspace
    run_id, env = slow_run(real_api, host_user, ws, box_runtime)
    worker_busy(real_api)
    stopped = as_user(host_user, [FLOWERBOX, "stop"], cwd=ws, env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert f"{run_id}: 已停止,退出码 130" in stopped.stderr
    # the end is recorded first, then the keeper removes the box (slower under gVisor)
    first = wait_until_ended(ws, run_id)
    assert (first["status"], first["exit_code"]) == ("stopped", 130)
    assert left_behind(docker_client, first) == []
    session = Lineage(ws / "runs", ws).recall("干活")
    assert session, "the stopped step's session is in lineage"
    again = as_user(host_user, [FLOWERBOX, "stop", run_id], cwd=ws, env=env)
    assert again.returncode == 2 and "已经结束（已停止,退出码 130）" in again.stderr

    real_api.script = starter_cast()
    resumed = as_user(host_user, [FLOWERBOX, "resume"], cwd=ws, env=env)
    assert resumed.returncode == 0, resumed.stderr
    new_id = resumed.stdout.strip()  # detached, as the run it continues was
    assert RUN_ID.fullmatch(new_id) and new_id != run_id
    second = wait_until_ended(ws, new_id)
    assert (second["status"], second["exit_code"]) == ("done", 0)
    assert second["resumed_from"] == run_id and second["spec"]["image"] == first["spec"]["image"]
    assert second["box"]["runtime"] == first["box"]["runtime"] == box_runtime
    boss = [r for r in real_api.main_requests() if "你是协调者" in r.system_text]
    assert boss[-1].headers.get("x-claude-code-session-id") == session  # the same session
    assert left_behind(docker_client, second) == []
    ps = parse_document(as_user(host_user, [FLOWERBOX, "ps", "--json"], cwd=ws, env=env).stdout)[
        "runs"
    ]
    assert [(r["run_id"], r["status"]) for r in ps] == [(run_id, "stopped"), (new_id, "done")]


def test_a_run_whose_supervisor_was_killed_is_killed_by_its_guard_and_resumes(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    """The OOM killer takes a detached run's keeper mid-step (its guard waiting in a shell):
    within 2 s its guard has killed the box (no container of the run runs, nothing of it
    reaches the API after the kill it recorded), finished the keeper's work (the run
    `killed`, nothing left behind), and `flowerbox resume` continues the same session to its
    end."""
    ws = user_workspace
    run_id, env = slow_run(real_api, host_user, ws)
    worker_busy(real_api)
    # the guard waits in a shell (1 MiB, not an idle Python's 9: issue 31, a hundred runs)
    guard = guard_of(run_id)
    assert "python" not in Path(f"/proc/{guard}/exe").resolve().name
    keeper = meta_of(ws, run_id)["keeper_pid"]
    os.killpg(keeper, signal.SIGKILL)  # the keeper's whole process group
    killed = time.time()
    time.sleep(2.0)
    running = docker_client.containers.list(filters={"label": f"dev.flower.box.run={run_id}"})
    assert running == []
    meta = wait_until_ended(ws, run_id, timeout=60)
    assert (meta["status"], meta["exit_code"]) == ("killed", 137)
    assert killed < meta["keeper_lost"] < killed + 2.0
    assert [r.index for r in real_api.requests if r.received_at > meta["keeper_lost"]] == []
    assert left_behind(docker_client, meta) == []
    sessions = {r.headers.get("x-claude-code-session-id") for r in real_api.requests}
    slept = text("slept")
    real_api.script = rules((When(kind="subagent"), lambda _: slept), (When(), starter_cast()))
    before = len(real_api.requests)
    resumed = as_user(host_user, [FLOWERBOX, "resume", run_id, "--attach"], cwd=ws, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    later = real_api.requests[before:]
    assert later and later[0].headers.get("x-claude-code-session-id") in sessions


def test_nothing_of_a_run_reaches_the_api_after_its_keeper_died_though_its_guard_waits(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    """The keeper is SIGKILLed while the model holds the worker's request, and its guard is
    paused (SIGSTOP: the slowest guard there is), so the box runs on: the held answer comes,
    the CLI asks again, and none of it reaches the API: the gateway lost its keeper's lease
    at the kill and refuses (issue 30: such requests came through in the gap before the
    guard's kill). Continued, the guard kills the box and the run reads `killed`."""
    ws = user_workspace
    held: list[int] = []

    def worker(request: Request) -> Reply:
        if request.tool_results():
            return text("echoed")
        if not held:
            held.append(request.index)
            return replace(tool("Bash", {"command": "echo lease"}), delay=8.0)
        return tool("Bash", {"command": "echo lease"})

    real_api.script = rules((When(kind="subagent"), worker), (When(), starter_cast()))
    run_id, _ = detach(host_user, ws, real_api, DEMO_ASK, "--timeout", "0")
    assert real_api.wait_for(lambda _: bool(held), 300)
    guard = guard_of(run_id)
    os.kill(guard, signal.SIGSTOP)
    try:
        os.killpg(meta_of(ws, run_id)["keeper_pid"], signal.SIGKILL)
        killed = time.time()
        requests_log = Path(meta_of(ws, run_id)["spec"]["state_dir"]) / "gateway/requests.jsonl"

        def refused() -> bool:
            lines = requests_log.read_text().splitlines() if requests_log.exists() else []
            return any("keeper is gone" in line for line in lines)

        def late() -> list[int]:
            return [r.index for r in real_api.requests if r.received_at > killed]

        wait_for(lambda: refused() or bool(late()), 60)  # the CLI asked after the held answer
        time.sleep(3.0)  # and retried
        assert late() == []
        assert refused()
        running = docker_client.containers.list(filters={"label": f"dev.flower.box.run={run_id}"})
        assert len(running) == 2  # the guard never acted: the lease alone refused
    finally:
        os.kill(guard, signal.SIGCONT)
    meta = wait_until_ended(ws, run_id, timeout=60)
    assert (meta["status"], meta["exit_code"]) == ("killed", 137)
    assert late() == []
    assert left_behind(docker_client, meta) == []


def test_a_run_whose_keeper_and_guard_were_killed_is_lost_until_stop_cleans_it_up(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    """Both host processes gone (a reboot that spared the containers): the run reads `lost`,
    refuses a new run in its workspace, and `stop` reaps it."""
    ws = user_workspace
    run_id, env = slow_run(real_api, host_user, ws)
    worker_busy(real_api)
    guard, keeper = guard_of(run_id), meta_of(ws, run_id)["keeper_pid"]
    os.kill(guard, signal.SIGKILL)
    os.kill(keeper, signal.SIGKILL)
    wait_for(lambda: not _alive(guard) and not _alive(keeper), 30)  # gone, and reaped
    [row] = parse_document(as_user(host_user, [FLOWERBOX, "ps", "--json"], cwd=ws, env=env).stdout)[
        "runs"
    ]
    assert (row["run_id"], row["status"]) == (run_id, "lost")
    assert docker_client.containers.get(f"flowerbox-{run_id}").status == "running"
    refused = as_user(host_user, [FLOWERBOX, "again", "-d"], cwd=ws, env=env)
    assert refused.returncode == 2 and f"`flowerbox stop {run_id}` 清理它" in refused.stderr
    reaped = as_user(host_user, [FLOWERBOX, "stop"], cwd=ws, env=env)
    assert reaped.returncode == 0, reaped.stderr
    assert f"{run_id}: 已停止,退出码 130" in reaped.stderr
    meta = meta_of(ws, run_id)
    assert (meta["status"], meta["exit_code"]) == ("stopped", 130)
    assert left_behind(docker_client, meta) == []


def guard_of(run_id: str) -> int:
    """The pid of the run's guard (flowerbox.runs.guard, its state folder in its argv)."""
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"flowerbox.runs.guard" in argv and any(run_id.encode() in a for a in argv):
            return int(entry.name)
    raise AssertionError(f"no guard runs for {run_id}")


def test_once_detached_is_followed_by_logs_to_its_end(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    ws = user_workspace
    note = ws / "note.md"
    real_api.script = sequence(
        tool("Write", {"file_path": str(note), "content": "# note\n"}), text("wrote note.md")
    )
    run_id, env = detach(host_user, ws, real_api, "once", "write a note")
    followed = as_user(host_user, [FLOWERBOX, "logs", "-f", run_id], cwd=ws, env=env)
    assert followed.returncode == 0, followed.stderr
    assert f"[Write] {note}" in followed.stdout and "wrote note.md" in followed.stdout
    assert f"{run_id}: 完成,退出码 0" in followed.stderr  # -f returned because the run ended
    assert note.read_text() == "# note\n" and meta_of(ws, run_id)["command"][:1] == ["once"]


def waiting_rows(user: tuple[str, int, int], ws: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """The rows of `flowerbox ps --json` once the newest run waits for an answer (or as they
    are after 180 s)."""
    deadline, rows = time.monotonic() + 180, []
    while time.monotonic() < deadline:
        ps = as_user(user, [FLOWERBOX, "ps", "--json"], cwd=ws, env=env)
        assert ps.returncode == 0, ps.stderr
        rows = parse_document(ps.stdout)["runs"]
        if rows and rows[-1]["pending_asks"]:
            break
        time.sleep(0.5)
    return rows


def keeper_killed(ws: Path, run_id: str) -> None:
    """SIGKILL the run's keeper (its whole process group); its guard records the run killed."""
    os.killpg(meta_of(ws, run_id)["keeper_pid"], signal.SIGKILL)
    meta = wait_until_ended(ws, run_id, timeout=60)
    assert (meta["status"], meta["exit_code"]) == ("killed", 137)


def test_a_run_killed_while_its_question_waits_asks_it_again_once_resumed(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    """Issue 30: the keeper dies while the clarifier's question waits for a human (a reboot
    overnight). `flowerbox resume` asks it again (not lost, not taken as unanswered), the
    answer given then reaches the model as the question's answer, and the run ends done."""
    ws = user_workspace
    real_api.script = starter_cast()  # the clarifier asks QUESTION first
    run_id, env = detach(host_user, ws, real_api, DEMO_ASK, "--timeout", "600")
    row = waiting_rows(host_user, ws, env)[-1]
    assert (row["run_id"], row["pending_asks"]) == (run_id, [QUESTION])
    keeper_killed(ws, run_id)

    resumed = as_user(host_user, [FLOWERBOX, "resume", run_id], cwd=ws, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    new_id = resumed.stdout.strip()
    row = waiting_rows(host_user, ws, env)[-1]
    assert (row["run_id"], row["status"], row["pending_asks"]) == (new_id, "running", [QUESTION])
    answered = as_user(host_user, [FLOWERBOX, "answer", "q1", "python3"], cwd=ws, env=env)
    assert answered.returncode == 0, answered.stderr
    meta = wait_until_ended(ws, new_id)
    assert (meta["status"], meta["exit_code"]) == ("done", 0)
    shown = [r.result_for("toolu_demo_question") for r in real_api.requests]
    results = [r.text for r in shown if r is not None]
    assert results and set(results) == {"python3"}  # never shown as cut or unanswered
    assert left_behind(docker_client, meta) == []


def test_an_answer_given_before_the_keeper_died_is_used_once_resumed(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    """Answered, then killed while the clarifier thinks about the answer: the resumed run
    goes on with that answer, and does not ask again."""
    ws = user_workspace
    cast = starter_cast()
    held: list[int] = []

    def holding(request: Request) -> Reply:
        reply = cast(request)
        if request.result_for("toolu_demo_question") is not None and not held:
            held.append(request.index)  # the clarifier's turn after the answer: held
            return replace(reply, delay=60.0)
        return reply

    real_api.script = holding
    run_id, env = detach(host_user, ws, real_api, DEMO_ASK, "--timeout", "600")
    assert waiting_rows(host_user, ws, env)[-1]["pending_asks"] == [QUESTION]
    answered = as_user(host_user, [FLOWERBOX, "answer", "q1", "python3"], cwd=ws, env=env)
    assert answered.returncode == 0, answered.stderr
    assert real_api.wait_for(lambda _: bool(held), 120)
    time.sleep(1.0)
    keeper_killed(ws, run_id)

    real_api.script = cast
    resumed = as_user(host_user, [FLOWERBOX, "resume", run_id, "--attach"], cwd=ws, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    later = real_api.requests[held[0] + 1 :]
    clarifier = [r for r in later if "你是澄清者" in r.system_text]
    assert clarifier, "the clarifier's session went on"
    answer = clarifier[0].result_for("toolu_demo_question")
    assert answer is not None and answer.text == "python3"
    [*_, last] = metas(host_user, ws).values()
    assert (last["status"], last["exit_code"]) == ("done", 0)
    assert "?? q1" not in as_user(host_user, [FLOWERBOX, "logs"], cwd=ws, env=env).stdout
