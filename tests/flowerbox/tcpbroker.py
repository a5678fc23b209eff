"""`python -m flowerbox broker --listen 127.0.0.1:PORT` as a real process, learning its runs
from the run token Secrets of a fake Kubernetes API server (tests/kube/fakeapi.py, through
the official client and a kubeconfig), in front of a FakeAPI that accepts only the real
key: what tests/flowerbox/test_broker_tcp.py and test_broker_hostile.py drive."""

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flower.testing import Always, FakeAPI, Usage, text
from flowerbox.kube.cluster import token_manifest
from flowerbox.kube.target import kube_spec
from tests.flowerbox.conftest import REAL_KEY, kill_left_running, wait_for
from tests.kube.fakeapi import FakeKube, fake_kube, write_kubeconfig

MESSAGES = "/v1/messages?beta=true"
REPLY = text("hi", usage=Usage(1000, 100))  # $0.006 of claude-opus-5-5
COST = 0.006
NAMESPACE = "flowerbox"


def ask() -> bytes:
    body = {"model": "claude-opus-5-5", "max_tokens": 100, "messages": [{"role": "user"}]}
    body["messages"][0]["content"] = "hi"
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
        watches = self.watches()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(credentials), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=env,
            )  # fmt: skip
        process = self.process
        # Listening, and the Secrets listed once (each watch follows a list).
        ready = (lambda: self.watches() > watches) if listed else self.answers
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

    def watches(self) -> int:
        return sum(r.query.get("watch") == ["true"] for r in self.kube.requests)

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
    ) -> ClusterRun:
        """A run's token Secret, as `flowerbox "ask" --on kube` makes it; returns once served."""
        spec = kube_spec(run_id, image="flowerbox:test", command=("flower",))
        spec = dataclasses.replace(spec, budget_usd=budget, allow=allow)
        token = base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
        self.kube.put("secrets", token_manifest(spec, NAMESPACE, token, repo=repo))
        self.wait_logged(f"run {run_id}: serving its token")
        return ClusterRun(run_id, token)

    def remove(self, run: ClusterRun) -> None:
        assert self.kube.delete("secrets", f"flowerbox-{run.run_id}-token") is not None
        self.wait_logged(f"run {run.run_id}: its Secret was deleted")

    def wait_logged(self, line: str) -> None:
        wait_for(lambda: line in self.log.read_text(), 30)

    def request(
        self, headers: dict[str, str] | list[tuple[str, str]], *, target: str = MESSAGES
    ) -> tuple[int, dict[str, Any]]:
        """One Messages call (or one to `target`) with exactly `headers` (a list may repeat
        a name)."""
        before = self.recorded()
        conn = http.client.HTTPConnection("127.0.0.1", self.api_port, timeout=30)
        try:
            conn.putrequest("POST", target)
            listed = headers.items() if isinstance(headers, dict) else headers
            for name, value in [*listed, ("content-type", "application/json")]:
                conn.putheader(name, value)
            body = ask()
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
