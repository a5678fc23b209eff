"""The egress allowlist on a real engine, as the unprivileged e2e user: one table, each row a
`flowerbox shell` whose probe (python in the agent's container) goes out through the proxy.
The reasons are the run's language (the suite's, zh: the gateway's container is given the
run's FLOWER_LANG); tests/flowerbox/test_proxy.py has the English ones.

Everything stays on this machine. The targets are two HTTP servers on the host's loopback,
127.0.0.1 and 127.0.0.2, on the same port; the gateway runs on the host network (the fake
API is on loopback) and its /etc/hosts maps the test names to them (FLOWERBOX_EGRESS_HOSTS ->
docker extra_hosts). Every name the proxy must refuse is mapped to one of the servers too, so
a wrong allow would show up as a request they saw: "never contacted" is checked, not assumed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from flower.testing import FakeAPI
from tests.docker.e2e import FLOWERBOX, as_user, box_env, ledger

pytestmark = pytest.mark.docker

HOSTS = {
    "allowed.test": "127.0.0.1",
    "a.wild.test": "127.0.0.1",
    "wild.test": "127.0.0.1",
    "denied.test": "127.0.0.1",
    "metadata.google.internal": "127.0.0.1",
    "intranet.test": "127.0.0.2",
}
PROXY = "http://127.0.0.1:3128"

PROBE = r"""
import json, os, socket, sys, urllib.error, urllib.request
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = {"proxy": os.environ.get("HTTPS_PROXY")}

def read_all(sock):
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data

def connect():
    with socket.create_connection(("127.0.0.1", 3128), 10) as sock:
        sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head and (chunk := sock.recv(1)):
            head += chunk
        status = int(head.split()[1])
        if status == 200:
            head = f"GET /via-connect HTTP/1.1\r\nHost: {host}:{port}\r\n"
            sock.sendall((head + "Connection: close\r\n\r\n").encode())
        body = read_all(sock).decode(errors="replace")
    return {"status": status, "body": body}

def plain():
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/via-plain", timeout=10) as response:
            return {"status": response.status, "body": response.read().decode()}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "body": exc.read().decode()}

def direct():
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY"):
        os.environ.pop(name, None)
    found = {}
    try:
        urllib.request.urlopen(f"http://{host}:{port}/direct", timeout=5)
        found["url"] = "REACHED"
    except Exception as exc:
        found["url"] = f"failed: {exc}"
    try:
        socket.create_connection(("127.0.0.1", port), 5).close()
        found["tcp"] = "REACHED"
    except OSError as exc:
        found["tcp"] = f"failed: {exc}"
    return found

if mode == "direct":
    out["direct"] = direct()
else:
    out["connect"], out["plain"] = connect(), plain()
print("EGRESS " + json.dumps(out))
"""


@dataclass
class Seen:
    server: str
    path: str
    host: str


class Target(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: str, port: int, seen: list[Seen]) -> None:
        self.seen = seen
        super().__init__((address, port), _TargetHandler)


class _TargetHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Target

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        address = str(self.server.server_address[0])
        self.server.seen.append(Seen(address, self.path, self.headers.get("host") or ""))
        body = f"hello from {address}".encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def targets() -> Iterator[tuple[int, list[Seen]]]:
    """Two loopback servers on one port, recording every request they get."""
    seen: list[Seen] = []
    first = Target("127.0.0.1", 0, seen)
    second = Target("127.0.0.2", first.server_address[1], seen)
    threads = [threading.Thread(target=s.serve_forever, args=(0.05,)) for s in (first, second)]
    for thread in threads:
        thread.start()
    try:
        yield first.server_address[1], seen
    finally:
        for server in (first, second):
            server.shutdown()
            server.server_close()


LISTED = ["--allow", "allowed.test", "--allow", "127.0.0.1"]


@pytest.mark.parametrize(
    ("allow", "mode", "host", "expected", "reason"),
    [
        pytest.param(LISTED, "proxy", "allowed.test", 200, "已列出：allowed.test", id="allowed"),
        pytest.param(
            LISTED,
            "proxy",
            "denied.test",
            403,
            "不在允许列表中（用 --allow denied.test 允许）",
            id="denied-name",
        ),
        pytest.param(
            ["--allow", "*.wild.test", "--allow", "127.0.0.1"],
            "proxy",
            "a.wild.test",
            200,
            "已列出：*.wild.test",
            id="wildcard-subdomain",
        ),
        pytest.param(
            ["--allow", "*.wild.test", "--allow", "127.0.0.1"],
            "proxy",
            "wild.test",
            403,
            "不在允许列表中（用 --allow wild.test 允许）",
            id="wildcard-apex",
        ),
        pytest.param(
            LISTED,
            "proxy",
            "127.0.0.2",
            403,
            "IP 地址（环回）不在允许列表中（用 --allow 127.0.0.2 允许）",
            id="ip-literal",
        ),
        pytest.param(
            ["--allow", "*.internal", "--allow", "127.0.0.1"],
            "proxy",
            "metadata.google.internal",
            403,
            "云元数据名称不在允许列表中；通配符从不覆盖它",
            id="metadata-name",
        ),
        pytest.param(
            ["--allow", "intranet.test", "--allow", "127.0.0.1"],
            "proxy",
            "intranet.test",
            403,
            "解析到 127.0.0.2（环回），它不在允许列表中",
            id="internal-address-behind-an-allowed-name",
        ),
        pytest.param([], "proxy", "allowed.test", 403, "而列表是空的：没有网络", id="empty-list"),
        pytest.param(LISTED, "direct", "allowed.test", None, "", id="proxy-variables-unset"),
    ],
)
def test_the_allowlist_from_inside_the_box(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    targets: tuple[int, list[Seen]],
    allow: list[str],
    mode: str,
    host: str,
    expected: int | None,
    reason: str,
) -> None:
    port, seen = targets
    env = box_env(real_api, host_user)
    env["FLOWERBOX_EGRESS_HOSTS"] = ",".join(f"{name}={ip}" for name, ip in HOSTS.items())
    command = [FLOWERBOX, "shell", *allow, "--", "python3", "-c", PROBE, mode, host, str(port)]
    done = as_user(host_user, command, cwd=user_workspace, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("EGRESS ")]
    out = json.loads(line.removeprefix("EGRESS "))
    assert out["proxy"] == PROXY  # the variables are there unless the probe drops them
    path = ledger(host_user, user_workspace, "egress.jsonl")  # in the user's state, not here
    log = [json.loads(entry) for entry in path.read_text().splitlines()] if path.is_file() else []

    if expected is None:  # no proxy: no route, no name, nothing reached, nothing decided
        assert out["direct"]["url"].startswith("failed"), out
        assert out["direct"]["tcp"].startswith("failed"), out
        assert seen == [] and log == []
        return

    answers = [out["connect"], out["plain"]]
    assert [answer["status"] for answer in answers] == [expected, expected], answers
    assert [(e["method"], e["host"], e["port"]) for e in log] == [
        ("CONNECT", host, port),
        ("GET", host, port),
    ]
    assert all(e["reason"].startswith(reason) or reason in e["reason"] for e in log), log
    if expected == 200:
        assert all(answer["body"].endswith("hello from 127.0.0.1") for answer in answers)
        assert sorted((s.server, s.path) for s in seen) == [
            ("127.0.0.1", "/via-connect"),
            ("127.0.0.1", "/via-plain"),
        ]
        assert {s.host for s in seen} == {f"{host}:{port}"}
        assert [(e["decision"], e["address"]) for e in log] == [("allow", "127.0.0.1")] * 2
    else:
        for answer in answers:
            first = answer["body"].splitlines()[0]
            assert first.startswith(f"flowerbox egress: denied {host}:{port}: "), first
            assert reason in first
        assert seen == []  # refused before any connection: the servers saw nothing
        assert [e["decision"] for e in log] == ["deny", "deny"]
        resolved = [["127.0.0.2"]] * 2 if host == "intranet.test" else [None, None]
        assert [e.get("resolved") for e in log] == resolved  # denied names: never looked up
