"""The keeper's lease on its gateway (flowerbox.sidecar.lease): once the process holding it
is gone, however it went, the gateway forwards nothing more: at once, with no thread or
timeout between the holder's death and the refusal (issue 30: a request of a detached run
reached the API in the gap between its keeper's SIGKILL and the guard's kill of its box)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flower.testing import Always, FakeAPI, text
from flowerbox.broker import client
from flowerbox.errors import BrokerError
from flowerbox.sidecar.lease import Lease, hold
from tests.flowerbox.conftest import GatewayProcess, wait_for
from tests.flowerbox.test_broker import BrokerProcess, start_broker  # noqa: F401

ASK = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}
MESSAGES = "/v1/messages?beta=true"
# A holder in a process of its own, as a keeper is: it takes the lease, says so, and waits.
HOLDER = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from flowerbox.sidecar.lease import hold\n"
    "held = hold(Path(sys.argv[1]))\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)


@pytest.fixture
def holder() -> Iterator[Callable[[Path], subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def start(path: Path) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True
        )
        started.append(process)
        assert process.stdout is not None and process.stdout.readline() == "held\n"
        return process

    yield start
    for process in started:
        process.kill()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def killed(process: subprocess.Popen[str]) -> None:
    """SIGKILL, then reaped: the moment a keeper's guard would first hear of it."""
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def test_a_lease_is_lost_the_moment_its_holder_is_killed(
    sockdir: Path, holder: Callable[[Path], subprocess.Popen[str]]
) -> None:
    lease = Lease.listen(sockdir / "lease.sock")
    try:
        assert not lease.lost()  # nobody took it: not lost (a box nobody keeps is served)
        keeper = holder(sockdir / "lease.sock")
        assert lease.held() and not lease.lost()
        assert not (sockdir / "lease.sock").exists()  # taken: nobody else can take it
        killed(keeper)
        assert lease.lost()  # at once: no wait, no poll interval
        assert lease.lost()  # and for good
    finally:
        lease.close()


def test_only_the_first_holder_holds_and_a_lease_closed_by_its_holder_is_lost(
    sockdir: Path,
) -> None:
    lease = Lease.listen(sockdir / "lease.sock")
    try:
        first = hold(sockdir / "lease.sock")
        assert lease.held()
        with pytest.raises(OSError):
            hold(sockdir / "lease.sock", wait=0.2)
        assert not lease.lost()
        first.close()
        assert lease.lost()
    finally:
        lease.close()


def test_a_lease_in_a_folder_deeper_than_a_socket_address_allows(tmp_path: Path) -> None:
    """A deep $HOME puts the gateway's folder past AF_UNIX's 108 bytes: still bound, held."""
    deep = tmp_path.joinpath(*["a-rather-long-folder-name"] * 6)
    deep.mkdir(parents=True)
    path = deep / "lease.sock"
    assert len(str(path)) > 108
    lease = Lease.listen(path)
    try:
        assert path.exists() and (path.stat().st_mode & 0o777) == 0o600
        held = hold(path)
        assert lease.held() and not lease.lost()
        held.close()
        assert lease.lost()
    finally:
        lease.close()


def test_a_gateway_forwards_nothing_once_its_keeper_is_killed(
    start_gateway: Callable[..., GatewayProcess],
    upstream: FakeAPI,
    sockdir: Path,
    holder: Callable[[Path], subprocess.Popen[str]],
) -> None:
    """Served while nobody holds the lease and while its holder lives; after the holder's
    SIGKILL every request is a 503 in the API's error shape, nothing reaches the API,
    nothing is billed."""
    upstream.script = Always(text("hello"))
    lease = sockdir / "lease.sock"
    gateway = start_gateway(upstream.url, args=("--lease", str(lease)))
    assert lease.exists()  # bound before api.sock
    assert gateway.request("POST", MESSAGES, ASK)[0] == 200  # nobody holds it yet: served
    keeper = holder(lease)
    assert gateway.request("POST", MESSAGES, ASK)[0] == 200
    killed(keeper)
    for _ in range(3):
        status, headers, body = gateway.request("POST", MESSAGES, ASK)
        assert status == 503
        error = json.loads(body)
        assert error["type"] == "error" and error["error"]["type"] == "api_error"
        assert "keeper" in error["error"]["message"] or "守护" in error["error"]["message"]
    assert len(upstream.requests) == 2
    gateway.settled(5)
    usage = gateway.usage()
    assert usage["total_cost_usd"] == pytest.approx(upstream.cost(), abs=1e-9)
    assert usage["reserved_usd"] == 0
    assert gateway.log().count("keeper is gone") == 3
    assert gateway.request("GET", "/health")[0] == 200  # health is no forward


def test_a_gateway_without_a_lease_is_never_refused_for_one(
    start_gateway: Callable[..., GatewayProcess], upstream: FakeAPI
) -> None:
    upstream.script = Always(text("hello"))
    gateway = start_gateway(upstream.url)
    assert [gateway.request("POST", MESSAGES, ASK)[0] for _ in range(2)] == [200, 200]


def test_a_lease_that_cannot_be_bound_stops_the_gateway_with_a_sentence(
    start_gateway: Callable[..., GatewayProcess], upstream: FakeAPI, sockdir: Path
) -> None:
    gateway = start_gateway(upstream.url, args=("--lease", str(sockdir / "no" / "l.sock")))
    assert gateway.process.wait(timeout=30) == 2
    wait_for(lambda: "lease" in gateway.log())
    assert "Traceback" not in gateway.log()


# The broker's analogue: a keeper takes its run's lease over the broker's control socket.
BROKER_HOLDER = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from flowerbox.broker.client import hold_lease\n"
    "held = hold_lease(Path(sys.argv[1]), sys.argv[2])\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)


def test_a_broker_forwards_nothing_of_a_run_once_its_keeper_is_killed(
    start_broker: Callable[..., BrokerProcess],  # noqa: F811
    upstream: FakeAPI,
) -> None:
    """Served before the lease is taken and while its holder lives; after the holder's
    SIGKILL a 503, nothing reaches the API; the run next to it is served as before; the
    lease is taken once, and only for a run the broker serves."""
    broker = start_broker()
    run, other = broker.register(), broker.register()
    assert run.request()[0] == 200  # nobody took the lease yet: served
    keeper = subprocess.Popen(
        [sys.executable, "-c", BROKER_HOLDER, str(broker.folder), run.run_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert keeper.stdout is not None and keeper.stdout.readline() == "held\n"
        with pytest.raises(BrokerError, match="held already"):
            client.hold_lease(broker.folder, run.run_id)
        with pytest.raises(BrokerError, match="has ended"):
            client.hold_lease(broker.folder, "20261202-000000-ffffff")
        assert run.request()[0] == 200
        killed(keeper)
    finally:
        keeper.kill()
        keeper.wait(timeout=10)
        if keeper.stdout is not None:
            keeper.stdout.close()
    before = len(upstream.requests)
    status, body = run.request()
    assert status == 503 and body["error"]["type"] == "api_error", body
    assert before == len(upstream.requests) == 2
    assert other.request()[0] == 200
    assert [r["status"] for r in broker.rows(run)] == [200, 200, 503]
    assert {r["note"] for r in broker.rows(run) if r["status"] == 503} == {
        "refused: the run's keeper is gone"
    }
    assert client.revoke(broker.folder, run.run_id)  # its end, as the guard tells it
