"""`flowerbox broker --metrics HOST:PORT`: the broker's state as Prometheus metrics.

    server = serve_metrics(broker, "127.0.0.1:9464")     # GET /metrics
    ...
    server.shutdown(); server.server_close()

A custom Collector reads what the broker already holds at each scrape: the runs it serves
(and which are live), each run's and the team's meter, and the ledger's running counts of
requests by outcome (flowerbox.broker.tally); nothing is counted twice by hand. Two things
have no state of their own and are observed as they happen: the egress decisions (the
runs' egress logs count them: `Registry.egress`) and the upstream's latency (a histogram
fed by the gateways' `upstream_answered`).

Every label value is a fixed word, a cause from a short vocabulary, or a run id (which
`checked` bounds to `[A-Za-z0-9._-]`), never a token, a key or a client's text; per-run
series exist only for the runs served now, so their number follows the runs, not the
history. The figures are dollars as the meter counts them, which are the ledger's sums.
"""

from __future__ import annotations

from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from flower import text
from flowerbox.broker.server import Registry
from flowerbox.broker.tcp import parse_address
from flowerbox.errors import BrokerError

__all__ = ["LATENCY_BUCKETS", "PREFIX", "BrokerCollector", "serve_metrics"]

PREFIX = "flowerbox_broker_"
# Seconds until the upstream's response head: a streamed answer's first byte comes within
# seconds, a long non-streamed one within minutes (the gateway waits up to 600 s).
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class BrokerCollector(Collector):
    """The broker's runs, spend, budgets and request counts, read at each scrape."""

    def __init__(self, broker: Registry) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        yield from self._runs()
        yield from self._team()
        requests = CounterMetricFamily(
            f"{PREFIX}requests",
            "Requests by listener (api, proxy, git) and outcome (forwarded, refused, failed),"
            " with the refusal's cause; as the ledger counts them",
            labels=["listener", "outcome", "cause"],
        )
        for key, count in sorted(self.broker.outcomes().items()):
            requests.add_metric(list(key), count)
        yield requests
        egress = CounterMetricFamily(
            f"{PREFIX}egress_decisions",
            "The runs' egress proxy decisions against their allowlists (allow, deny)",
            labels=["decision"],
        )
        for (decision,), count in sorted(self.broker.egress.snapshot().items()):
            egress.add_metric([decision], count)
        yield egress

    def _runs(self) -> Iterator[Metric]:
        served = self.broker.served()
        yield GaugeMetricFamily(
            f"{PREFIX}runs_registered", "Runs whose token the broker serves", value=len(served)
        )
        yield GaugeMetricFamily(
            f"{PREFIX}runs_live",
            "Runs whose token is let through now (on a cluster: a running Job holds it)",
            value=sum(live for _, live in served),
        )
        labels = ["run_id"]
        live = GaugeMetricFamily(f"{PREFIX}run_live", "1 while the run is live", labels=labels)
        spent = CounterMetricFamily(
            f"{PREFIX}run_spent_usd", "What the run has spent, USD (the ledger's)", labels=labels
        )
        budget = GaugeMetricFamily(f"{PREFIX}run_budget_usd", "The run's budget", labels=labels)
        left = GaugeMetricFamily(
            f"{PREFIX}run_budget_left_usd", "What is left of the run's budget", labels=labels
        )
        for run, is_live in sorted(served, key=lambda served: served[0].entry.run_id):
            run_id, meter = [run.entry.run_id], run.meter
            total = meter.total
            live.add_metric(run_id, float(is_live))
            spent.add_metric(run_id, total)
            if meter.budget is not None:
                budget.add_metric(run_id, meter.budget)
                left.add_metric(run_id, max(0.0, meter.budget - total))
        yield from (live, spent, budget, left)

    def _team(self) -> Iterator[Metric]:
        team = self.broker.team
        total = team.total
        yield CounterMetricFamily(
            f"{PREFIX}spent_usd", "What every run together has spent, USD", value=total
        )
        yield GaugeMetricFamily(
            f"{PREFIX}reserved_usd",
            "What the requests in flight hold of the team's budget, USD",
            value=team.reserved,
        )
        if team.budget is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}budget_usd", "The team's budget (--team-budget)", value=team.budget
            )
            yield GaugeMetricFamily(
                f"{PREFIX}budget_left_usd",
                "What is left of the team's budget",
                value=max(0.0, team.budget - total),
            )


def serve_metrics(broker: Registry, address: str) -> WSGIServer:
    """Serve `/metrics` on `address` (HOST:PORT) on a thread of its own; the server (to shut
    down and close). Also the process's own figures (memory, CPU, open files).

    Raises:
        BrokerError: `address` is no HOST:PORT, or cannot be bound.
    """
    host, port = parse_address(address, "--metrics")
    registry = CollectorRegistry()
    registry.register(BrokerCollector(broker))
    ProcessCollector(registry=registry)
    latency = Histogram(
        f"{PREFIX}upstream_latency_seconds",
        "Seconds from forwarding a request to the upstream's response head",
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    broker.upstream_latency = latency.observe
    try:
        server, _ = start_http_server(port, host, registry=registry)
    except OSError as exc:
        raise BrokerError(text("broker.metrics_unserved", address=address, problem=exc)) from exc
    return server
