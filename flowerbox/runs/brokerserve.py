"""The broker as `flowerbox broker` runs it (a run's side of it is flowerbox.runs.brokered).

`serve()` is `flowerbox broker`: the credentials found as a run finds them, and `alive` for
a restart (a run whose socket folder or agent container is gone is revoked; with
`engine=False`, a broker in a container that must not reach the engine, the folder alone).
`serve_cluster()` is `flowerbox broker --listen`: the broker on TCP, its runs learned by
`follow` (the run token Secrets: flowerbox.broker.tokens).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from wsgiref.simple_server import WSGIServer

from docker.errors import DockerException

from flower import Lookup, check_credentials, load_dotenv, text
from flowerbox.box import state
from flowerbox.box.engine import connect, labelled
from flowerbox.box.prepare import CREDENTIAL_KEYS
from flowerbox.broker import client
from flowerbox.broker.gitrelay import GIT_KEYS, git_credential
from flowerbox.broker.listener import ClusterBroker
from flowerbox.broker.server import Broker
from flowerbox.broker.tcp import parse_address
from flowerbox.errors import BoxError, BrokerError, CredentialsError
from flowerbox.sidecar.admission import Admission
from flowerbox.sidecar.gateway import credentials_file, credentials_from
from flowerbox.sidecar.pricing import PriceTable, load_prices
from flowerbox.wire import RUN_LABEL

__all__ = ["serve", "serve_cluster"]

LISTEN_FOLDER = "listen"  # under the broker's folder: the default ledger of `--listen`
Follow = Callable[[ClusterBroker, threading.Event], None]

MAX_OPEN_FILES = 1 << 20  # the kernel's usual nr_open: what "no hard limit" is raised to


def serve(
    *,
    team_budget: float | None,
    prices: Path | None,
    engine: bool = True,
    metrics: str | None = None,
) -> int:
    """Run the broker in the foreground until SIGTERM or SIGINT; 0. Without the `engine`, a
    registered run is alive at a restart while its socket folder exists; with `metrics`
    (HOST:PORT), Prometheus metrics are served there (flowerbox.broker.metrics).

    Raises:
        CredentialsError: no key found (as for a run).
        BrokerError: a broker runs already, or its folder, ledger or metrics address cannot
            be used.
    """
    _open_files_to_the_hard_limit()
    credentials = credentials_from(_found_values(), "the environment")
    folder = state.broker_folder()
    if client.running(folder):
        raise BrokerError(text("runs.broker_running", folder=folder))
    broker = Broker(
        folder,
        credentials=credentials,
        prices=load_prices(prices) if prices else PriceTable(),
        team_budget=team_budget,
        alive=_alive if engine else _folder_alive,
    )
    exposed = _metrics(broker, metrics)
    print(f"flowerbox broker: serving on {folder} (control.sock, ledger.db)", flush=True)
    return _until_stopped(broker, exposed)


def serve_cluster(
    *,
    listen: str,
    proxy_port: int,
    git_port: int,
    credentials: Path | None,
    ledger: Path | None,
    follow: Follow,
    team_budget: float | None,
    prices: Path | None,
    metrics: str | None = None,
    admission: Admission | None = None,
) -> int:
    """`flowerbox broker --listen`: the API on `listen`, the proxy on its host's
    `proxy_port`, the git relay on `git_port` when the credentials hold a git credential,
    Prometheus metrics on `metrics` (HOST:PORT) if given, the runs `follow` tells of, until
    SIGTERM or SIGINT; 0. `admission`: the connections a peer and all peers may hold.

    Raises:
        GatewayError: the `credentials` file is unusable.
        CredentialsError: no key found (without `credentials`, as for a run).
        BrokerError: an address, the ledger's folder or the git credential cannot be used.
    """
    _open_files_to_the_hard_limit()
    host, port = parse_address(listen)
    source = str(credentials) if credentials else "the environment"
    values = credentials_file(credentials) if credentials else _found_values()
    found = credentials_from(values, source)
    git = git_credential(values, source)
    folder = ledger or state.broker_folder() / LISTEN_FOLDER
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise BrokerError(text("runs.ledger_folder", folder=folder, problem=exc)) from exc
    broker = ClusterBroker(
        folder,
        api=(host, port),
        proxy=(host, proxy_port),
        credentials=found,
        prices=load_prices(prices) if prices else PriceTable(),
        team_budget=team_budget,
        git=None if git is None else ((host, git_port), git),
        admission=admission,
    )
    stopping = threading.Event()
    exposed = _metrics(broker, metrics)
    threading.Thread(target=_following, args=(follow, broker, stopping), daemon=True).start()
    relay = f"git relay on port {git_port}" if git else "no git relay (no GIT_TOKEN)"
    print(
        f"flowerbox broker: API on {listen}, proxy on port {proxy_port}, {relay},"
        f" ledger in {folder}",
        flush=True,
    )
    try:
        return _until_stopped(broker, exposed)
    finally:
        stopping.set()


def _following(follow: Follow, broker: ClusterBroker, stopping: threading.Event) -> None:
    """`follow` until told to stop. Should it end otherwise (a failure it does not retry),
    the broker stops too: serving on without it would serve deleted runs' tokens. (Its
    Deployment starts it again.)"""
    try:
        follow(broker, stopping)
    finally:
        if not stopping.is_set():
            print("flowerbox broker: stopped learning the runs: stopping", flush=True)
            broker.shutdown()


def _found_values() -> dict[str, str]:
    """The key (and a git credential) as a run finds it: the environment, then the user's
    .env files.

    Raises:
        CredentialsError: no key there.
    """
    load_dotenv(lookup=Lookup.from_process(project=False))
    if problem := check_credentials():
        raise CredentialsError(problem)
    return {key: os.environ[key] for key in (*CREDENTIAL_KEYS, *GIT_KEYS) if os.environ.get(key)}


def _metrics(broker: Broker | ClusterBroker, address: str | None) -> WSGIServer | None:
    """The metrics server on `address`, if one is asked for; the broker closed if it fails.

    Raises:
        BrokerError: `address` is no HOST:PORT, or cannot be bound.
    """
    if address is None:
        return None
    # lazy: prometheus_client only for a broker that serves metrics
    from flowerbox.broker.metrics import serve_metrics

    try:
        server = serve_metrics(broker, address)
    except BrokerError:
        broker.close()
        raise
    print(f"flowerbox broker: metrics on http://{address}/metrics", flush=True)
    return server


def _until_stopped(broker: Broker | ClusterBroker, metrics: WSGIServer | None) -> int:
    """Serve in the foreground until SIGTERM or SIGINT, then close (and the metrics server
    if there is one); 0."""

    def stop(signum: int, frame: FrameType | None) -> None:
        # shutdown() waits for serve_forever to return, so it cannot run on this thread.
        threading.Thread(target=broker.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        broker.serve_forever()
    finally:
        if metrics is not None:
            metrics.shutdown()
            metrics.server_close()
        broker.close()
    return 0


def _open_files_to_the_hard_limit() -> None:
    """Each run holds two listening sockets and its files: a login's soft limit (often 1024)
    refused about the 250th run, so the broker raises it to what the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = MAX_OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, MAX_OPEN_FILES)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):  # a lower limit still serves runs
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _folder_alive(run_id: str, socket_dir: Path) -> bool:
    """Whether a run's socket folder, removed when its run ends, is still there: a folder,
    never a link (what one points at is no run's, and the broker would unlink and bind its
    sockets there)."""
    try:
        return stat.S_ISDIR(socket_dir.lstat().st_mode)
    except OSError:
        return False


def _alive(run_id: str, socket_dir: Path) -> bool:
    """Whether a run registered before a restart still has its box: its socket folder (removed
    when its run ends) and, when the engine answers, its agent's container."""
    if not _folder_alive(run_id, socket_dir):
        return False
    try:
        return bool(labelled(connect(), f"{RUN_LABEL}={run_id}"))
    except (DockerException, OSError, BoxError):
        return True  # no engine to ask: kept, and revoked when its run tells the broker
