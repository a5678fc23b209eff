"""Attacks on `flowerbox broker --listen` by a client that can reach its ports and holds no
token (or holds a run's token and spells things otherwise), each against the real process
on loopback (tests/flowerbox/test_broker_tcp.py): memory pinned by half-sent bodies, threads held
by idle heads, the ledger and the log filled by refusals, push options in another spelling,
a token quoted in a refused header line. Memory is the broker's VmRSS: bound assertions,
not timings (docs/threat-model.md, "The broker under hostile traffic", has the numbers)."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flower.testing import FakeAPI
from tests.flowerbox.conftest import wait_for
from tests.flowerbox.flood import (
    FLOOD_PEER,
    MIB,
    answer_of,
    head,
    idle_heads,
    opened,
    pinned_bodies,
)
from tests.flowerbox.gitremote import TOKEN, USER, git, git_remote, quiet_env
from tests.flowerbox.test_broker_tcp import ClusterRun, TcpBroker, ask, cluster_brokers


@pytest.fixture
def start_broker(tmp_path: Path, upstream: FakeAPI) -> Iterator[Callable[..., TcpBroker]]:
    with cluster_brokers(tmp_path, upstream) as start:
        yield start


def test_token_less_bodies_of_31_mib_pin_no_memory(start_broker: Callable[..., TcpBroker]) -> None:
    """Attack: twelve connections each send 31 MiB of a 32 MiB body with no token, then go
    quiet. The broker refuses each from its head, so it holds none of it."""
    broker = start_broker()
    run = broker.add("20261205-000000-aaaaaa")
    assert broker.spend(run) == 200
    before = broker.rss_kib()
    with pinned_bodies(broker.api_port):
        grown = broker.rss_kib() - before
        assert grown <= 64 * MIB, f"the broker grew by {grown // MIB} MiB"
        assert broker.spend(run) == 200
        assert broker.process is not None and broker.process.poll() is None
    wait_for(lambda: broker.causes("api").get("refused: no token", 0) == 12)


def test_ten_thousand_idle_half_sent_heads_hold_no_thread_and_a_run_is_served(
    start_broker: Callable[..., TcpBroker],
) -> None:
    """Attack: one peer opens 10,000 connections, each with half a request head, and holds
    them. It is admitted up to its cap (the rest answered 503 and closed at once), each
    admitted one is cut off when its head is late, and a run on another address is served
    all along."""
    broker = start_broker()
    run = broker.add("20261205-000000-bbbbbb")
    assert broker.spend(run) == 200
    before = broker.rss_kib()
    with idle_heads(broker.api_port, count=10_000, meanwhile=lambda: broker.spend(run)) as served:
        grown = broker.rss_kib() - before
        assert served == [200] * 5  # from 127.0.0.1, while the flood came
        assert grown <= 64 * MIB, f"the broker grew by {grown // MIB} MiB"
        # The admitted ones are cut off when their heads are late: the peer may come again.
        time.sleep(12)
        with opened(broker.api_port, source=FLOOD_PEER) as again:
            again.sendall(head(length=len(ask())) + ask())
            assert answer_of(again).startswith(b"HTTP/1.1 401 ")
    assert broker.process is not None and broker.process.poll() is None
    assert broker.causes("api").get("too many connections", 0) >= 9_000


def test_the_connection_caps_are_settings(start_broker: Callable[..., TcpBroker]) -> None:
    """A team of a hundred runs may need more than issue 34's caps (128 a peer, 1024 in
    all): `--max-per-peer` and `--max-connections` set them, and a connection past either is
    answered 503 at once and counted, never dropped unsaid."""
    broker = start_broker("--max-per-peer", "2", "--max-connections", "3")
    run = broker.add("20261207-000000-cccccc")
    with contextlib.ExitStack() as held:
        for _ in range(2):
            held.enter_context(opened(broker.api_port, source=FLOOD_PEER))
        with opened(broker.api_port, source=FLOOD_PEER) as third:
            assert answer_of(third).startswith(b"HTTP/1.1 503 ")  # past its peer's cap
        assert broker.spend(run) == 200  # another peer: the third connection in all
        third_in_all, turned_away = admitted(broker.api_port, source="127.0.0.3")
        held.enter_context(third_in_all)
        with opened(broker.api_port) as fourth:
            assert answer_of(fourth).startswith(b"HTTP/1.1 503 ")  # past the cap in all
    turned_away += 2
    deadline = time.monotonic() + 10
    while (status := spend_or_busy(broker, run)) == 503 and time.monotonic() < deadline:
        turned_away += 1  # the broker has not yet seen the held ones close
        time.sleep(0.05)
    assert status == 200  # room again
    wait_for(lambda: broker.causes("api").get("too many connections", 0) == turned_away)


def admitted(port: int, *, source: str) -> tuple[socket.socket, int]:
    """A connection the broker admitted (no 503 within half a second), and how many were
    turned away before it (while a closed connection's thread had not yet left)."""
    deadline = time.monotonic() + 10
    turned_away = 0
    while True:
        sock = opened(port, source=source)
        sock.settimeout(0.5)
        try:
            refused = sock.recv(64).startswith(b"HTTP/1.1 503 ")
        except TimeoutError:
            sock.settimeout(30)
            return sock, turned_away
        sock.close()
        assert refused and time.monotonic() < deadline, "never admitted"
        turned_away += 1
        time.sleep(0.05)


def spend_or_busy(broker: TcpBroker, run: ClusterRun) -> int:
    """A spend's status, or 503 where the broker refused the connection before reading it
    (a client closing is seen by its connection's thread a moment later): the 503 line
    reached the client before its body was sent, or after (a text body, not JSON)."""
    try:
        return broker.spend(run)
    except (BrokenPipeError, ConnectionResetError, json.JSONDecodeError):
        return 503


def test_a_trickled_head_is_cut_off_at_its_deadline(start_broker: Callable[..., TcpBroker]) -> None:
    """Attack: a byte of a head every half second, for ever: a per-read timeout never ends
    it; the whole head's deadline (10 s) does."""
    broker = start_broker()
    started = time.monotonic()
    with opened(broker.api_port) as sock, contextlib.suppress(OSError):
        for byte in b"POST /v1/messages?beta=true HTTP/1.1\r\nhost: b" + b"x" * 200:
            sock.sendall(bytes([byte]))
            time.sleep(0.5)
    assert time.monotonic() - started < 60, "never cut off"
    wait_for(lambda: "malformed (408)" in broker.causes("api"))


def sizes(broker: TcpBroker) -> int:
    """Bytes of everything the broker writes down: the ledger (and its WAL), the logs."""
    files = [broker.log, *broker.folder.glob("ledger.db*"), *broker.folder.glob("*.jsonl")]
    return sum(path.stat().st_size for path in files if path.exists())


def test_two_thousand_refusals_cost_the_ledger_and_log_little(
    start_broker: Callable[..., TcpBroker],
) -> None:
    """Attack: 2,000 token-less requests, then 200 heads with a 60 KB header line (half of
    them malformed: a space before the colon), to the API; and 100 of each kind to the proxy
    and the git relay. Each is counted, not written down: the API's 2,200 add at most 2 MB
    to the ledger and the logs, all 2,600 together too. A live run's own refusal still gets
    its row."""
    broker = start_broker(git=git_lines("127.0.0.1:1"))
    run = broker.add("20261205-000000-cccccc")
    assert broker.spend(run) == 200
    before = sizes(broker)
    long_value = "A" * 60_000
    heads = [head(length=len(ask()))] * 2_000
    heads += [head(f"x-junk: {long_value}", length=2)] * 100
    heads += [head(f"x-junk : {long_value}", length=2)] * 100
    flood(broker.api_port, heads)
    wait_for(lambda: sum(broker.causes("api").values()) == 2_200)
    counted = broker.causes("api")
    assert counted == {"refused: no token": 2_100, "malformed (400)": 100}, counted
    grown = sizes(broker) - before
    assert grown <= 2_000_000, f"{grown} bytes written for 2,200 refusals"
    refs = "/x/y.git/info/refs?service=git-upload-pack"
    flood(broker.git_port, [head(method="GET", target=refs), head(f"x-junk : {long_value}")] * 50)
    flood(broker.proxy_port, [head(method="CONNECT", target="a:443"), head("x : y")] * 50)
    wait_for(lambda: sum(r["count"] for r in broker.refusals()) == 2_400)
    assert broker.causes("git") == {"refused 401": 50, "malformed (400)": 50}
    assert broker.causes("proxy") == {"refused 407": 50, "malformed": 50}
    grown = sizes(broker) - before
    assert grown <= 2_000_000, f"{grown} bytes written for 2,400 refusals"
    status, _ = broker.request({"x-api-key": run.token}, target="/v1/complete")
    assert status == 403
    assert [r["status"] for r in broker.rows(run.run_id)] == [200, 403]


def flood(port: int, heads: list[bytes]) -> None:
    """Each head on a connection of its own, from the flood's address; each refused."""
    for sent in heads:
        with opened(port, source=FLOOD_PEER) as sock:
            with contextlib.suppress(OSError):
                sock.sendall(sent)
            answer = answer_of(sock)
            assert answer[:12] in (b"HTTP/1.1 401", b"HTTP/1.1 400", b"HTTP/1.1 407"), answer


def test_a_token_in_a_header_line_the_parser_refused_is_written_nowhere(
    start_broker: Callable[..., TcpBroker], tmp_path: Path
) -> None:
    """Attack (or a client's mistake): the run's token in a malformed line, `x-api-key :
    TOKEN` (a space before the colon), to each port. Refused (400), and the token is in no
    ledger, log or line the broker wrote."""
    broker = start_broker(git=git_lines("127.0.0.1:1"))
    run = broker.add("20261205-000000-dddddd")
    basic = base64.b64encode(f"run:{run.token}".encode()).decode()
    attempts = [
        (broker.api_port, head(f"x-api-key : {run.token}", length=2) + b"{}"),
        (broker.api_port, head(f"authorization :Bearer {run.token}", length=2) + b"{}"),
        (broker.proxy_port, head(f"proxy-authorization : Basic {basic}", method="CONNECT",
                                 target="a:443")),
        (broker.git_port, head(f"authorization : Bearer {run.token}", method="GET",
                               target="/x/y.git/info/refs?service=git-upload-pack")),
    ]  # fmt: skip
    for port, sent in attempts:
        with opened(port) as sock:
            sock.sendall(sent)
            assert answer_of(sock).startswith(b"HTTP/1.1 400 ")
    broker.stop()  # every count flushed, every file closed
    written = [broker.log, *broker.folder.rglob("*")]
    for path in (p for p in written if p.is_file()):
        data = path.read_bytes()
        assert run.token.encode() not in data and basic.encode() not in data, path
    assert sum(r["count"] for r in broker.refusals()) == len(attempts)


def git_lines(host: str) -> str:
    """The broker's git credential, for the remote at `host` (over http on loopback)."""
    return f"GIT_HOST={host}\nGIT_TOKEN={TOKEN}\nGIT_USERNAME={USER}\nGIT_BASE_URL=http://{host}\n"


def pkt(text: str) -> bytes:
    return b"%04x" % (len(text) + 4) + text.encode()


@pytest.mark.parametrize(
    "capabilities",
    [
        "report-status side-band-64k push-options=1",
        "report-status side-band-64k push-options",
        "report-status push-options=x side-band-64k",
        "report-status side-band-64k push-cert=1234-abcd",
    ],
)
def test_push_options_in_any_spelling_never_reach_the_forge(
    start_broker: Callable[..., TcpBroker], tmp_path: Path, capabilities: str
) -> None:
    """Attack: a raw push of the run's own branch carrying push options (GitLab opens a
    merge request or skips CI on them) under `push-options=<x>`, which receive-pack takes
    as `push-options`; or a signed push. Refused from the capability list, nothing
    upstream; the same push with git's usual capabilities lands (the control)."""
    env = quiet_env(tmp_path / "home")
    with git_remote(tmp_path / "remote", env) as remote:
        remote.create("app")
        hook = tmp_path / "options"
        remote.pre_receive("app", f'echo "$GIT_PUSH_OPTION_COUNT" >> {hook}\n')
        broker = start_broker(git=git_lines(remote.host))
        run = broker.add("20261205-000000-eeeeee", repo=remote.url("app"))
        work = tmp_path / "work"
        git("clone", "-q", str(remote.root / "app.git"), str(work), env=env)
        (work / "made.txt").write_text("the run's work\n")
        git("add", "made.txt", cwd=work, env=env)
        git("commit", "-q", "-m", "work", cwd=work, env=env)
        sha = git("rev-parse", "HEAD", cwd=work, env=env).strip()
        pack = subprocess.run(
            ["git", "pack-objects", "--stdout", "--revs", "-q"], cwd=work, env=env,
            check=True, input=b"HEAD\n^origin/main\n", capture_output=True,
        ).stdout  # fmt: skip
        branch = f"refs/flowerbox/{run.run_id}"  # a cluster run's ref (issue 37, X1)

        def push(features: str) -> bytes:
            options = pkt("merge_request.create") + pkt("ci.skip") + b"0000"
            body = pkt(f"{'0' * 40} {sha} {branch}\0{features}\n") + b"0000"
            body += (options if "push-options" in features else b"") + pack
            sent = (
                f"POST /{remote.host}/app.git/git-receive-pack HTTP/1.1\r\nhost: relay\r\n"
                f"authorization: Bearer {run.token}\r\n"
                "content-type: application/x-git-receive-pack-request\r\n"
                f"content-length: {len(body)}\r\n\r\n"
            )
            with opened(broker.git_port) as sock:
                sock.sendall(sent.encode() + body)
                return answer_of(sock)

        answer = push(capabilities)
        assert b"refused" in answer, answer[:300]
        assert branch not in remote.branches("app") and not hook.exists()
        assert branch.encode() in push("report-status side-band-64k")
        assert branch in remote.branches("app") and hook.read_text() == "0\n"
