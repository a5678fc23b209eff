"""`flowerbox broker`: one credential broker for every run on this host (flowerbox.broker).

While it runs, `flowerbox "ask"` registers each run with it instead of starting a private
gateway; `--status` asks a running broker what it serves. With `--listen` it serves a
cluster's runs over TCP instead, learning them from their token Secrets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from flower.cli import positive_usd
from flowerbox import wire
from flowerbox.box import state
from flowerbox.sidecar.admission import PER_PEER, TOTAL

app = typer.Typer()


@app.command()
def broker(
    team_budget: Annotated[
        float | None,
        typer.Option(
            "--team-budget",
            help="USD across all runs; model calls past it are refused (kept in the ledger).",
            callback=positive_usd,
        ),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option("--prices", help="A JSON price table laid over the shipped one."),
    ] = None,
    no_engine: Annotated[
        bool,
        typer.Option(
            "--no-engine",
            help="Never ask the Docker engine (a broker in a container has none): a run"
            " registered before a restart is served while its socket folder exists.",
        ),
    ] = False,
    status: Annotated[
        bool, typer.Option("--status", help="Print what a running broker serves, as JSON.")
    ] = False,
    listen: Annotated[
        str | None,
        typer.Option(
            "--listen",
            metavar="HOST:PORT",
            help="Serve a cluster's runs over TCP here (the API), each told by its token;"
            " the runs are learned from their token Secrets (in-cluster, else KUBECONFIG).",
        ),
    ] = None,
    proxy_port: Annotated[
        int,
        typer.Option("--proxy-port", help="With --listen: the egress proxy's port, same host."),
    ] = wire.PROXY_PORT,
    git_port: Annotated[
        int,
        typer.Option(
            "--git-port",
            help="With --listen: the git relay's port, same host (served when the"
            " credentials hold GIT_TOKEN and GIT_HOST).",
        ),
    ] = wire.GIT_PORT,
    credentials: Annotated[
        Path | None,
        typer.Option(
            "--credentials",
            help="With --listen: a .env file with the key (a mounted Secret), instead of the"
            " environment and the user's .env.",
        ),
    ] = None,
    ledger: Annotated[
        Path | None,
        typer.Option(
            "--ledger",
            help="With --listen: the folder of the SQLite ledger and the runs' records"
            " (default: the broker's state folder, listen/).",
        ),
    ] = None,
    namespace: Annotated[
        str,
        typer.Option("--namespace", help="With --listen: the namespace of the run tokens."),
    ] = "flowerbox",
    max_per_peer: Annotated[
        int,
        typer.Option(
            "--max-per-peer",
            min=1,
            help="With --listen: connections one address (a run's Pod) may hold open; one"
            " more is answered 503 with retry-after and counted (`--status`, metrics).",
        ),
    ] = PER_PEER,
    max_connections: Annotated[
        int,
        typer.Option(
            "--max-connections",
            min=1,
            help="With --listen: connections all addresses together may hold open (a"
            " thread and a head buffer each); past it, as past --max-per-peer.",
        ),
    ] = TOTAL,
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            metavar="HOST:PORT",
            help="Serve Prometheus metrics at http://HOST:PORT/metrics: runs, spend, budgets,"
            " requests by outcome, upstream latency, egress decisions (docs/deployment.md).",
        ),
    ] = None,
) -> None:
    """Serve every run on this host with one key, a token per run and a team budget, until
    Ctrl+C; runs started meanwhile use it instead of a private gateway (docs/deployment.md)."""
    if status:
        # lazy: the control socket, which --help skips
        from flowerbox.broker import client

        typer.echo(json.dumps(client.call(state.broker_folder(), {"op": "status"}), indent=2))
        return
    # lazy: serving brings the gateway's servers and the docker SDK, which --help skips
    from flowerbox.broker.tcp import parse_address
    from flowerbox.runs.brokerserve import serve, serve_cluster

    if metrics is not None:
        parse_address(metrics, "--metrics")  # said before anything is started

    if listen is None:
        if credentials or ledger:
            raise typer.BadParameter("--credentials and --ledger go with --listen")
        done = serve(team_budget=team_budget, prices=prices, engine=not no_engine, metrics=metrics)
        raise typer.Exit(done)
    if no_engine:
        raise typer.BadParameter("--no-engine is for a broker of local boxes, not --listen")
    # lazy: the official client is the `kube` extra, and only --listen needs it
    from flowerbox.broker.tokens import TokenSource
    from flowerbox.sidecar.admission import Admission

    source = TokenSource.connect(namespace=namespace)
    done = serve_cluster(
        listen=listen,
        proxy_port=proxy_port,
        git_port=git_port,
        credentials=credentials,
        ledger=ledger,
        follow=source.follow,
        team_budget=team_budget,
        prices=prices,
        metrics=metrics,
        admission=Admission(per_peer=max_per_peer, total=max_connections),
    )
    raise typer.Exit(done)
