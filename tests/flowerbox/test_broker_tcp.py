"""The broker on a cluster, as a real process: `python -m flowerbox broker --listen
127.0.0.1:PORT` learns its runs from the run token Secrets of a fake Kubernetes API server
(tests/kube/fakeapi.py, through the official client and a kubeconfig), serves the API and
the egress proxy on loopback TCP, and tells each request's run by its token alone, in front
of a FakeAPI that accepts only the real key."""

from __future__ import annotations

import base64
import dataclasses
import http.client
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from flower.core.lifeline import bundled_cli
from flower.testing import Always, FakeAPI, Usage, text
from flowerbox.box.spec import BoxSpec
from flowerbox.broker.listener import presented_token, proxy_token
from flowerbox.kube.cluster import token_manifest
from flowerbox.kube.render import deliver_manifests, drop_manifests, run_manifests
from flowerbox.kube.target import KubeTarget, kube_spec
from flowerbox.sidecar.http import Incoming
from tests.flowerbox.conftest import REAL_KEY, kill_left_running, wait_for
from tests.flowerbox.gitremote import TOKEN, USER, git, git_remote, quiet_env
from tests.kube.fakeapi import FakeKube, fake_kube, write_kubeconfig
from tests.listening import stop_listening

MESSAGES = "/v1/messages?beta=true"
REPLY = text("hi", usage=Usage(1000, 100))  # $0.006 of claude-opus-5-5
COST = 0.006
NAMESPACE = "flowerbox"


def ask(content: Any = "hi") -> bytes:
    body = {"model": "claude-opus-5-5", "max_tokens": 100, "messages": [{"role": "user"}]}
    body["messages"][0]["content"] = content
    return json.dumps(body).encode()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ClusterRun:
    run_id: str
    token: str


@dataclass
class TcpBroker:
    """`python -m flowerbox broker --listen` on loopback, its ledger in `folder`."""

    root: Path
    kube: FakeKube
    upstream: FakeAPI
    args: tuple[str, ...] = ()
    git: str = ""  # more lines for its credentials file: a git credential
    api_port: int = field(default_factory=free_port)
    proxy_port: int = field(default_factory=free_port)
    git_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def folder(self) -> Path:
        return self.root / "ledger"

    @property
    def log(self) -> Path:
        return self.root / "broker.log"

    def start(self, *, listed: bool = True) -> TcpBroker:
        """Started, and once `listed` the Secrets listed; else once its API port answers."""
        credentials = self.root / "credentials.env"
        credentials.write_text(
            f"ANTHROPIC_API_KEY={REAL_KEY}\nANTHROPIC_BASE_URL={self.upstream.url}\n{self.git}"
        )
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "FLOWER"))}
        env = keep | {"KUBECONFIG": str(self.root / "kubeconfig"), "HOME": str(self.root)}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        watches = self.watches("secrets"), self.watches("jobs")
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(credentials), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=env,
            )  # fmt: skip
        process = self.process
        # Listening, and the Secrets and Jobs listed once (each watch follows a list).
        now = lambda: (self.watches("secrets"), self.watches("jobs"))  # noqa: E731
        ready = (
            (lambda: all(a > b for a, b in zip(now(), watches, strict=True)))
            if listed
            else self.answers
        )
        wait_for(lambda: ready() or process.poll() is not None, 60)
        assert process.poll() is None, self.log.read_text()
        return self

    def command(self, credentials: Path) -> list[str]:
        """How it is started: `flowerbox broker --listen` with this checkout's Python."""
        return [sys.executable, "-m", "flowerbox", *self.arguments(credentials)]

    def arguments(self, credentials: Path) -> list[str]:
        command = ["broker", "--listen", f"127.0.0.1:{self.api_port}"]
        command += ["--proxy-port", str(self.proxy_port), "--git-port", str(self.git_port)]
        command += ["--credentials", str(credentials), "--ledger", str(self.folder)]
        return [*command, "--namespace", NAMESPACE, *self.args]

    def answers(self) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.api_port)) == 0

    def watches(self, plural: str) -> int:
        return sum(
            r.query.get("watch") == ["true"] and r.path.endswith(f"/{plural}")
            for r in self.kube.requests
        )

    def stop(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=60) == 0, self.log.read_text()

    def add(
        self,
        run_id: str,
        *,
        budget: float | None = None,
        allow: tuple[str, ...] = (),
        repo: str = "",
        allow_api_fetch: bool = False,
    ) -> ClusterRun:
        """A run's token Secret and its Job, as `flowerbox "ask" --on kube` makes them;
        returns once its token is served."""
        spec = kube_spec(run_id, image="flowerbox:test", command=("flower",))
        spec = dataclasses.replace(
            spec, budget_usd=budget, allow=allow, allow_api_fetch=allow_api_fetch
        )
        token = base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
        self.kube.put("secrets", token_manifest(spec, NAMESPACE, token, repo=repo))
        self.wait_logged(f"run {run_id}: serving its token")
        self.job(spec, f"flowerbox-{run_id}")
        return ClusterRun(run_id, token)

    def job(self, spec: BoxSpec, name: str, *, deliver: bool = False) -> None:
        """A Job of the run as the client makes it (running: no status yet); returns once
        the broker serves its token for it."""
        target = KubeTarget(repo="https://git.example/a.git")
        made = deliver_manifests(spec, target)[0] if deliver else run_manifests(spec, target)[2]
        made["metadata"]["name"] = name
        line = f"run {spec.run_id}: a Job holding its token runs"
        times = self.log.read_text().count(line) + 1
        self.kube.put("jobs", made)
        self.wait_logged(line, times=times)

    def end(self, name: str, run_id: str) -> None:
        """The Job ended, as its controller says so; returns once the broker heard."""
        line = f"run {run_id}: no Job holding its token runs"
        times = self.log.read_text().count(line) + 1
        self.kube.modify("jobs", name, status={"succeeded": 1})
        self.wait_logged(line, times=times)

    def remove(self, run: ClusterRun) -> None:
        assert self.kube.delete("secrets", f"flowerbox-{run.run_id}-token") is not None
        self.wait_logged(f"run {run.run_id}: its Secret was deleted")

    def wait_logged(self, line: str, *, times: int = 1) -> None:
        wait_for(lambda: self.log.read_text().count(line) >= times, 30)

    def request(
        self,
        headers: dict[str, str] | list[tuple[str, str]],
        body: bytes | None = None,
        *,
        target: str = MESSAGES,
    ) -> tuple[int, dict[str, Any]]:
        """One Messages call (`body`, else `ask()`; or one to `target`) with exactly `headers`
        (a list may repeat a name)."""
        before = self.recorded()
        conn = http.client.HTTPConnection("127.0.0.1", self.api_port, timeout=30)
        try:
            conn.putrequest("POST", target)
            listed = headers.items() if isinstance(headers, dict) else headers
            for name, value in [*listed, ("content-type", "application/json")]:
                conn.putheader(name, value)
            body = body or ask()
            conn.putheader("content-length", str(len(body)))
            conn.endheaders(body)
            response = conn.getresponse()
            answer = response.status, json.loads(response.read())
        finally:
            conn.close()
        wait_for(lambda: self.recorded() > before)
        return answer

    def recorded(self) -> int:
        """Requests the ledger holds: settled rows, and refusals counted."""
        return self.settled() + sum(r["count"] for r in self.refusals())

    def refusals(self, listener: str | None = None) -> list[dict[str, Any]]:
        with sqlite3.connect(self.folder / "ledger.db") as db:
            db.row_factory = sqlite3.Row
            known = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'refusals'").fetchall()
            query = "SELECT * FROM refusals ORDER BY rowid"
            rows = [dict(r) for r in db.execute(query)] if known else []  # a ledger before them
        return [r for r in rows if listener is None or r["listener"] == listener]

    def causes(self, listener: str) -> dict[str, int]:
        """The refusals counted at `listener`, per cause (and the revoked run: `cause run`)."""
        found: dict[str, int] = {}
        for row in self.refusals(listener):
            cause = row["cause"] if row["run_id"] == "-" else f"{row['cause']} {row['run_id']}"
            found[cause] = found.get(cause, 0) + row["count"]
        return found

    def rss_kib(self) -> int:
        """The broker process's resident memory (VmRSS), KiB."""
        assert self.process is not None
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(next(ln for ln in status.splitlines() if ln.startswith("VmRSS:")).split()[1])

    def spend(self, run: ClusterRun) -> int:
        return self.request({"x-api-key": run.token})[0]

    def settled(self) -> int:
        return len([row for row in self.rows() if row["settled"]])

    def rows(self, run_id: str | None = None) -> list[dict[str, Any]]:
        with sqlite3.connect(self.folder / "ledger.db") as db:
            db.row_factory = sqlite3.Row
            rows = [dict(r) for r in db.execute("SELECT * FROM requests ORDER BY id")]
        return [r for r in rows if run_id is None or r["run_id"] == run_id]

    def usage(self, run: ClusterRun) -> dict[str, Any]:
        return dict(json.loads((self.folder / "runs" / run.run_id / "usage.json").read_text()))


@contextmanager
def cluster_brokers(
    tmp_path: Path, upstream: FakeAPI, kind: type[TcpBroker] = TcpBroker
) -> Iterator[Callable[..., TcpBroker]]:
    """`start(*args, git=...)` starts a TcpBroker (or a `kind` of it: the `start_broker`
    fixture); each one started is killed at the end if it still runs."""
    upstream.script = Always(REPLY)
    started: list[TcpBroker] = []
    with fake_kube() as kube:
        write_kubeconfig(tmp_path / "kubeconfig", kube)

        def start(*args: str, git: str = "") -> TcpBroker:
            broker = kind(tmp_path, kube, upstream, args, git).start()
            started.append(broker)
            return broker

        try:
            yield start
        finally:
            kill_left_running(broker.process for broker in started)


@pytest.fixture
def start_broker(tmp_path: Path, upstream: FakeAPI) -> Iterator[Callable[..., TcpBroker]]:
    with cluster_brokers(tmp_path, upstream) as start:
        yield start


def test_two_runs_learned_from_their_secrets_each_spend_their_own_budget(
    start_broker: Callable[..., TcpBroker], upstream: FakeAPI
) -> None:
    broker = start_broker()
    poor = broker.add("20261202-000000-aaaaaa", budget=0.01)
    rich = broker.add("20261202-000000-bbbbbb", budget=1.0)
    assert [broker.spend(poor) for _ in range(3)] == [200, 200, 403]
    assert [broker.spend(rich) for _ in range(3)] == [200, 200, 200]
    assert broker.usage(poor)["total_cost_usd"] == pytest.approx(2 * COST)
    assert broker.usage(rich)["total_cost_usd"] == pytest.approx(3 * COST)
    assert broker.usage(rich)["client_credentials"] == {"run token": 3}
    assert [r["status"] for r in broker.rows(poor.run_id)] == [200, 200, 403]
    assert upstream.saw_key(REAL_KEY)
    assert not upstream.saw_key(poor.token) and not upstream.saw_key(rich.token)
    ledger = (broker.folder / "ledger.db").read_bytes()
    assert poor.token.encode() not in ledger and REAL_KEY.encode() not in ledger
    # A bearer token is the same token: charged to its run, never to another.
    assert broker.request({"authorization": f"Bearer {rich.token}"})[0] == 200
    assert broker.usage(rich)["total_cost_usd"] == pytest.approx(4 * COST)
    assert broker.usage(poor)["total_cost_usd"] == pytest.approx(2 * COST)


def test_no_token_an_unknown_one_and_a_deleted_runs_are_refused_and_recorded(
    start_broker: Callable[..., TcpBroker], upstream: FakeAPI
) -> None:
    broker = start_broker()
    run = broker.add("20261202-000000-cccccc")
    other = broker.add("20261202-000000-dddddd")
    refused = [
        broker.request({}),
        broker.request({"x-api-key": "sk-" + run.token[3:]}),
        broker.request({"x-api-key": "sk-flowerbox-placeholder"}),
    ]
    assert [status for status, _ in refused] == [401, 401, 401], refused
    assert "no token" in refused[0][1]["error"]["message"]
    assert "not a token of a run" in refused[1][1]["error"]["message"]
    assert upstream.requests == []  # nothing forwarded
    assert broker.rows() == []  # no row of its own: counted (test_broker_hostile.py)
    assert broker.causes("api") == {"refused: no token": 1, "refused: unknown token": 2}

    assert broker.spend(run) == 200
    broker.remove(run)
    status, body = broker.request({"x-api-key": run.token})
    assert status == 401 and f"run {run.run_id} has ended" in body["error"]["message"]
    assert [r["note"] for r in broker.rows(run.run_id)] == [None]
    assert broker.causes("api")[f"refused: token revoked {run.run_id}"] == 1
    assert broker.spend(other) == 200  # the other run is served as before
    assert len(upstream.requests) == 2


def test_a_request_smuggling_a_second_token_is_refused(
    start_broker: Callable[..., TcpBroker], upstream: FakeAPI
) -> None:
    """Attack: a box holding one token (and having seen another, or guessing) sends two
    credentials, hoping the broker charges one and the upstream reads the other, or that
    the broker checks one and forwards the other's run."""
    broker = start_broker()
    mine, theirs = broker.add("20261202-000000-eeeeee"), broker.add("20261202-000000-ffffff")
    attempts = [
        [("x-api-key", mine.token), ("x-api-key", theirs.token)],
        [("x-api-key", mine.token), ("x-api-key", mine.token)],
        [("x-api-key", mine.token), ("authorization", f"Bearer {theirs.token}")],
        [("authorization", f"Bearer {theirs.token}"), ("x-api-key", "sk-else")],
    ]
    for headers in attempts:
        status, body = broker.request(headers)
        assert status == 401, (headers, body)
    assert upstream.requests == []
    assert broker.causes("api") == {"refused: two credentials": len(attempts)}
    assert broker.rows() == []


def test_a_team_budget_stops_new_requests_across_runs(
    start_broker: Callable[..., TcpBroker],
) -> None:
    broker = start_broker("--team-budget", "0.03")
    runs = [broker.add("20261202-000000-111111"), broker.add("20261202-000000-222222")]
    statuses = [broker.spend(runs[n % 2]) for n in range(6)]
    assert statuses[:4] == [200] * 4 and statuses[-1] == 403, statuses
    for run in runs:
        status, body = broker.request({"x-api-key": run.token})
        assert status == 403 and "the team's budget of $0.03" in body["error"]["message"]
    assert sum(r["cost_usd"] for r in broker.rows()) <= 0.03


def test_a_runs_token_is_refused_once_no_job_holding_it_runs(
    start_broker: Callable[..., TcpBroker], upstream: FakeAPI
) -> None:
    """Attack L2: on a cluster a run's token stayed valid until `rm --on kube`, so a token
    the agent leaked (into its branch, say) spent the run's budget from another run's Pod
    long after the run ended. Now it is served only while a Job that reads it runs: refused
    once the run's Job ended or was deleted, served again for a resume or a deliver Job,
    never for a Job that does not hold it (a drop Job beside the run)."""
    broker = start_broker()
    run = broker.add("20261202-000000-121212", allow=("127.0.0.1",))
    spec = kube_spec(run.run_id, image="flowerbox:test", command=("flower",))
    assert broker.spend(run) == 200
    broker.end(f"flowerbox-{run.run_id}", run.run_id)
    status, body = broker.request({"x-api-key": run.token})
    assert status == 401 and "has no running Job" in body["error"]["message"]
    status, tunnel = connect(broker, "127.0.0.1:9", run.token)
    tunnel.close()
    assert status == 407
    broker.job(spec, f"flowerbox-{run.run_id}-1")  # a resume
    assert broker.spend(run) == 200
    line = f"run {run.run_id}: no Job holding its token runs"
    times = broker.log.read_text().count(line) + 1
    assert broker.kube.delete("jobs", f"flowerbox-{run.run_id}-1") is not None  # stop
    broker.wait_logged(line, times=times)
    assert broker.spend(run) == 401
    target = KubeTarget(repo="https://git.example/a.git")
    drop = drop_manifests(spec, target, {"send": "x"}, file="f.json", tag="ab12")[0]
    broker.kube.put("jobs", drop)  # running, beside nothing: it holds no token
    broker.job(spec, f"flowerbox-{run.run_id}-deliver", deliver=True)
    assert broker.spend(run) == 200
    broker.end(f"flowerbox-{run.run_id}-deliver", run.run_id)
    assert broker.spend(run) == 401
    # the served calls are the run's rows; its refused ones are counted apart (issue 34)
    assert [r["note"] for r in broker.rows(run.run_id)] == [None, None, None]
    assert broker.causes("api") == {f"refused: no running Job {run.run_id}": 3}
    assert len(upstream.requests) == 3


class Echo(threading.Thread):
    """A loopback TCP server that sends back what it gets: the only upstream of the proxy."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(conn.recv(1024))


def connect(broker: TcpBroker, target: str, token: str | None) -> tuple[int, socket.socket]:
    """A CONNECT through the broker's proxy with `token` as the proxy URL's password."""
    sock = socket.create_connection(("127.0.0.1", broker.proxy_port), timeout=10)
    head = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
    if token is not None:
        basic = base64.b64encode(f"run:{token}".encode()).decode()
        head += f"Proxy-Authorization: Basic {basic}\r\n"
    sock.sendall((head + "\r\n").encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(1)
    return int(answer.split(b" ")[1]), sock


def test_the_proxy_tells_runs_by_token_and_holds_each_to_its_allowlist(
    start_broker: Callable[..., TcpBroker],
) -> None:
    echo = Echo()
    echo.start()
    broker = start_broker()
    listed = broker.add("20261202-000000-333333", allow=("127.0.0.1",))
    unlisted = broker.add("20261202-000000-444444", allow=("pypi.org",))
    target = f"127.0.0.1:{echo.port}"
    status, tunnel = connect(broker, target, listed.token)
    assert status == 200
    with tunnel:
        tunnel.sendall(b"ping")
        assert tunnel.recv(4) == b"ping"
    for token in (unlisted.token, None, "not-a-token"):
        status, sock = connect(broker, target, token)
        sock.close()
        assert status == (403 if token == unlisted.token else 407)
    stop_listening(echo.sock, echo)

    def decisions(where: Path) -> list[tuple[str, str]]:
        lines = where.read_text().splitlines()
        return [(e["decision"], e["reason"]) for e in map(json.loads, lines)]

    runs = broker.folder / "runs"
    assert [d for d, _ in decisions(runs / listed.run_id / "egress.jsonl")] == ["allow"]
    assert [d for d, _ in decisions(runs / unlisted.run_id / "egress.jsonl")] == ["deny"]
    wait_for(lambda: broker.causes("proxy") == {"refused 407": 2})
    assert "no token: put the run's token in the proxy URL" in broker.log.read_text()


def test_a_restarted_broker_keeps_its_ledger_and_drops_the_runs_deleted_meanwhile(
    start_broker: Callable[..., TcpBroker], tmp_path: Path
) -> None:
    broker = start_broker()
    kept = broker.add("20261202-000000-555555", budget=0.02)
    gone = broker.add("20261202-000000-666666")
    assert [broker.spend(kept) for _ in range(3)] + [broker.spend(gone)] == [200] * 4
    broker.stop()
    assert broker.kube.delete("secrets", f"flowerbox-{gone.run_id}-token") is not None
    broker.start()
    status, body = broker.request({"x-api-key": gone.token})
    assert status == 401 and "has ended" in body["error"]["message"]
    # The budget counts what was spent before the restart: $0.018 of $0.02 leaves no room.
    status, body = broker.request({"x-api-key": kept.token})
    assert (
        status == 403 and "the run's budget of $0.02 has $0.0020 left" in body["error"]["message"]
    )
    assert [r["status"] for r in broker.rows(kept.run_id)] == [200, 200, 200, 403]
    assert [r["status"] for r in broker.rows(gone.run_id)] == [200]
    wait_for(lambda: f"refused: token revoked {gone.run_id}" in broker.causes("api"))


def test_a_restarted_broker_serves_no_run_of_its_ledger_before_it_has_listed_the_secrets(
    start_broker: Callable[..., TcpBroker], tmp_path: Path
) -> None:
    """Attack: a run's Secret is deleted while the broker is down, and the broker comes
    back with the API server out of reach. The ledger still has the run as served, but
    until the Secrets are listed nothing says it is still a run: its token is refused."""
    broker = start_broker()
    gone = broker.add("20261202-000000-999999")
    assert broker.spend(gone) == 200
    broker.stop()
    assert broker.kube.delete("secrets", f"flowerbox-{gone.run_id}-token") is not None
    nowhere = FakeKube(url=f"http://127.0.0.1:{free_port()}")  # nothing listens there
    write_kubeconfig(tmp_path / "kubeconfig", nowhere)
    broker.start(listed=False)
    status, body = broker.request({"x-api-key": gone.token})
    assert status == 401, body
    assert "once the broker has listed" in body["error"]["message"]


def test_the_bundled_cli_presents_its_token_to_the_proxy(
    start_broker: Callable[..., TcpBroker], tmp_path: Path
) -> None:
    """The agent's environment on a cluster (flowerbox.kube.pod): the token as the proxy
    URL's password. The real CLI sends it as Proxy-Authorization (on a CONNECT for https,
    on the request itself for plain http), so the broker holds it to the run's allowlist;
    here the API itself goes through the proxy (no NO_PROXY) to show the whole way: the
    proxied request and the model call are both that run's."""
    broker = start_broker()
    run = broker.add("20261202-000000-777777", allow=("127.0.0.1",))
    proxy = f"http://run:{run.token}@127.0.0.1:{broker.proxy_port}"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "ANTHROPIC_API_KEY": run.token,
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{broker.api_port}",
        "HTTPS_PROXY": proxy,
        "HTTP_PROXY": proxy,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }
    cli = bundled_cli()
    assert cli is not None, "the SDK's bundled CLI is missing"
    done = subprocess.run(
        [cli, "-p", "hi"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hi" in done.stdout
    decided = (broker.folder / "runs" / run.run_id / "egress.jsonl").read_text().splitlines()
    connects = [json.loads(line) for line in decided]
    assert {(c["method"], c["port"], c["decision"]) for c in connects} == {
        ("POST", broker.api_port, "allow")
    }
    assert [r["status"] for r in broker.rows(run.run_id)] == [200] * len(broker.rows())


def test_a_secret_that_holds_no_usable_run_is_left_out_and_the_others_served(
    start_broker: Callable[..., TcpBroker],
) -> None:
    """Whoever may write Secrets in the namespace may write a bad one: a run id that would
    name a folder elsewhere, a budget that is no positive number, an allowlist that is no
    list, a token that is no base64. Each is left out, said on stderr; nothing else stops."""
    broker = start_broker()
    spec = kube_spec("20261202-000000-888888", image="flowerbox:test", command=("flower",))
    bad = [
        ("x1", {"flowerbox.dev/run-id": "../../escape"}, {}),
        ("x2", {}, {"flowerbox.dev/budget-usd": "-1"}),
        ("x3", {}, {"flowerbox.dev/allow": '"pypi.org"'}),
        ("x4", {}, {"flowerbox.dev/budget-usd": "nan"}),
    ]
    for name, labels, notes in bad:
        secret = token_manifest(
            dataclasses.replace(spec, run_id=f"20261202-{name}"), NAMESPACE, "t"
        )
        secret["metadata"]["labels"] |= labels
        secret["metadata"]["annotations"] |= notes
        broker.kube.put("secrets", secret)
    unencoded = token_manifest(dataclasses.replace(spec, run_id="20261202-x5"), NAMESPACE, "t")
    unencoded["data"] = {"token": "not base64!"}
    del unencoded["stringData"]
    broker.kube.put("secrets", unencoded)
    good = broker.add(spec.run_id)
    copied = token_manifest(dataclasses.replace(spec, run_id="20261202-x6"), NAMESPACE, good.token)
    broker.kube.put("secrets", copied)
    broker.wait_logged("run 20261202-x6: its token is another run's")
    assert broker.spend(good) == 200
    assert [r["run_id"] for r in broker.rows()] == [good.run_id]
    log = broker.log.read_text()
    assert "not a run id: '../../escape'" in log
    assert log.count("a run's budget must be a positive number") == 2
    assert "is not a JSON list" in log and "is not base64" in log
    assert sorted(p.name for p in (broker.folder / "runs").iterdir()) == [good.run_id]


def test_the_cluster_options_go_with_listen_and_a_cluster(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env |= {"KUBECONFIG": str(tmp_path / "missing"), "HOME": str(tmp_path)}

    def broker(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "flowerbox", "broker", *args]
        return subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=60, check=False
        )

    alone = broker("--ledger", str(tmp_path / "ledger"))
    assert alone.returncode == 2 and "go with --listen" in alone.stderr
    nowhere = broker("--listen", f"127.0.0.1:{free_port()}", "--ledger", str(tmp_path / "l"))
    assert nowhere.returncode == 2 and "连不上任何集群" in nowhere.stderr
    assert not (tmp_path / "l").exists()


def incoming(*headers: tuple[str, str]) -> Incoming:
    return Incoming("CONNECT", "pypi.org:443", list(headers), "1.1")


def test_the_proxy_reads_the_token_only_from_one_basic_credential() -> None:
    basic = "Basic " + base64.b64encode(b"run:tok").decode()
    assert proxy_token(incoming(("proxy-authorization", basic))) == "tok"
    assert proxy_token(incoming()) is None
    refused = [
        ("proxy-authorization", "Bearer tok"),
        ("proxy-authorization", "Basic " + base64.b64encode(b"no-colon").decode()),
        ("proxy-authorization", "Basic not*base64"),
    ]
    for header in refused:
        with pytest.raises(ValueError, match="not Basic"):
            proxy_token(incoming(header))
    with pytest.raises(ValueError, match="twice"):
        proxy_token(incoming(("proxy-authorization", basic), ("proxy-authorization", basic)))
    assert presented_token(incoming(("x-api-key", "a"), ("authorization", "Bearer a"))) == "a"


def test_the_git_relay_it_serves_clones_and_pushes_a_runs_own_branch_with_its_note(
    start_broker: Callable[..., TcpBroker], tmp_path: Path
) -> None:
    """The relay as `flowerbox broker --listen` serves it: a run known from its Secret (its
    repository and image in the annotations) clones and pushes its branch through it, with
    the credential only the broker's file holds, and the note says which run and image."""
    env = quiet_env(tmp_path / "remote-home")
    with git_remote(tmp_path / "remote", env) as remote:
        remote.create("app")
        broker = start_broker(
            git=f"GIT_HOST={remote.host}\nGIT_TOKEN={TOKEN}\nGIT_USERNAME={USER}\n"
            f"GIT_BASE_URL=http://{remote.host}\n"
        )
        run = broker.add("20261202-000000-gggggg", repo=remote.url("app"), allow=("pypi.org",))
        stranger = broker.add("20261202-000000-hhhhhh")  # created with no repository
        relay = f"http://127.0.0.1:{broker.git_port}/"

        def git_as(token: str, *args: str, cwd: Path | None = None) -> Any:
            settings = {f"url.{relay}.insteadOf": "https://", "credential.helper": ""}
            settings["http.extraHeader"] = f"Authorization: Bearer {token}"
            config = {"GIT_CONFIG_COUNT": str(len(settings))}
            for n, (key, value) in enumerate(settings.items()):
                config |= {f"GIT_CONFIG_KEY_{n}": key, f"GIT_CONFIG_VALUE_{n}": value}
            return subprocess.run(
                ["git", *args], cwd=cwd, env=quiet_env(tmp_path / "run-home") | config,
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip

        work = tmp_path / "work"
        cloned = git_as(run.token, "clone", "-q", remote.url("app"), str(work))
        log = broker.folder / "git.jsonl"
        assert cloned.returncode == 0, cloned.stderr + log.read_text() + broker.log.read_text()
        refused = git_as(stranger.token, "clone", "-q", remote.url("app"), str(tmp_path / "x"))
        assert refused.returncode != 0 and not (tmp_path / "x").exists()
        (work / "made.txt").write_text("the run's work\n")
        git("add", "made.txt", cwd=work, env=quiet_env(tmp_path / "run-home"))
        git("commit", "-q", "-m", "work", cwd=work, env=quiet_env(tmp_path / "run-home"))
        branch = f"refs/flowerbox/{run.run_id}"  # not a branch: no forge CI runs on it
        sha = git("rev-parse", "HEAD", cwd=work, env=quiet_env(tmp_path / "run-home")).strip()
        to_main = git_as(run.token, "push", "origin", "HEAD:refs/heads/main", cwd=work)
        assert to_main.returncode != 0
        pushed = git_as(run.token, "push", "origin", f"HEAD:{branch}", cwd=work)
        assert pushed.returncode == 0, pushed.stderr + log.read_text() + broker.log.read_text()
        assert branch in remote.refs("app") and "refs/heads/main" in remote.refs("app")
        wait_for(lambda: '"note": ' in log.read_text(), 180)  # written, or why not
        assert '"note": "written"' in log.read_text(), log.read_text()
        notes = tmp_path / "notes"
        git("clone", "-q", "--bare", str(remote.root / "app.git"), str(notes), env=env)
        git(
            "fetch", "-q", "origin", "refs/notes/flowerbox:refs/notes/flowerbox", cwd=notes, env=env
        )
        note = git("notes", "--ref=flowerbox", "show", sha, cwd=notes, env=env)
        assert f"flowerbox-run: {run.run_id}" in note
        assert "image: flowerbox:test" in note and f"namespace: {NAMESPACE}" in note
        assert "network: allowlist: pypi.org" in note
        broker.remove(run)  # its Secret deleted: its token opens nothing any more
        again = git_as(run.token, "ls-remote", remote.url("app"))
        assert again.returncode != 0
        assert TOKEN not in log.read_text() and run.token not in log.read_text()
        wait_for(lambda: broker.causes("git").get("refused 401", 0) >= 2)


def test_a_secret_nested_past_the_parsers_depth_stops_no_learning_nor_revoking(
    start_broker: Callable[..., TcpBroker],
) -> None:
    """An allowlist annotation of nested lists deep enough that json.loads raises
    RecursionError (no ValueError): it is left out like any bad Secret, and the broker goes
    on learning runs from the Secrets after it (a dead watch would serve the runs it knew
    until it restarts, their Secrets deleted or not)."""
    broker = start_broker()
    spec = kube_spec("20261202-000000-777777", image="flowerbox:test", command=("flower",))
    deep = token_manifest(dataclasses.replace(spec, run_id="20261202-deep"), NAMESPACE, "t")
    deep["metadata"]["annotations"]["flowerbox.dev/allow"] = "[" * 100_000
    broker.kube.put("secrets", deep)
    broker.wait_logged("a run token Secret left out")
    good = broker.add(spec.run_id)
    assert broker.spend(good) == 200


def test_each_request_on_a_kept_alive_connection_is_told_by_its_own_token(
    start_broker: Callable[..., TcpBroker], upstream: FakeAPI
) -> None:
    """Attack: one connection, the first request with the run's token, the next ones with
    none, with a lower-case `bearer`, with the token and junk after it: each is judged
    alone, so only the first goes upstream, and only it is charged to the run."""
    broker = start_broker()
    mine = broker.add("20261202-000000-kkkkkk")
    conn = http.client.HTTPConnection("127.0.0.1", broker.api_port, timeout=30)
    statuses = []
    try:
        for headers in (
            {"x-api-key": mine.token},
            {},
            {"authorization": f"bearer {mine.token}"},
            {"authorization": f"Bearer {mine.token} junk"},
        ):
            conn.request("POST", MESSAGES, ask(), headers | {"content-type": "application/json"})
            response = conn.getresponse()
            response.read()
            statuses.append(response.status)
    finally:
        conn.close()
    assert statuses == [200, 401, 401, 401]
    assert len(upstream.requests) == 1
    wait_for(lambda: broker.recorded() == 4)
    assert [r["status"] for r in broker.rows(mine.run_id)] == [200]


def test_a_runs_api_fetches_follow_the_flag_on_its_token_secret(
    start_broker: Callable[..., TcpBroker], upstream: FakeAPI
) -> None:
    """A document by URL: refused for a run whose Secret does not allow it, forwarded for
    the one whose Secret says `flowerbox.dev/allow-api-fetch: "true"`."""
    broker = start_broker()
    plain = broker.add("20261202-000000-aaaaa1")
    fetching = broker.add("20261202-000000-aaaaa2", allow_api_fetch=True)
    source = {"type": "url", "url": "https://evil.test/big.pdf"}
    body = ask([{"type": "document", "source": source}, {"type": "text", "text": "go"}])
    status, answer = broker.request({"x-api-key": plain.token}, body)
    assert status == 403 and "--allow-api-fetch" in answer["error"]["message"]
    assert upstream.requests == []
    assert broker.request({"x-api-key": fetching.token}, body)[0] == 200
    assert len(upstream.requests) == 1
    assert [r["note"] for r in broker.rows(plain.run_id)] == ["refused: API fetch"]


def test_a_broker_that_refused_a_request_binds_its_ports_again_at_once(
    start_broker: Callable[..., TcpBroker],
) -> None:
    """A refusal from the head is closed by the broker first, so its port holds a TIME_WAIT
    connection for a minute: a broker restarted meanwhile must still bind it (before, it
    exited "Address already in use": SO_REUSEADDR was never set on the listeners)."""
    broker = start_broker()
    run = broker.add("20261207-000000-dddddd")
    assert broker.request({})[0] == 401
    assert broker.spend(run) == 200
    broker.stop()
    broker.start()
    assert broker.spend(run) == 200
