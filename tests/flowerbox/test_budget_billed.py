"""The budget against what the API bills (issue 37, A2): a stand-in API on loopback bills
300,000 input tokens for every ~250-byte request, as the real one does for a document it
fetches by URL. 20 clients at once against a $1 budget, through a real gateway process and
a real broker: the total metered stays within $1 plus one request's bill (main metered $18),
and a run under a budget is not starved."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flower.testing import Always, FakeAPI, Usage, text
from flowerbox.sidecar.gateway import OVERBILLED_NOTE
from tests.flowerbox.conftest import REAL_KEY, GatewayProcess, UnixHTTPConnection, wait_for
from tests.flowerbox.test_broker import BrokerProcess, Run

Start = Callable[..., GatewayProcess]
MESSAGES = "/v1/messages?beta=true"
MODEL = "claude-sonnet-4-5"  # $3 per million input tokens, $15 output
BILL = (300_000 * 3 + 10 * 15) / 1_000_000  # $0.90015: what the stand-in bills a request
BUDGET = 1.0
CLIENTS = 20


def body(*, fetching: bool) -> bytes:
    """The attack's request: a document the API fetches by URL (or, not fetching, the same
    question without it)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": "Summarise this document."}]
    if fetching:
        source = {"type": "url", "url": "https://docs.example.test/big.pdf"}
        content.insert(0, {"type": "document", "source": source})
    ask = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": content}]}
    return json.dumps(ask).encode()


def billing(usage: Usage, delay: float = 0.2) -> Always:
    return Always(text("summary", usage=usage, delay=delay))


@pytest.fixture
def stand_in() -> Iterator[FakeAPI]:
    """The stand-in API: 300,000 input tokens billed for each request, answered after 0.2 s
    so that the clients' requests overlap."""
    with FakeAPI(billing(Usage(300_000, 10)), api_key=REAL_KEY) as api:
        yield api


def post(socket: Path, data: bytes, key: str = "sk-placeholder") -> int:
    conn = UnixHTTPConnection(socket, timeout=120)
    try:
        headers = {"x-api-key": key, "content-type": "application/json"}
        conn.request("POST", MESSAGES, body=data, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def at_once(send: Callable[[], int], clients: int = CLIENTS) -> list[int]:
    """`send` from `clients` threads released together; their statuses."""
    start = threading.Barrier(clients)
    statuses: list[int] = []
    lock = threading.Lock()

    def one() -> None:
        start.wait()
        status = send()
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=one) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert len(statuses) == clients
    return statuses


def metered(gateway: GatewayProcess, answered: int) -> float:
    gateway.settled(CLIENTS if answered else 0)
    return float(gateway.usage()["total_cost_usd"])


def test_by_default_the_fetching_requests_never_reach_the_api(
    stand_in: FakeAPI, start_gateway: Start
) -> None:
    gateway = start_gateway(stand_in.url, args=("--budget", str(BUDGET)))
    statuses = at_once(lambda: post(gateway.socket, body(fetching=True)))
    assert statuses == [403] * CLIENTS
    assert stand_in.requests == []
    assert metered(gateway, 0) == 0


def test_allowed_fetches_overshoot_the_budget_by_at_most_one_request(
    stand_in: FakeAPI, start_gateway: Start
) -> None:
    args = ("--budget", str(BUDGET), "--allow-api-fetch")
    gateway = start_gateway(stand_in.url, args=args)
    statuses = at_once(lambda: post(gateway.socket, body(fetching=True)))
    answered = statuses.count(200)
    total = metered(gateway, answered)
    assert total <= BUDGET + BILL, total  # main: $18.00
    assert 1 <= answered == len(stand_in.requests)
    assert total == pytest.approx(answered * BILL)
    assert statuses.count(403) == CLIENTS - answered


def test_an_upstream_billing_past_a_bodys_bound_makes_every_request_reserved_unbounded(
    stand_in: FakeAPI, start_gateway: Start, tmp_path: Path
) -> None:
    """No URL at all, and still billed 300,000 tokens: the first such bill shows the
    upstream bills more than a body can hold; from then on the overshoot is one request."""
    requests = tmp_path / "requests.jsonl"
    args = ("--budget", str(2 * BUDGET), "--requests", str(requests))
    gateway = start_gateway(stand_in.url, args=args)
    assert post(gateway.socket, body(fetching=False)) == 200
    wait_for(lambda: requests.exists() and OVERBILLED_NOTE in requests.read_text())
    statuses = at_once(lambda: post(gateway.socket, body(fetching=False)))
    total = metered(gateway, 1)
    assert total <= 2 * BUDGET + BILL, total
    assert statuses.count(200) + 1 == len(stand_in.requests) <= 3


def test_a_run_under_a_budget_is_not_starved(stand_in: FakeAPI, start_gateway: Start) -> None:
    """One after another, requests far below the budget all pass, fetching ones too (each
    reserved at a whole context window, $6, more than the $1 budget)."""
    stand_in.script = billing(Usage(1000, 100), delay=0)  # $0.0045 a request
    args = ("--budget", str(BUDGET), "--allow-api-fetch")
    gateway = start_gateway(stand_in.url, args=args)
    statuses = [post(gateway.socket, body(fetching=n % 2 == 0)) for n in range(20)]
    assert statuses == [200] * 20
    assert metered(gateway, 20) == pytest.approx(20 * 0.0045)


# --- the broker: a run's budget and the team's ------------------------------------------


@pytest.fixture
def broker(sockdir: Path, stand_in: FakeAPI) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def start(*args: str) -> BrokerProcess:
        process = BrokerProcess(sockdir, stand_in, args).start()
        started.append(process)
        return process

    try:
        yield start
    finally:
        for process in started:
            if process.process is not None and process.process.poll() is None:
                process.process.kill()
                process.process.wait(timeout=10)


def burst(run: Run) -> list[int]:
    data = body(fetching=True)
    return at_once(lambda: post(run.socket_dir / "api.sock", data, run.token))


def settled_cost(process: BrokerProcess, answered: int) -> float:
    wait_for(lambda: sum(r["settled"] for r in process.rows()) >= CLIENTS)
    rows = process.rows()
    assert sum(r["status"] == 200 for r in rows) == answered
    return float(sum(r["cost_usd"] for r in rows))


def test_the_broker_refuses_a_runs_fetches_by_default(
    broker: Callable[..., BrokerProcess], stand_in: FakeAPI
) -> None:
    run = broker("--team-budget", str(BUDGET)).register(budget=BUDGET)
    assert burst(run) == [403] * CLIENTS
    assert stand_in.requests == []


@pytest.mark.parametrize("whose", ["run", "team"])
def test_the_brokers_budgets_overshoot_by_at_most_one_request(
    whose: str, broker: Callable[..., BrokerProcess], stand_in: FakeAPI
) -> None:
    if whose == "team":
        process = broker("--team-budget", str(BUDGET))
        run = process.register(allow_api_fetch=True)
    else:
        process = broker()
        run = process.register(budget=BUDGET, allow_api_fetch=True)
    statuses = burst(run)
    answered = statuses.count(200)
    total = settled_cost(process, answered)
    assert total <= BUDGET + BILL, total  # main: $18.00, the team's the same
    assert 1 <= answered == len(stand_in.requests)
