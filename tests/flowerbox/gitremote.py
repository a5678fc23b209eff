"""A git remote for the relay's tests: `git http-backend` (the system's git, as CGI) behind a
small HTTP server on 127.0.0.1 that requires one Basic credential, as a forge does, and
records every request head it was sent."""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

USER = "relay-bot"
TOKEN = "ghp_TheBrokersGitCredential0123456789"
BASIC = "Basic " + base64.b64encode(f"{USER}:{TOKEN}".encode()).decode()


def git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


def quiet_env(home: Path) -> dict[str, str]:
    """git with no system or user configuration of this machine, and never a prompt."""
    home.mkdir(parents=True, exist_ok=True)
    keep = {k: os.environ[k] for k in ("PATH", "LANG") if k in os.environ}
    return keep | {
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }


@dataclass
class GitRemote:
    """Bare repositories under `root`, served at http://127.0.0.1:port/<name>.git."""

    root: Path
    env: dict[str, str]
    port: int = 0
    heads: list[dict[str, str]] = field(default_factory=list)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, name: str) -> str:
        """The https URL a run is created with (the relay reaches it over http here)."""
        return f"https://{self.host}/{name}.git"

    def create(self, name: str) -> None:
        """A bare repository with one commit on main."""
        bare = self.root / f"{name}.git"
        git("init", "-q", "--bare", "-b", "main", str(bare), env=self.env)
        work = self.root / f"{name}-seed"
        git("init", "-q", "-b", "main", str(work), env=self.env)
        (work / "README").write_text(f"{name}\n")
        git("add", "README", cwd=work, env=self.env)
        git("commit", "-q", "-m", "first", cwd=work, env=self.env)
        git("push", "-q", str(bare), "main", cwd=work, env=self.env)
        git("config", "receive.advertisePushOptions", "true", cwd=bare, env=self.env)
        git("config", "uploadpack.allowFilter", "true", cwd=bare, env=self.env)  # as forges do

    def pre_receive(self, name: str, script: str) -> None:
        """`name`'s pre-receive hook: a shell script's body (it reads `old new ref` lines)."""
        path = self.root / f"{name}.git" / "hooks" / "pre-receive"
        path.write_text("#!/bin/sh\n" + script)
        path.chmod(0o755)

    def refs(self, name: str) -> str:
        """Every ref of a repository with its object."""
        return git("for-each-ref", cwd=self.root / f"{name}.git", env=self.env)

    def branches(self, name: str) -> str:
        """Its branches and tags with their objects, what a run's push could change:
        compared before and after one. (Not the notes ref: the relay writes it after its
        answer to an earlier push, so it may move while a test compares.)"""
        where = self.root / f"{name}.git"
        return git(
            "for-each-ref", "refs/heads", "refs/tags", "refs/flowerbox", cwd=where, env=self.env
        )


class _Backend(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _serve(self) -> None:
        remote = self.server.remote
        remote.heads.append({k.lower(): v for k, v in self.headers.items()})
        if self.headers.get("authorization") != BASIC:
            self.send_response(401)
            self.send_header("www-authenticate", 'Basic realm="forge"')
            self.send_header("content-length", "0")
            self.end_headers()
            return
        body = self._body()
        if body is None:  # a body cut short: git applies nothing, nor does this
            self.send_error(400)
            return
        path, _, query = self.path.partition("?")
        env = remote.env | {
            "GIT_PROJECT_ROOT": str(remote.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": USER,
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("content-type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": self.headers.get("content-encoding", ""),
            "GIT_PROTOCOL": self.headers.get("git-protocol", ""),
        }
        done = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60
        )
        head, _, out = done.stdout.partition(b"\r\n\r\n")
        fields = [line.split(": ", 1) for line in head.decode().split("\r\n") if ": " in line]
        status = next((int(v.split()[0]) for k, v in fields if k.lower() == "status"), 200)
        self.send_response(status)
        for name, value in fields:
            if name.lower() != "status":
                self.send_header(name, value)
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def _body(self) -> bytes | None:
        if self.headers.get("transfer-encoding") != "chunked":
            return self.rfile.read(int(self.headers.get("content-length") or 0))
        parts = []
        try:
            while size := int(self.rfile.readline().split(b";")[0], 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        except ValueError:
            return None
        self.rfile.readline()
        return b"".join(parts)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    remote: GitRemote


@contextmanager
def git_remote(root: Path, env: dict[str, str]) -> Iterator[GitRemote]:
    root.mkdir(parents=True, exist_ok=True)
    server = _Server(("127.0.0.1", 0), _Backend)
    remote = GitRemote(root, env, port=server.server_address[1])
    server.remote = remote
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield remote
    finally:
        server.shutdown()
        server.server_close()
