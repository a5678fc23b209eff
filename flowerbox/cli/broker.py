"""`flowerbox broker`: one credential broker for every run on this host (flowerbox.broker).

While it runs, `flowerbox "ask"` registers each run with it instead of starting a private
gateway; `--status` asks a running broker what it serves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from flower.cli import positive_usd
from flowerbox.box import state
from flowerbox.broker import client
from flowerbox.runs.brokered import serve

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
) -> None:
    """Serve every run on this host with one key, a token per run and a team budget, until
    Ctrl+C; runs started meanwhile use it instead of a private gateway (docs/deployment.md)."""
    if status:
        typer.echo(json.dumps(client.call(state.broker_folder(), {"op": "status"}), indent=2))
        return
    raise typer.Exit(serve(team_budget=team_budget, prices=prices, engine=not no_engine))
