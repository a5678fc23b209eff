"""`flowerbox broker --listen ... --metrics 127.0.0.1:PORT` as a real process (the
TcpBroker of test_broker_tcp, in front of the FakeAPI, its runs learned from a fake
Kubernetes API): `/metrics` parsed with prometheus_client's own text parser while runs go
through it, its figures moving with the traffic and equal to the ledger's."""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from flower.testing import FakeAPI
from flowerbox.broker import client
from tests.flowerbox.conftest import REAL_KEY, wait_for
from tests.flowerbox.test_broker import BrokerProcess
from tests.flowerbox.test_broker import start_broker as start_local  # noqa: F401 - a fixture
from tests.flowerbox.test_broker_tcp import (
    COST,
    ClusterRun,
    Echo,
    TcpBroker,
    cluster_brokers,
    connect,
    free_port,
)
from tests.listening import stop_listening

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> tuple[str, Samples]:
    """The page, and each sample by name and sorted labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["content-type"].startswith("text/plain")
        page = answer.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return page, samples


def one(samples: Samples, name: str, **labels: str) -> float:
    return samples[name, tuple(sorted(labels.items()))]


def runs_of(samples: Samples, name: str) -> dict[str, float]:
    return {dict(labels)["run_id"]: v for (n, labels), v in samples.items() if n == name}


def requests(samples: Samples) -> dict[tuple[str, str, str], float]:
    """flowerbox_broker_requests_total per (listener, outcome, cause)."""
    found = {}
    for (name, labels), value in samples.items():
        if name == "flowerbox_broker_requests_total":
            given = dict(labels)
            found[given["listener"], given["outcome"], given["cause"]] = value
    return found


@pytest.fixture
def metered(tmp_path: Path, upstream: FakeAPI) -> Iterator[Callable[..., tuple[TcpBroker, int]]]:
    with cluster_brokers(tmp_path, upstream) as start:

        def started(*args: str) -> tuple[TcpBroker, int]:
            port = free_port()
            return start("--metrics", f"127.0.0.1:{port}", *args), port

        yield started


def test_the_metrics_move_with_the_traffic_and_equal_the_ledger(
    metered: Callable[..., tuple[TcpBroker, int]],
) -> None:
    broker, port = metered("--team-budget", "1")
    _, before = scrape(port)
    assert one(before, "flowerbox_broker_runs_registered") == 0
    assert one(before, "flowerbox_broker_spent_usd_total") == 0
    assert one(before, "flowerbox_broker_budget_left_usd") == 1
    assert one(before, "flowerbox_broker_upstream_latency_seconds_count") == 0
    assert requests(before) == {}

    echo = Echo()
    echo.start()
    poor = broker.add("20261207-000000-aaaaaa", budget=0.01, allow=("127.0.0.1",))
    rich = broker.add("20261207-000000-bbbbbb", allow=("pypi.org",))
    assert [broker.spend(poor) for _ in range(3)] == [200, 200, 403]
    assert broker.spend(rich) == 200
    assert broker.request({})[0] == 401  # no token
    assert broker.request({"x-api-key": "not-a-token"})[0] == 401
    target = f"127.0.0.1:{echo.port}"
    for token in (poor.token, rich.token):
        status, tunnel = connect(broker, target, token)
        tunnel.close()
        assert status == (200 if token == poor.token else 403)
    stop_listening(echo.sock, echo)
    wait_for(lambda: broker.causes("api") == {"refused: no token": 1, "refused: unknown token": 1})

    page, after = scrape(port)
    rows = broker.rows()
    assert one(after, "flowerbox_broker_runs_registered") == 2
    assert one(after, "flowerbox_broker_runs_live") == 2
    spent = runs_of(after, "flowerbox_broker_run_spent_usd_total")
    for run in (poor, rich):
        ledger = sum(r["cost_usd"] for r in rows if r["run_id"] == run.run_id)
        assert math.isclose(spent[run.run_id], ledger, abs_tol=1e-6)
    assert spent[poor.run_id] == pytest.approx(2 * COST)
    assert spent[rich.run_id] == pytest.approx(COST)
    total = sum(r["cost_usd"] for r in rows)
    assert math.isclose(one(after, "flowerbox_broker_spent_usd_total"), total, abs_tol=1e-6)
    assert one(after, "flowerbox_broker_budget_left_usd") == pytest.approx(1 - total)
    # Only the run with a budget has one; what it has left is never below nothing.
    assert runs_of(after, "flowerbox_broker_run_budget_usd") == {poor.run_id: 0.01}
    assert runs_of(after, "flowerbox_broker_run_budget_left_usd") == {poor.run_id: 0.0}
    assert requests(after) == {
        ("api", "forwarded", ""): 3,
        ("api", "refused", "budget"): 1,
        ("api", "refused", "no token"): 1,
        ("api", "refused", "unknown token"): 1,
    }
    assert sum(r["status"] == 200 for r in rows) == 3
    assert one(after, "flowerbox_broker_upstream_latency_seconds_count") == 3
    assert one(after, "flowerbox_broker_egress_decisions_total", decision="allow") == 1
    assert one(after, "flowerbox_broker_egress_decisions_total", decision="deny") == 1
    assert one(after, "process_resident_memory_bytes") > 0
    for secret in (poor.token, rich.token, REAL_KEY, "not-a-token"):
        assert secret not in page

    # A run whose Job ended is registered, not live; one whose Secret is gone is neither,
    # and its series go with it (the team's total keeps what it spent).
    broker.end("flowerbox-20261207-000000-aaaaaa", poor.run_id)
    _, ended = scrape(port)
    assert one(ended, "flowerbox_broker_runs_live") == 1
    assert runs_of(ended, "flowerbox_broker_run_live") == {poor.run_id: 0, rich.run_id: 1}
    broker.remove(ClusterRun(poor.run_id, poor.token))
    _, removed = scrape(port)
    assert one(removed, "flowerbox_broker_runs_registered") == 1
    assert set(runs_of(removed, "flowerbox_broker_run_spent_usd_total")) == {rich.run_id}
    assert one(removed, "flowerbox_broker_spent_usd_total") == pytest.approx(3 * COST)


def test_the_counts_survive_a_restart_as_the_ledger_keeps_them(
    metered: Callable[..., tuple[TcpBroker, int]],
) -> None:
    broker, port = metered()
    run = broker.add("20261207-000000-cccccc", budget=0.01)
    assert [broker.spend(run) for _ in range(3)] == [200, 200, 403]
    assert broker.request({})[0] == 401  # counted in the refusals table, not a row
    broker.stop()
    broker.start()  # the same ports, the same ledger
    _, samples = scrape(port)
    assert requests(samples) == {
        ("api", "forwarded", ""): 2,
        ("api", "refused", "budget"): 1,
        ("api", "refused", "no token"): 1,
    }
    assert one(samples, "flowerbox_broker_spent_usd_total") == pytest.approx(2 * COST)
    assert runs_of(samples, "flowerbox_broker_run_budget_left_usd") == {run.run_id: 0.0}
    assert one(samples, "flowerbox_broker_upstream_latency_seconds_count") == 0  # this process's
    assert broker.spend(run) == 403
    _, moved = scrape(port)
    assert requests(moved)["api", "refused", "budget"] == 2


def test_a_local_broker_serves_the_same_metrics_for_its_runs_on_unix_sockets(
    start_local: Callable[..., BrokerProcess],  # noqa: F811 - the fixture imported above
) -> None:
    """`flowerbox broker --metrics` without --listen: runs registered on the control socket,
    their requests on their own api.sock; a token on another run's socket is refused."""
    port = free_port()
    broker = start_local("--metrics", f"127.0.0.1:{port}", "--team-budget", "5")
    first, second = broker.register(budget=1.0), broker.register()
    assert first.request()[0] == 200 and second.request()[0] == 200 and first.request()[0] == 200
    assert second.request(first.token)[0] == 401  # on second's socket: second's refusal
    page, samples = scrape(port)
    rows = broker.rows()
    assert one(samples, "flowerbox_broker_runs_registered") == 2
    assert one(samples, "flowerbox_broker_runs_live") == 2
    spent = runs_of(samples, "flowerbox_broker_run_spent_usd_total")
    assert spent == {
        run.run_id: pytest.approx(sum(r["cost_usd"] for r in rows if r["run_id"] == run.run_id))
        for run in (first, second)
    }
    assert runs_of(samples, "flowerbox_broker_run_budget_left_usd") == {
        first.run_id: pytest.approx(1.0 - 2 * COST)
    }
    assert one(samples, "flowerbox_broker_budget_left_usd") == pytest.approx(5 - 3 * COST)
    assert requests(samples) == {
        ("api", "forwarded", ""): 3,
        ("api", "refused", "not this run's token"): 1,
    }
    assert one(samples, "flowerbox_broker_upstream_latency_seconds_count") == 3
    assert first.token not in page and second.token not in page and REAL_KEY not in page
    assert client.revoke(broker.folder, second.run_id)
    _, ended = scrape(port)
    assert set(runs_of(ended, "flowerbox_broker_run_live")) == {first.run_id}


def test_a_metrics_address_that_cannot_be_served_is_said_with_exit_2(sockdir: Path) -> None:
    """A local broker (`flowerbox broker --metrics`, no --listen) as a real process; its
    home short (its control socket's path must fit a unix socket's)."""
    env = {"HOME": str(sockdir), "PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "sk-ant-x"}

    def broker(address: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "flowerbox", "broker", "--no-engine"]
        return subprocess.run(
            [*command, "--metrics", address], capture_output=True, text=True, env=env, timeout=60
        )

    bad = broker("nowhere")
    assert bad.returncode == 2 and "--metrics 'nowhere': give HOST:PORT" in bad.stderr
    with socket.create_server(("127.0.0.1", 0)) as taken:
        busy = broker(f"127.0.0.1:{taken.getsockname()[1]}")
    assert busy.returncode == 2, busy.stderr
    assert "cannot serve metrics on --metrics 127.0.0.1:" in busy.stderr
    assert "Traceback" not in bad.stderr + busy.stderr
