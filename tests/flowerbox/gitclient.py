"""The git relay in-process on 127.0.0.1, in front of a real git remote (`git http-backend`
requiring the broker's Basic credential: tests/flowerbox/gitremote.py), and a run's git
configured as on Kubernetes (flowerbox.kube.render: `url.<relay>.insteadOf https://` and the
run's token as a Bearer header). Every byte the relay sends a client passes a recording tap,
so a test can say the credential was in none of them. The `relay` fixture (conftest.py) is
`relayed`."""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowerbox.broker.gitrelay import GitCredential, GitRelay, RelayRun
from flowerbox.note import Spend
from flowerbox.sidecar.proxy import JsonLines
from tests.flowerbox.gitremote import TOKEN, USER, GitRemote, git, git_remote, quiet_env

RUN = "20261202-060000-abc123"
OTHER_RUN = "20261202-060000-def456"
RUN_TOKEN = "run-token-0123456789abcdefghijklmnopqrstuvwxyz"
OTHER_TOKEN = "run-token-of-another-run-0123456789abcdefghij"
BRANCH = f"refs/flowerbox/{RUN}"  # the one ref a run may push (wire.DELIVERY_REF)
IMAGE = "registry.example/flowerbox:dev@sha256:" + "ab" * 32
OTHER_IMAGE = "registry.example/flowerbox:next"
NAMESPACE = "team-a"
NETWORK = "allowlist: pypi"
SPENT = {RUN: Spend(0.25, 4, ("claude-opus-5-5",))}  # the ledger's, as the broker gives it


class _Tap(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """A loopback forwarder to the relay that keeps every byte the relay sent back."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, relay: tuple[str, int]) -> None:
        self.relay = relay
        self.received = bytearray()
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Pipe)
        # An accept that blocks once the poll said "ready" (in CI, when a stale thread of
        # another test took the connection first: tests/listening.py) would keep shutdown()
        # waiting for ever; with a timeout it fails, and serve_forever polls again.
        self.socket.settimeout(1.0)


class _Pipe(socketserver.BaseRequestHandler):
    server: _Tap
    request: socket.socket

    def handle(self) -> None:
        upstream = socket.create_connection(self.server.relay, timeout=30)

        def up() -> None:
            with contextlib.suppress(OSError):  # either side may close first
                while data := self.request.recv(65536):
                    upstream.sendall(data)
                upstream.shutdown(socket.SHUT_WR)

        thread = threading.Thread(target=up, daemon=True)
        thread.start()
        try:
            while data := upstream.recv(65536):
                with self.server.lock:
                    self.server.received += data
                self.request.sendall(data)
        except OSError:
            pass
        finally:
            upstream.close()


@dataclass
class Relay:
    remote: GitRemote
    relay: GitRelay
    tap: _Tap
    log_path: Path
    home: Path
    runs: dict[str, RelayRun] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.tap.server_address[1]}/"

    def env(self, token: str | None = RUN_TOKEN) -> dict[str, str]:
        """git's environment as a run's Job has it (flowerbox.kube.render's `_git_env`)."""
        settings = {f"url.{self.url}.insteadOf": "https://", "credential.helper": ""}
        if token is not None:
            settings["http.extraHeader"] = f"Authorization: Bearer {token}"
        env = quiet_env(self.home) | {"GIT_CONFIG_COUNT": str(len(settings))}
        for n, (key, value) in enumerate(settings.items()):
            env |= {f"GIT_CONFIG_KEY_{n}": key, f"GIT_CONFIG_VALUE_{n}": value}
        return env

    def git(self, *args: str, cwd: Path | None = None, token: str | None = RUN_TOKEN) -> Any:
        return subprocess.run(
            ["git", *args], cwd=cwd, env=self.env(token), capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip

    def clone(self, name: str = "app", token: str | None = RUN_TOKEN) -> Path:
        work = self.home.parent / f"clone-{name}-{len(list(self.home.parent.iterdir()))}"
        done = self.git("clone", "-q", self.remote.url(name), str(work), token=token)
        assert done.returncode == 0, done.stderr
        return work

    def log(self) -> list[dict[str, Any]]:
        """The relay's decisions (allow/refuse), as they came."""
        return [line for line in self.lines() if "decision" in line]

    def notes(self) -> list[dict[str, Any]]:
        """The relay's note lines: each written after its push's answer, so maybe later."""
        return [line for line in self.lines() if "note" in line]

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]

    def pushes_upstream(self) -> int:
        """How many push requests (POST .../git-receive-pack) reached the remote."""
        return sum(1 for head in self.remote.heads if head.get("content-type", "").endswith(
            "receive-pack-request"))  # fmt: skip


@contextmanager
def relayed(tmp_path: Path) -> Iterator[Relay]:
    """The relay (and its tap) in front of a remote holding `app` and `other`."""
    env = quiet_env(tmp_path / "remote-home")
    with git_remote(tmp_path / "remote", env) as remote:
        remote.create("app")
        remote.create("other")
        runs = {
            RUN_TOKEN: RelayRun(RUN, remote.url("app"), IMAGE, NAMESPACE, NETWORK),
            OTHER_TOKEN: RelayRun(OTHER_RUN, remote.url("app"), OTHER_IMAGE, NAMESPACE, NETWORK),
        }
        credential = GitCredential(remote.host, TOKEN, USER, origin=f"http://{remote.host}")
        log = JsonLines(tmp_path / "git.jsonl")
        server = GitRelay(
            ("127.0.0.1", 0), runs=runs.get, credential=credential, log=log, spent=SPENT.get
        )
        tap = _Tap(server.server_address)
        threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (server, tap)]
        for thread in threads:
            thread.start()
        work = tmp_path / "work"
        work.mkdir()
        try:
            yield Relay(remote, server, tap, tmp_path / "git.jsonl", work / "home", runs)
        finally:
            for s in (tap, server):
                s.shutdown()
                s.server_close()
            log.close()


def commit(relay: Relay, work: Path, text: str = "made by the run\n") -> str:
    (work / "work.txt").write_text(text)
    env = relay.env()
    git("add", "work.txt", cwd=work, env=env)
    git("commit", "-q", "-m", "the run's work", cwd=work, env=env)
    return git("rev-parse", "HEAD", cwd=work, env=env).strip()
