"""The broker as a real process (`python -m flowerbox broker`) between clients on its runs'
unix sockets and a FakeAPI that accepts only the real key: tokens per run, revocation, each
run's budget and egress allowlist, the team budget, the ledger across a SIGKILL, and a
token of one run on another's socket. The boxes around it: tests/docker/test_broker.py."""

from __future__ import annotations

import http.client
import json
import os
import resource
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from flower.testing import Always, FakeAPI, Usage, text
from flowerbox.broker import client
from flowerbox.broker.control import CONTROL_SOCKET, Registration
from flowerbox.broker.ledger import CUT_NOTE, Ledger
from flowerbox.broker.server import LEDGER
from flowerbox.errors import BrokerError
from flowerbox.wire import API_SOCKET, PLACEHOLDER_KEY, PROXY_SOCKET
from tests.flowerbox.conftest import REAL_KEY, UnixHTTPConnection, kill_left_running, wait_for

MESSAGES = "/v1/messages?beta=true"
# 1000 input and 100 output tokens of claude-opus-5-5: $0.006 a request; the worst case
# the gateway reserves for `ask()` is about $0.003.
REPLY = text("hi", usage=Usage(1000, 100))
COST = 0.006


def ask() -> dict[str, Any]:
    return {
        "model": "claude-opus-5-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
    }


@dataclass
class Run:
    """A registered run: its token, sockets and host-only gateway folder."""

    run_id: str
    token: str
    socket_dir: Path
    gateway_dir: Path
    ledger: Path

    def request(
        self, key: str | None = None, *, socket_dir: Path | None = None, conn: Any = None
    ) -> tuple[int, dict[str, Any]]:
        """One Messages call with `key` (default: this run's token) on this run's socket
        (or `socket_dir`'s), on `conn` if given (kept open), else a fresh connection."""
        own = conn is None
        conn = conn or UnixHTTPConnection((socket_dir or self.socket_dir) / API_SOCKET)
        before = self.settled()
        try:
            headers = {"x-api-key": key or self.token, "content-type": "application/json"}
            conn.request("POST", MESSAGES, body=json.dumps(ask()).encode(), headers=headers)
            response = conn.getresponse()
            answer = response.status, json.loads(response.read())
        finally:
            if own:
                conn.close()
        # The client has its answer before the ledger has its settled row (and the usage
        # file its totals): wait for them, as the next request of a real client would not.
        wait_for(lambda: self.settled() > before)
        return answer

    def settled(self) -> int:
        """How many settled rows the ledger holds (of every run: the row of a token refused
        on another run's socket is that socket's run's)."""
        with sqlite3.connect(self.ledger) as db:
            return int(db.execute("SELECT COUNT(*) FROM requests WHERE settled = 1").fetchone()[0])

    def usage(self) -> dict[str, Any]:
        return dict(json.loads((self.gateway_dir / "usage.json").read_text()))


LOGIN_OPEN_FILES = 1024  # a login's usual soft limit (the hard one is higher)


def _a_logins_open_files() -> None:
    """The broker starts as from a developer's shell, whatever this runner's limit: a login's
    soft limit of open files, the hard one left as it is."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(LOGIN_OPEN_FILES, hard), hard))


@dataclass
class BrokerProcess:
    """`python -m flowerbox broker` with a private state folder, and the runs registered."""

    root: Path
    upstream: FakeAPI
    args: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None
    runs: list[Run] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return self.root / "state" / "flowerbox" / "broker"

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "FLOWER_"))}
        return keep | {
            "XDG_STATE_HOME": str(self.root / "state"),
            "HOME": str(self.root / "home"),
            "ANTHROPIC_API_KEY": REAL_KEY,
            "ANTHROPIC_BASE_URL": self.upstream.url,
            "DOCKER_HOST": f"unix://{self.root}/no-engine.sock",  # alive = its socket folder
        }

    def start(self) -> BrokerProcess:
        log = (self.root / "broker.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "flowerbox", "broker", *self.args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=self.env(),
            preexec_fn=_a_logins_open_files,
        )
        log.close()
        process = self.process
        wait_for(lambda: client.running(self.folder) or process.poll() is not None, 60)
        assert process.poll() is None, (self.root / "broker.log").read_text()
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        assert self.process is not None
        self.process.send_signal(sig)
        self.process.wait(timeout=60)

    def register(
        self,
        budget: float | None = None,
        allow: tuple[str, ...] | None = (),
        *,
        allow_api_fetch: bool = False,
    ) -> Run:
        n = len(self.runs)
        socket_dir = self.root / f"r{n}"
        socket_dir.mkdir(mode=0o700)
        run_id = f"20261202-000000-{n:06x}"
        gateway_dir = self.root / "state" / "runs" / run_id / "gateway"
        asked = Registration(run_id, socket_dir, gateway_dir, budget, allow, allow_api_fetch)
        token = client.register(self.folder, asked)
        run = Run(run_id, token, socket_dir, gateway_dir, self.folder / LEDGER)
        self.runs.append(run)
        return run

    def rows(self, run: Run | None = None) -> list[dict[str, Any]]:
        with sqlite3.connect(self.folder / LEDGER) as db:
            db.row_factory = sqlite3.Row
            where, args = ("WHERE run_id = ?", (run.run_id,)) if run else ("", ())
            return [dict(r) for r in db.execute(f"SELECT * FROM requests {where}", args)]


@pytest.fixture
def start_broker(sockdir: Path, upstream: FakeAPI) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []
    upstream.script = Always(REPLY)

    def start(*args: str) -> BrokerProcess:
        broker = BrokerProcess(sockdir, upstream, args).start()
        started.append(broker)
        return broker

    try:
        yield start
    finally:
        kill_left_running(broker.process for broker in started)


def test_each_run_has_its_own_token_and_the_real_key_stays_in_the_broker(
    start_broker: Callable[..., BrokerProcess], upstream: FakeAPI
) -> None:
    broker = start_broker()
    one, two = broker.register(), broker.register()
    assert one.token != two.token and len(one.token) >= 43
    for run in (one, two):
        status, body = run.request()
        assert status == 200, body
        assert run.usage()["total_cost_usd"] == pytest.approx(COST)
        assert run.usage()["client_credentials"] == {"run token": 1}
        assert stat.S_IMODE((run.socket_dir / API_SOCKET).stat().st_mode) == 0o600
    assert upstream.saw_key(REAL_KEY)
    assert not upstream.saw_key(one.token) and not upstream.saw_key(two.token)
    ledger = (broker.folder / LEDGER).read_bytes()
    assert one.token.encode() not in ledger and REAL_KEY.encode() not in ledger
    assert stat.S_IMODE((broker.folder / LEDGER).stat().st_mode) == 0o600
    assert stat.S_IMODE((broker.folder / CONTROL_SOCKET).stat().st_mode) == 0o600
    assert {r["run_id"]: r["status"] for r in broker.rows()} == {one.run_id: 200, two.run_id: 200}


def test_a_token_from_one_run_cannot_spend_anothers(
    start_broker: Callable[..., BrokerProcess], upstream: FakeAPI
) -> None:
    broker = start_broker()
    one, two = broker.register(), broker.register()
    for key in (one.token, PLACEHOLDER_KEY, "sk-" + two.token[3:]):
        status, body = two.request(key)
        assert status == 401, body
        assert "does not carry run" in body["error"]["message"]
    assert upstream.requests == []  # nothing reached the upstream
    assert one.usage()["total_cost_usd"] == two.usage()["total_cost_usd"] == 0
    refused = broker.rows(two)
    assert [r["status"] for r in refused] == [401, 401, 401]
    assert {r["note"] for r in refused} == {"refused: not this run's token"}
    assert broker.rows(one) == []


def test_a_runs_token_is_refused_once_it_ends(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    broker = start_broker()
    run = broker.register()
    kept = UnixHTTPConnection(run.socket_dir / API_SOCKET)  # a connection made while it ran
    assert run.request(conn=kept)[0] == 200
    assert client.revoke(broker.folder, run.run_id)
    status, body = run.request(conn=kept)
    assert status == 401 and "token is revoked" in body["error"]["message"], body
    kept.close()
    assert not (run.socket_dir / API_SOCKET).exists()  # and no new connection at all
    with pytest.raises(OSError):
        run.request()
    assert [r["status"] for r in broker.rows(run)] == [200, 401]


def test_one_runs_budget_never_blocks_another(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    broker = start_broker()
    poor, rich = broker.register(budget=0.01), broker.register(budget=1.0)
    statuses = [poor.request()[0] for _ in range(3)]
    assert statuses == [200, 200, 403]
    status, body = poor.request()
    assert status == 403 and "the run's budget of $0.01 is spent" in body["error"]["message"]
    assert [rich.request()[0] for _ in range(3)] == [200, 200, 200]
    assert poor.usage()["refused"] == 2
    assert [r["status"] for r in broker.rows(poor)] == [200, 200, 403, 403]


def test_a_team_budget_stops_new_requests_across_runs(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    broker = start_broker("--team-budget", "0.03")
    runs = [broker.register(), broker.register()]
    statuses = [runs[n % 2].request()[0] for n in range(6)]
    assert statuses[:4] == [200] * 4 and statuses[-1] == 403, statuses
    for run in runs:
        status, body = run.request()
        assert status == 403 and "the team's budget of $0.03" in body["error"]["message"]
        assert "--team-budget" in body["error"]["message"]
    spent = sum(r["cost_usd"] for r in broker.rows())
    assert spent <= 0.03
    status = client.call(broker.folder, {"op": "status"})
    assert status["team_spent_usd"] == pytest.approx(spent)


def test_each_run_has_its_own_egress_allowlist(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    """`localhost` is on one run's list only: there the name passes and only its loopback
    address is refused (looked up in /etc/hosts: nothing leaves the machine); the other run
    refuses the name itself. A `--net open` run gets no proxy at all."""
    broker = start_broker()
    listed, unlisted = broker.register(allow=("localhost",)), broker.register(allow=())
    net_open = broker.register(allow=None)
    assert not (net_open.socket_dir / PROXY_SOCKET).exists()
    decided = {}
    for run in (listed, unlisted):
        conn = UnixHTTPConnection(run.socket_dir / PROXY_SOCKET)
        conn.request("CONNECT", "localhost:443")
        assert conn.getresponse().status == 403
        conn.close()
        lines = (run.gateway_dir / "egress.jsonl").read_text().splitlines()
        decided[run.run_id] = json.loads(lines[-1])
    assert (
        decided[listed.run_id]["resolved"] == ["127.0.0.1"] or "resolved" in decided[listed.run_id]
    )
    assert "resolved" not in decided[unlisted.run_id]
    assert decided[listed.run_id]["reason"] != decided[unlisted.run_id]["reason"]


def test_a_broker_killed_mid_run_loses_no_ledger_entry(
    start_broker: Callable[..., BrokerProcess], upstream: FakeAPI
) -> None:
    broker = start_broker()
    run = broker.register(budget=1.0)
    assert [run.request()[0] for _ in range(3)] == [200] * 3
    upstream.script = Always(text("slow", usage=Usage(1000, 100), delay=30))
    cut = UnixHTTPConnection(run.socket_dir / API_SOCKET, timeout=30)
    cut.request("POST", MESSAGES, body=json.dumps(ask()).encode(), headers={"x-api-key": run.token})
    wait_for(lambda: len(broker.rows(run)) == 4)  # begun: admitted, forwarded, unanswered
    broker.stop(signal.SIGKILL)
    with pytest.raises((http.client.HTTPException, OSError)):
        cut.getresponse().read()
    cut.close()
    upstream.script = Always(REPLY)
    broker.start()  # the same folder: the run is served again at the same socket
    assert run.request()[0] == 200
    rows = broker.rows(run)
    assert [r["status"] for r in rows] == [200, 200, 200, None, 200]
    assert rows[3]["note"] == CUT_NOTE and rows[3]["cost_usd"] == rows[3]["reserved_usd"] > 0
    assert run.usage()["total_cost_usd"] == pytest.approx(4 * COST + rows[3]["cost_usd"])
    status = client.call(broker.folder, {"op": "status"})
    assert status["runs"] == {run.run_id: pytest.approx(run.usage()["total_cost_usd"])}


def test_a_restarted_broker_revokes_the_runs_whose_box_is_gone(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    broker = start_broker()
    gone, kept = broker.register(), broker.register()
    broker.stop()
    gone.socket_dir.rmdir()  # its run ended (and cleaned up) while the broker was down
    broker.start()
    assert client.call(broker.folder, {"op": "status"})["runs"].keys() == {kept.run_id}
    assert kept.request()[0] == 200


def test_a_broker_without_the_engine_never_asks_it_and_keeps_runs_by_their_folder(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    """`--no-engine` (compose's broker, in a container with no docker socket): a restart
    keeps a run while its socket folder exists, and nothing connects to the engine."""
    broker = start_broker("--no-engine")
    engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    engine.bind(str(broker.root / "no-engine.sock"))  # DOCKER_HOST: listening, and watched
    engine.listen(8)
    engine.setblocking(False)
    try:
        gone, kept = broker.register(), broker.register()
        broker.stop()
        gone.socket_dir.rmdir()
        broker.start()
        assert client.call(broker.folder, {"op": "status"})["runs"].keys() == {kept.run_id}
        assert kept.request()[0] == 200
        with pytest.raises(BlockingIOError):
            engine.accept()  # nobody asked the engine
    finally:
        engine.close()


def test_a_socket_folder_replaced_by_a_link_is_a_run_gone_and_nothing_is_bound_there(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    """`--no-engine`: while the broker is down a run's socket folder becomes a link to a
    folder of someone else's, holding an api.sock of theirs. A restart takes the run for
    gone (a link is no socket folder), so neither removes nor binds anything through it."""
    broker = start_broker("--no-engine")
    linked, other = broker.register(), broker.register()
    broker.stop()
    theirs = broker.root / "theirs"
    theirs.mkdir()
    (theirs / API_SOCKET).write_text("theirs\n")
    shutil.rmtree(linked.socket_dir)
    linked.socket_dir.symlink_to(theirs)
    broker.start()
    assert client.call(broker.folder, {"op": "status"})["runs"].keys() == {other.run_id}
    assert [p.name for p in theirs.iterdir()] == [API_SOCKET]
    assert (theirs / API_SOCKET).read_text() == "theirs\n"


def test_a_box_that_fills_its_socket_folder_cannot_stop_a_restart(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    """The socket folder is mounted into its box: while the broker is down the box swaps
    its api.sock for a folder that cannot be replaced. The broker starts all the same,
    revokes that run alone, and serves the others."""
    broker = start_broker()
    hostile, other = broker.register(), broker.register()
    broker.stop()
    (hostile.socket_dir / API_SOCKET).unlink(missing_ok=True)
    (hostile.socket_dir / API_SOCKET).mkdir()
    (hostile.socket_dir / API_SOCKET / "x").touch()
    broker.start()
    assert client.call(broker.folder, {"op": "status"})["runs"].keys() == {other.run_id}
    assert other.request()[0] == 200
    assert "its token is revoked" in (broker.root / "broker.log").read_text()


def test_malformed_http_on_a_runs_socket_is_refused_and_recorded(
    start_broker: Callable[..., BrokerProcess], upstream: FakeAPI
) -> None:
    """The broker reads what the agent writes, on the host: the gateway's strict reader."""
    broker = start_broker()
    run = broker.register()
    smuggled = (
        f"POST {MESSAGES} HTTP/1.1\r\nHost: x\r\nx-api-key: {run.token}\r\n"
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(run.socket_dir / API_SOCKET))
        sock.sendall(smuggled.encode())
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert upstream.requests == []
    wait_for(lambda: len(broker.rows(run)) == 1)
    (row,) = broker.rows(run)
    assert row["status"] == 400 and "Transfer-Encoding" in row["note"]


def test_the_control_socket_refuses_what_it_cannot_serve(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    broker = start_broker()
    run = broker.register()
    with pytest.raises(BrokerError, match="registered already"):
        client.register(broker.folder, Registration(run.run_id, run.socket_dir, run.gateway_dir))
    with pytest.raises(BrokerError, match="not a run id"):
        client.call(
            broker.folder,
            {"op": "register", "run_id": "../x", "socket_dir": "/tmp", "gateway_dir": "/tmp"},
        )
    with pytest.raises(BrokerError, match="unknown op"):
        client.call(broker.folder, {"op": "shutdown"})
    assert run.request()[0] == 200


def test_a_second_broker_on_the_same_folder_is_refused(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    broker = start_broker()
    second = subprocess.run(
        [sys.executable, "-m", "flowerbox", "broker"],
        env=broker.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert second.returncode == 2 and "a broker runs already" in second.stderr


def test_a_ledger_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.db").touch()
    (tmp_path / "ledger.db").symlink_to(tmp_path / "elsewhere.db")
    with pytest.raises(BrokerError, match="无法打开 broker 的账本"):
        Ledger(tmp_path / "ledger.db")


def test_status_shows_what_a_running_broker_serves(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    broker = start_broker("--team-budget", "1")
    run = broker.register()
    assert run.request()[0] == 200

    def status() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "flowerbox", "broker", "--status"],
            env=broker.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    shown = status()
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {
        "runs": {run.run_id: pytest.approx(COST)},
        "team_spent_usd": pytest.approx(COST),
        "team_budget_usd": 1.0,
    }
    broker.stop()
    gone = status()
    assert gone.returncode == 2 and "start it with `flowerbox broker`" in gone.stderr


def test_a_broker_of_many_runs_stops_at_once(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    """Each run's two servers wait up to a poll interval (0.2 s) to stop: one by one, 300
    runs took a minute (bench.many's broker of 1000 runs did not stop in 30 s). Started
    with a login's 1024 open files, the broker takes its hard limit: with 1024 it refused
    about the 250th run (each holds two sockets and its files)."""
    broker = start_broker()
    for _ in range(300):
        broker.register()
    assert broker.process is not None
    broker.process.send_signal(signal.SIGTERM)
    broker.process.wait(timeout=20)
    assert not any((run.socket_dir / API_SOCKET).exists() for run in broker.runs)


def test_a_broker_folder_too_deep_for_its_control_socket_is_said_with_exit_2(
    tmp_path: Path,
) -> None:
    """A state folder whose control socket path a unix socket cannot hold: said, exit 2
    (before: a traceback)."""
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    env = {"HOME": str(deep), "PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "sk-ant-x"}
    command = [sys.executable, "-m", "flowerbox", "broker", "--no-engine"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "cannot bind the broker's control socket" in done.stderr
    assert "set XDG_STATE_HOME to a shorter folder" in done.stderr
    assert "Traceback" not in done.stderr
