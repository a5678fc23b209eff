"""The broker for real on the local engine: one `flowerbox broker` (as the unprivileged e2e
user, with a state folder of its own) serving N = 8 concurrent boxes, each a
`flowerbox shell -- python3 -c CLIENT` with its own budget and allowlist; and a real
`flowerbox "ask"` through it end to end. Token, revocation, budget, team-budget and restart
rules at the request level: tests/flowerbox/test_broker.py."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from docker import DockerClient

from flower.testing import Always, FakeAPI, Reply, Request, Usage, sequence, text, tool
from flower.testing.demo import DEMO_ASK, starter_cast
from flowerbox.broker import client
from tests.docker.e2e import FLOWERBOX, as_user, box_env, user_argv
from tests.docker.test_detach import guard_of
from tests.flowerbox.conftest import wait_for

pytestmark = pytest.mark.docker

BOXES = 8
CALLS = 3
# What each box runs: CALLS Messages calls with its key, one with a forged key, one CONNECT
# through its egress proxy; then one JSON line (its key only as a SHA-256).
CLIENT = f"""
import hashlib, http.client, json, os
key = os.environ["ANTHROPIC_API_KEY"]
body = json.dumps({{"model": "claude-opus-5-5", "max_tokens": 100,
                   "messages": [{{"role": "user", "content": "hi"}}]}})
def call(k):
    c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=120)
    c.request("POST", "/v1/messages?beta=true", body=body,
              headers={{"x-api-key": k, "content-type": "application/json"}})
    r = c.getresponse(); r.read(); c.close(); return r.status
statuses = [call(key) for _ in range({CALLS})]
forged = call("sk-" + key[::-1])
p = http.client.HTTPConnection("127.0.0.1", 3128, timeout=60)
p.request("CONNECT", "localhost:443")
proxy = p.getresponse().status
# What `docker inspect` shows of this box: its first process's environment and argv.
inspected = open("/proc/1/environ", "rb").read() + open("/proc/1/cmdline", "rb").read()
print(json.dumps({{"key": hashlib.sha256(key.encode()).hexdigest(), "statuses": statuses,
                  "forged": forged, "proxy": proxy, "inspected": key.encode() in inspected}}))
"""


@dataclass
class RunningBroker:
    state: Path  # XDG_STATE_HOME of the broker and of the runs it serves
    process: subprocess.Popen[bytes]
    env: dict[str, str]

    @property
    def folder(self) -> Path:
        return self.state / "flowerbox" / "broker"

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.folder / "ledger.db") as db:
            return list(db.execute(sql).fetchall())

    def gateway_file(self, run_id: str, name: str) -> Path:
        return self.state / "flowerbox" / "runs" / run_id / "gateway" / name


@pytest.fixture
def broker(
    real_api: FakeAPI, host_user: tuple[str, int, int], flowerbox_image: str
) -> Iterator[RunningBroker]:
    """`flowerbox broker` as the e2e user, its state in a private folder (other tests' runs
    never find it), the FakeAPI on loopback as its upstream."""
    root = Path(tempfile.mkdtemp(prefix="fbx-bk-", dir="/tmp"))
    os.chown(root, host_user[1], host_user[2])
    env = box_env(real_api, host_user) | {"XDG_STATE_HOME": str(root / "s")}
    log = (root / "broker.log").open("wb")
    process = subprocess.Popen(
        user_argv(host_user, [FLOWERBOX, "broker"], env), stdout=log, stderr=log
    )
    running = RunningBroker(root / "s", process, env)
    try:
        wait_for(lambda: client.running(running.folder) or process.poll() is not None, 60)
        assert process.poll() is None, (root / "broker.log").read_text()
        yield running
    finally:
        running.process.terminate()  # the one running now: a test may have restarted it
        running.process.wait(timeout=30)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (ours: started by this test), deepest last."""
    found: list[int] = []
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # a thread or process
        for task in Path(f"/proc/{pid}/task").iterdir():  # may end while it is read
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                for child in (task / "children").read_text().split():
                    found += [int(child), *descendants(int(child))]
    return found


@pytest.fixture
def workspaces(host_user: tuple[str, int, int]) -> Iterator[Callable[[int], Path]]:
    """Fresh git workspaces owned by the e2e user."""
    root = Path(tempfile.mkdtemp(prefix="fbx-bkw-", dir="/tmp"))
    os.chown(root, host_user[1], host_user[2])

    def make(n: int) -> Path:
        ws = root / f"ws{n}"
        ws.mkdir()
        os.chown(ws, host_user[1], host_user[2])
        as_user(host_user, ["git", "init", "-q"], cwd=ws)
        return ws

    yield make
    subprocess.run(["rm", "-rf", str(root)], check=False)


def test_eight_concurrent_boxes_each_with_its_own_token_allowlist_and_budget(
    broker: RunningBroker,
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    workspaces: Callable[[int], Path],
) -> None:
    real_api.script = Always(text("hi", usage=Usage(1000, 100)))  # $0.006 a call
    # Box 0 can afford two calls; the even boxes may reach localhost, the odd ones nothing.
    budgets = [0.01] + [1.0] * (BOXES - 1)
    folders = [workspaces(n) for n in range(BOXES)]

    def box(n: int) -> subprocess.CompletedProcess[str]:
        allow = ["--allow", "localhost"] if n % 2 == 0 else []
        command = [FLOWERBOX, "shell", "--budget", str(budgets[n]), *allow]
        return as_user(
            host_user, [*command, "--", "python3", "-c", CLIENT], cwd=folders[n], env=broker.env
        )

    with ThreadPoolExecutor(BOXES) as pool:
        done = list(pool.map(box, range(BOXES)))
    outputs = []
    for n, result in enumerate(done):
        assert result.returncode == 0, (n, result.stderr[-3000:])
        outputs.append(json.loads(result.stdout.strip().splitlines()[-1]))

    runs = dict(broker.query("SELECT token_sha256, run_id FROM runs"))
    assert len(runs) == BOXES  # eight registrations, eight tokens
    run_of = [runs[output["key"]] for output in outputs]  # each box held its own run's token
    assert len(set(run_of)) == BOXES
    assert all(revoked for (revoked,) in broker.query("SELECT revoked_at FROM runs"))
    assert client.call(broker.folder, {"op": "status"})["runs"] == {}

    assert outputs[0]["statuses"] == [200, 200, 403]  # its budget, and only its
    for output in outputs[1:]:
        assert output["statuses"] == [200] * CALLS
    assert {output["forged"] for output in outputs} == {401}
    assert not any(output["inspected"] for output in outputs)  # the token: a file, not env
    for n, run_id in enumerate(run_of):
        statuses = [
            s
            for (s,) in broker.query(
                f"SELECT status FROM requests WHERE run_id = '{run_id}' ORDER BY id"
            )
        ]  # noqa: E501, S608
        assert statuses == [*outputs[n]["statuses"], 401]
        assert outputs[n]["proxy"] == 403  # localhost's address is loopback: refused anyway
        decided = json.loads(broker.gateway_file(run_id, "egress.jsonl").read_text())
        assert ("resolved" in decided) == (n % 2 == 0), decided  # the name passed its list
        usage = json.loads(broker.gateway_file(run_id, "usage.json").read_text())
        assert usage["total_cost_usd"] == pytest.approx(0.006 * (2 if n == 0 else CALLS))
    assert len(real_api.requests) == 2 + (BOXES - 1) * CALLS  # refusals never left the broker


def test_flowerbox_ask_uses_a_running_broker(
    broker: RunningBroker,
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
) -> None:
    real_api.script = starter_cast()
    done = as_user(
        host_user,
        [FLOWERBOX, DEMO_ASK, "--timeout", "0", "--json"],
        cwd=user_workspace,
        env=broker.env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ((run_id, revoked),) = broker.query("SELECT run_id, revoked_at FROM runs")
    assert revoked  # the run ended: its token too
    rows = broker.query(f"SELECT status, cost_usd FROM requests WHERE run_id = '{run_id}'")  # noqa: S608
    assert rows and {status for status, _ in rows} == {200}
    usage = json.loads(broker.gateway_file(run_id, "usage.json").read_text())
    assert usage["total_cost_usd"] == pytest.approx(sum(cost for _, cost in rows), abs=2e-6)
    assert usage["total_cost_usd"] == pytest.approx(real_api.cost(), abs=2e-6)
    assert usage["client_credentials"] == {"run token": len(rows)}
    records = broker.state / "flowerbox" / "runs" / run_id
    assert (records / "agent.stderr.log").exists()
    assert not (records / "gateway.stderr.log").exists()  # no private gateway was started


# Calls until the team's budget refuses one (or ATTEMPTS), riding out a broker that is down:
# then one JSON line of what it got (a status each, "down" for no answer).
PERSISTENT = """
import http.client, json, time
key = __import__("os").environ["ANTHROPIC_API_KEY"]
body = json.dumps({"model": "claude-opus-5-5", "max_tokens": 100,
                   "messages": [{"role": "user", "content": "hi"}]})
got, message = [], ""
for _ in range(120):
    try:
        c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=120)
        c.request("POST", "/v1/messages?beta=true", body=body,
                  headers={"x-api-key": key, "content-type": "application/json"})
        r = c.getresponse(); data = r.read(); c.close()
        got.append(r.status)
        if r.status == 403:
            message = json.loads(data)["error"]["message"]
            break
    except (OSError, http.client.HTTPException):
        got.append("down")
    time.sleep(0.3)
print(json.dumps({"got": got, "message": message}))
"""


def test_a_team_budget_across_boxes_survives_a_broker_killed_mid_run(
    broker: RunningBroker,
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    workspaces: Callable[[int], Path],
) -> None:
    # $0.0022 a call: below its worst case, as a real answer is (a token is at least a byte).
    real_api.script = Always(text("hi", usage=Usage(50, 100)))
    broker.process.terminate()
    broker.process.wait(timeout=30)
    restart = [FLOWERBOX, "broker", "--team-budget", "0.03"]
    broker.process = subprocess.Popen(user_argv(host_user, restart, broker.env))
    wait_for(lambda: client.running(broker.folder), 60)
    folders = [workspaces(n) for n in range(2)]

    def box(n: int) -> subprocess.CompletedProcess[str]:
        command = [FLOWERBOX, "shell", "--", "python3", "-c", PERSISTENT]
        return as_user(host_user, command, cwd=folders[n], env=broker.env)

    with ThreadPoolExecutor(2) as pool:
        boxes = [pool.submit(box, n) for n in range(2)]
        wait_for(lambda: len(broker.query("SELECT id FROM requests")) >= 4, 120)
        # mid-run: the broker, which is runuser's child as root and the process itself for a
        # docker-group developer (no runuser then), and runuser with it
        for pid in [*descendants(broker.process.pid), broker.process.pid]:
            os.kill(pid, signal.SIGKILL)
        broker.process.wait(timeout=30)
        broker.process = subprocess.Popen(user_argv(host_user, restart, broker.env))
        done = [future.result() for future in boxes]
    outputs = []
    for result in done:
        assert result.returncode == 0, result.stderr[-3000:]
        outputs.append(json.loads(result.stdout.strip().splitlines()[-1]))
    for output in outputs:
        assert output["got"][-1] == 403 and "团队的预算 $0.03" in output["message"]  # broker: zh
    got = [status for output in outputs for status in output["got"]]
    rows = [status for (status,) in broker.query("SELECT status FROM requests")]
    # Every answer a box had is in the ledger; a call cut by the kill is there too, charged
    # its worst case (status NULL), and nothing more.
    assert rows.count(200) == got.count(200) and rows.count(403) == got.count(403)
    assert set(rows) <= {200, 403, None}
    ((spent,),) = broker.query("SELECT SUM(cost_usd) FROM requests")
    assert spent <= 0.03


def test_a_detached_runs_keeper_revokes_its_token(
    broker: RunningBroker,
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    docker_client: DockerClient,
) -> None:
    ws = user_workspace
    real_api.script = sequence(
        tool("Write", {"file_path": str(ws / "note.md"), "content": "# note\n"}), text("wrote")
    )
    try:
        started = as_user(
            host_user, [FLOWERBOX, "once", "write a note", "--detach"], cwd=ws, env=broker.env
        )
        assert started.returncode == 0, started.stderr[-3000:]
        run_id = started.stdout.strip()
        ((registered,),) = broker.query("SELECT run_id FROM runs")
        assert registered == run_id
        followed = as_user(host_user, [FLOWERBOX, "logs", "-f", run_id], cwd=ws, env=broker.env)
        assert followed.returncode == 0, followed.stderr[-3000:]
        wait_for(lambda: broker.query("SELECT revoked_at FROM runs")[0][0] is not None, 60)
        assert {s for (s,) in broker.query("SELECT status FROM requests")} == {200}
        assert (ws / "note.md").read_text() == "# note\n"
    finally:
        label = f"dev.flower.box.workspace={ws}"
        for container in docker_client.containers.list(all=True, filters={"label": label}):
            container.remove(force=True)


# --- a box's socket folder is the box's to write: what it plants there -----------------------

# Box side of the socket-folder attack: plant (argv: mode, marker folder, then the host paths
# to aim at), say so, wait for the test's word that the broker was killed and started again,
# then one call with its own token; with mode "links", a last swap of api.sock for a folder
# before its run ends (the broker then closes a run whose socket is no socket).
PLANTER = """
import hashlib, http.client, json, os, stat, sys, time
mode, ws, victim, host_file, host_dir, control = sys.argv[1:7]
d = "/run/flowerbox"
def swap(name, make):
    path = os.path.join(d, name)
    try: os.unlink(path)
    except FileNotFoundError: pass
    make(path)
def folder(path):
    os.mkdir(path); open(os.path.join(path, "x"), "w").close()
if mode == "links":
    swap("api.sock", lambda p: os.symlink(victim, p))  # another run's socket, on the host
    swap(".api.sock.new", lambda p: os.symlink(host_file, p))
    swap("proxy.sock", os.mkfifo)
    swap(".proxy.sock.new", lambda p: os.symlink(host_dir, p))
    swap("control.sock", lambda p: os.symlink(control, p))  # the broker's, by name
elif mode == "folder":
    swap("api.sock", folder)
key = os.environ["ANTHROPIC_API_KEY"]  # its run's token: which run this box is, by hash
open(os.path.join(ws, "planted"), "w").write(hashlib.sha256(key.encode()).hexdigest())
deadline = time.time() + 300
while not os.path.exists(os.path.join(ws, "restarted")) and time.time() < deadline:
    time.sleep(0.2)
status = None
if stat.S_ISSOCK(os.lstat(os.path.join(d, "api.sock")).st_mode):
    body = json.dumps({"model": "claude-opus-5-5", "max_tokens": 100,
                       "messages": [{"role": "user", "content": "hi"}]})
    c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=60)
    c.request("POST", "/v1/messages?beta=true", body=body,
              headers={"x-api-key": key, "content-type": "application/json"})
    status = c.getresponse().status
    c.close()
if mode == "links":
    swap("api.sock", folder)
print(json.dumps({"status": status}))
"""


def listening(path: Path) -> bool:
    """Whether something accepts connections on the unix socket `path` (links not followed:
    a link is no socket of the broker's)."""
    if not path.is_socket() or path.is_symlink():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def test_what_a_box_plants_in_its_socket_folder_never_leads_a_restarted_broker_out_of_it(
    broker: RunningBroker,
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    workspaces: Callable[[int], Path],
    tmp_path: Path,
) -> None:
    """Three boxes through one broker: a victim, one that replaces its sockets with links to
    the victim's socket and to host paths (and a FIFO, and a link named like the control
    socket), and one that makes its api.sock a folder. The broker is SIGKILLed and started
    again: it follows no link, removes and changes nothing outside the folders, serves each
    run on its own socket, and revokes the folder-filled run alone, leaving nothing of it
    listening. A socket swapped for a folder before its run ends is closed cleanly too."""
    real_api.script = Always(text("hi", usage=Usage(1000, 100)))
    targets = Path(tempfile.mkdtemp(prefix="fbx-aim-", dir="/tmp"))
    (targets / "file").write_text("keep\n")
    (targets / "dir").mkdir()
    (targets / "dir" / "inside").write_text("keep\n")
    for path in (targets, targets / "file", targets / "dir", targets / "dir" / "inside"):
        os.chown(path, host_user[1], host_user[2])  # the broker's user could change them
    (targets / "file").chmod(0o644)
    before = {p: (p.lstat().st_mode, p.lstat().st_ino) for p in targets.rglob("*")}
    log = tmp_path / "restarted.log"
    folders = {mode: workspaces(n) for n, mode in enumerate(("victim", "links", "folder"))}
    for ws in folders.values():
        ws.chmod(0o777)  # the test's markers, written as root, and the box's

    def box(mode: str, victim: Path) -> subprocess.CompletedProcess[str]:
        argv = [mode, str(folders[mode]), str(victim), str(targets / "file")]
        argv += [str(targets / "dir"), str(broker.folder / "control.sock")]
        command = [FLOWERBOX, "shell", "--", "python3", "-c", PLANTER, *argv]
        return as_user(host_user, command, cwd=folders[mode], env=broker.env)

    def socket_dir_of(ws: Path) -> Path:
        """The socket folder of the run whose box works in `ws` (its token's hash)."""
        token_sha256 = (ws / "planted").read_text()
        [(folder,)] = broker.query(
            f"SELECT socket_dir FROM runs WHERE token_sha256 = '{token_sha256}'"  # noqa: S608
        )
        return Path(folder)

    def planted(ws: Path) -> bool:
        marker = ws / "planted"
        return marker.exists() and len(marker.read_text()) == 64

    with ThreadPoolExecutor(3) as pool:
        victim = pool.submit(box, "victim", Path("/nonexistent"))
        boxes = {}
        try:
            wait_for(lambda: planted(folders["victim"]), 120)
            victim_sock = socket_dir_of(folders["victim"]) / "api.sock"
            boxes = {mode: pool.submit(box, mode, victim_sock) for mode in ("links", "folder")}
            wait_for(lambda: all(planted(folders[mode]) for mode in boxes), 120)
            sockets = {mode: socket_dir_of(ws) for mode, ws in folders.items()}
            assert (sockets["links"] / "api.sock").is_symlink()  # planted, through the mount
            for pid in [*descendants(broker.process.pid), broker.process.pid]:
                os.kill(pid, signal.SIGKILL)
            broker.process.wait(timeout=30)  # runuser's; the broker itself may still be dying:
            wait_for(lambda: not client.running(broker.folder), 30)  # until its socket is too
            with log.open("wb") as out:
                restart = user_argv(host_user, [FLOWERBOX, "broker"], broker.env)
                broker.process = subprocess.Popen(restart, stdout=out, stderr=out)
            wait_for(lambda: client.running(broker.folder), 60)

            served = client.call(broker.folder, {"op": "status"})["runs"]
            assert len(served) == 2, served  # the folder-filled run alone is revoked
            for mode in ("victim", "links"):
                api = sockets[mode] / "api.sock"
                assert listening(api) and not api.is_symlink(), mode
            # nothing left of that run: its proxy socket, bound before api.sock failed, too
            assert not os.path.lexists(sockets["folder"] / "proxy.sock")
            assert not listening(sockets["folder"] / "api.sock")
            assert (sockets["links"] / "control.sock").is_symlink()  # not the broker's: left
            after = {p: (p.lstat().st_mode, p.lstat().st_ino) for p in targets.rglob("*")}
            assert after == before and (targets / "file").read_text() == "keep\n"
        finally:  # the boxes wait for this word, whatever happened
            for ws in folders.values():
                (ws / "restarted").touch()
        done = {"victim": victim.result(), **{mode: f.result() for mode, f in boxes.items()}}
    outputs = {}
    for mode, result in done.items():
        assert result.returncode == 0, (mode, result.stderr[-3000:])
        outputs[mode] = json.loads(result.stdout.strip().splitlines()[-1])
    assert outputs == {
        "victim": {"status": 200},
        "links": {"status": 200},
        "folder": {"status": None},
    }
    for mode in ("victim", "links"):  # each run's call on its own socket, as its own run
        run_id = next(
            r
            for r, d in broker.query("SELECT run_id, socket_dir FROM runs")
            if Path(d) == sockets[mode]
        )
        statuses = broker.query(f"SELECT status FROM requests WHERE run_id = '{run_id}'")  # noqa: S608
        assert statuses == [(200,)], mode
    wait_for(lambda: client.call(broker.folder, {"op": "status"})["runs"] == {}, 60)
    assert "Traceback" not in log.read_text()  # the links run's end closed a folder cleanly
    assert targets.exists() and (targets / "dir" / "inside").read_text() == "keep\n"
    subprocess.run(["rm", "-rf", str(targets)], check=False)


def test_a_brokered_run_forwards_nothing_after_its_keeper_died_though_its_guard_waits(
    broker: RunningBroker,
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    docker_client: DockerClient,
) -> None:
    """A detached run through the broker, its keeper SIGKILLed while the model holds its
    request and its guard paused: the CLI asks again once the held answer comes, and none of
    it reaches the API; the broker's ledger has the refusals (the keeper's lease, taken over
    the control socket: flowerbox.sidecar.lease). The guard, continued, revokes the run."""
    ws = user_workspace
    held: list[int] = []

    def script(request: Request) -> Reply:
        if request.tool_results():
            return text("wrote")
        held.append(request.index)
        write = tool("Write", {"file_path": str(ws / "note.md"), "content": "# note\n"})
        return replace(write, delay=8.0)

    real_api.script = script
    try:
        started = as_user(
            host_user, [FLOWERBOX, "once", "write a note", "--detach"], cwd=ws, env=broker.env
        )
        assert started.returncode == 0, started.stderr[-3000:]
        run_id = started.stdout.strip()
        assert real_api.wait_for(lambda _: bool(held), 120)
        meta = json.loads((broker.state / "flowerbox" / "runs" / run_id / "meta.json").read_text())
        guard = guard_of(run_id)
        os.kill(guard, signal.SIGSTOP)
        try:
            os.killpg(meta["keeper_pid"], signal.SIGKILL)
            killed = time.time()

            def late() -> list[int]:
                return [r.index for r in real_api.requests if r.received_at > killed]

            def refused() -> bool:
                return (503,) in broker.query("SELECT status FROM requests")

            wait_for(lambda: refused() or bool(late()), 60)  # asked after the held answer
            time.sleep(3.0)  # and retried
            assert late() == []
            assert refused()
        finally:
            os.kill(guard, signal.SIGCONT)
        wait_for(lambda: broker.query("SELECT revoked_at FROM runs")[0][0] is not None, 60)
        assert late() == []
    finally:
        label = f"dev.flower.box.workspace={ws}"
        for container in docker_client.containers.list(all=True, filters={"label": label}):
            container.remove(force=True)
