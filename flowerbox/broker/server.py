"""The broker: the gateway's request path (flowerbox.sidecar.gateway) serving many runs.

    broker = Broker(folder, credentials=creds, prices=PriceTable(), team_budget=50.0)
    broker.serve_forever()          # the control socket; each run's sockets on threads

A run is registered over the control socket (`folder/control.sock`, 0600, host-only: only
flowerbox on the host, as the same user, reaches it): the broker makes it a random token, stores
the token's SHA-256 in the ledger, and serves the run's own `api.sock` (and `proxy.sock`, its
egress allowlist) in the run's socket folder, which only that run's box has mounted. A request
on a run's socket is that run's only with that run's token: another token, none, or a revoked
one is refused 401 and the refusal is recorded against the socket's run. The run's budget, then
the team's, admit each model request; the ledger (flowerbox.broker.ledger) holds a row per
request and refusal, written before the client has its answer; the run's usage.json and
requests.jsonl are kept as its private gateway keeps them, so `flowerbox ps`, `logs --requests`
and the cost lines work the same.

Stopping the broker (SIGTERM) closes every socket but revokes nothing: a broker started again
serves the runs still registered, at the same paths, after revoking the ones `alive` says are
gone, and the ones whose socket folder it cannot bind in any more (the folder is mounted into
the run's box, which may have filled it with anything). Revocation is the run's end, told by
flowerbox (`client.revoke`).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import re
import secrets
import socket
import socketserver
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flower import text
from flowerbox import wire
from flowerbox.broker.control import CONTROL_LIMIT, CONTROL_SOCKET, Registration
from flowerbox.broker.ledger import Ledger, RunEntry, token_hash
from flowerbox.broker.tally import Tally
from flowerbox.errors import BrokerError, FlowerboxError
from flowerbox.sidecar.egress import Policy
from flowerbox.sidecar.gateway import Credentials, Gateway, Refusal, Tenant, client_keys
from flowerbox.sidecar.http import Incoming
from flowerbox.sidecar.lease import Lease
from flowerbox.sidecar.meter import Meter, Reservation, Whose
from flowerbox.sidecar.pricing import Billing, PriceTable
from flowerbox.sidecar.proxy import EgressProxy, JsonLines, PrivateUnixServer
from flowerbox.sidecar.reach import FetchRule
from flowerbox.sidecar.redact import Redactor

__all__ = ["LEDGER", "Broker", "Charge", "Registry", "checked"]

LEDGER = "ledger.db"
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
TEAM = Whose("meter.team_budget", "meter.team_remedy")


@dataclass
class ServedRun:
    """One registered run as the broker serves it: its meter, records and sockets."""

    entry: RunEntry
    meter: Meter
    requests: JsonLines
    egress_log: JsonLines
    policy: Policy | None = None  # its egress allowlist; None: no proxy (`--net open`)
    servers: list[PrivateUnixServer] = field(default_factory=list)
    revoked: threading.Event = field(default_factory=threading.Event)
    # Held by whoever keeps the run's box, over the control socket (flowerbox.sidecar.lease):
    # lost, nothing more of the run's is forwarded. None: nobody took it (a broker started
    # again serves its runs without: as before leases).
    lease: Lease | None = None

    @property
    def fetch(self) -> FetchRule:
        """What the API may reach for this run (flowerbox.sidecar.reach)."""
        return FetchRule(self.entry.allow_api_fetch, self.policy)

    def owns(self, keys: set[str]) -> bool:
        """Whether a key the request carries is this run's token (compared in constant time)."""
        return any(hmac.compare_digest(token_hash(k), self.entry.token_sha256) for k in keys)


class Charge:
    """One request's account: its run's budget, then the team's; its ledger row begun when
    admitted (before forwarding) and settled when recorded."""

    def __init__(self, run: ServedRun, team: Meter, ledger: Ledger) -> None:
        self.run = run
        self.team = team
        self.ledger = ledger
        self.row: int | None = None
        self._team: Reservation | None = None

    def worst_case(
        self, model: str | None, *, max_tokens: int, input_tokens: int, billing: Billing
    ) -> float:
        return self.run.meter.worst_case(
            model, max_tokens=max_tokens, input_tokens=input_tokens, billing=billing
        )

    def admit(self, amount: float, *, wait: float, alone: bool = False) -> Reservation | str:
        mine = self.run.meter.admit(amount, wait=wait, alone=alone)
        if isinstance(mine, str):
            return mine
        team = self.team.admit(amount, wait=wait, alone=alone)
        if isinstance(team, str):
            self.run.meter.release(mine)
            return team
        self._team = team
        self.row = self.ledger.begin(self.run.entry.run_id, amount)
        return mine

    def overbilled(self) -> bool:
        """The run's or the team's: one upstream bills them all."""
        return self.run.meter.overbilled() or self.team.overbilled()

    def release(self, reservation: Reservation) -> None:
        self.run.meter.release(reservation)
        if self._team is not None:
            self.team.release(self._team)

    def add(
        self, model: str, usage: dict[str, Any], *, reservation: Reservation | None = None
    ) -> tuple[dict[str, int], float]:
        self.team.add(model, usage, reservation=self._team)
        return self.run.meter.add(model, usage, reservation=reservation)

    def keep(self, reservation: Reservation, model: str) -> float:
        if self._team is not None:
            self.team.keep(self._team, model)
        return self.run.meter.keep(reservation, model)

    def refuse(self) -> None:
        self.run.meter.refuse()

    def count_unmetered(self) -> None:
        self.run.meter.count_unmetered()

    def saw_client_credential(self, kind: str) -> None:
        self.run.meter.saw_client_credential(kind)

    def record(self, **fields: Any) -> None:
        """The request's line: the ledger first (durable), then the run's requests file."""
        self.ledger.settle(self.row, self.run.entry.run_id, fields)
        self.run.requests.record(**fields)


class RunGateway(Gateway):
    """The gateway on one run's api.sock: only that run's token passes. Each answer is in the
    ledger before its client has the end of it: a broker killed then loses no entry."""

    settle_before_end = True

    def __init__(self, run: ServedRun, broker: Broker) -> None:
        self.run = run
        self.broker = broker
        super().__init__(
            run.entry.socket_dir / wire.API_SOCKET,
            credentials=broker.credentials,
            meter=run.meter,
            requests=run.requests,
        )
        self.redactor = broker.redactor  # it knows the run tokens too

    def tenant(self, incoming: Incoming) -> Tenant:
        charge = Charge(self.run, self.broker.team, self.broker.ledger)
        run_id = self.run.entry.run_id
        refusal = None
        if self.run.revoked.is_set():
            message = "flowerbox broker: " + text("broker.why_ended", run=run_id)
            refusal = Refusal(401, "authentication_error", message, "refused: token revoked")
        elif not self.run.owns(client_keys(incoming)):
            message = "flowerbox broker: " + text("broker.not_its_token", run=run_id)
            refusal = Refusal(401, "authentication_error", message, "refused: not this run's token")
        return Tenant(charge, charge.record, refusal, self.run.fetch, self.run.lease)

    def credential_kind(self, sent: set[str]) -> str:
        return "run token" if self.run.owns(sent) else "other"

    def line(self, text: str) -> None:
        super().line(f"{self.run.entry.run_id} {text}")  # one broker's stderr, many runs

    def malformed(self, **fields: Any) -> None:
        self.broker.ledger.settle(None, self.run.entry.run_id, fields)
        super().malformed(**fields)

    def upstream_answered(self, seconds: float) -> None:
        self.broker.upstream_latency(seconds)


class Registry:
    """What every broker holds: the runs it serves, the team's meter, the ledger. How runs
    reach it is its subclass's: unix sockets per run (`Broker`), or TCP listeners telling
    runs apart by token (flowerbox.broker.listener)."""

    def __init__(
        self,
        folder: Path,
        *,
        credentials: Credentials,
        prices: PriceTable,
        team_budget: float | None = None,
    ) -> None:
        """Open the ledger in `folder` (host-only).

        Raises:
            BrokerError: the ledger cannot be opened.
        """
        self.folder = folder
        self.credentials = credentials
        self.prices = prices
        self.redactor = Redactor(credentials.secrets())  # one for every record it writes
        self.ledger = Ledger(folder / LEDGER, self.redactor)
        for sha256 in self.ledger.token_hashes():
            self.redactor.know_token_hash(sha256)
        self.team = Meter(
            None,  # the ledger is the team's record: no file rewritten under the team's lock
            prices,
            budget=team_budget,
            spent=self.ledger.spent(),
            whose=TEAM,
        )
        self.runs: dict[str, ServedRun] = {}
        self.egress = Tally()  # the runs' egress decisions, by decision (allow, deny)
        # Each upstream answer's wait, in seconds (`--metrics` sets it: flowerbox.broker.metrics)
        self.upstream_latency: Callable[[float], None] = _unobserved
        self._lock = threading.Lock()

    def revoke(self, run_id: str) -> bool:
        """End a run: its token refused from now on, its sockets closed. False if unknown."""
        self.ledger.revoke(run_id)
        with self._lock:
            run = self.runs.pop(run_id, None)
        if run is None:
            return False
        run.revoked.set()
        _close(run)
        if run.lease is not None:
            run.lease.close()
        return True

    def lease(self, run_id: str, holder: socket.socket) -> ServedRun:
        """The served run whose lease `holder` (a control connection) takes: the first alone.

        Raises:
            BrokerError: no such run served, or its lease is held already.
        """
        with self._lock:
            run = self.runs.get(run_id)
            if run is None:
                raise BrokerError(text("broker.why_ended", run=run_id))
            if run.lease is not None:
                raise BrokerError(text("broker.lease_held", run=run_id))
            run.lease = Lease.taken(holder)
        return run

    def status(self) -> dict[str, Any]:
        """What `flowerbox broker --status` shows: the runs served and the team's spending."""
        with self._lock:
            runs = {run_id: round(run.meter.total, 6) for run_id, run in self.runs.items()}
        return {
            "runs": runs,
            "team_spent_usd": round(self.team.total, 6),
            "team_budget_usd": self.team.budget,
        }

    def outcomes(self) -> dict[tuple[str, ...], int]:
        """Requests per (listener, outcome, cause): the ledger's (flowerbox.broker.tally)."""
        return self.ledger.outcomes.snapshot()

    def served(self) -> list[tuple[ServedRun, bool]]:
        """The runs served now, each with whether it is live (its token is let through now).
        Here every one: a local run is registered by its box and revoked at its end."""
        with self._lock:
            return [(run, True) for run in self.runs.values()]

    def close(self) -> None:
        with self._lock:
            runs, self.runs = list(self.runs.values()), {}
        _close(*runs)
        self.ledger.close()

    def _served(self, entry: RunEntry) -> ServedRun:
        """A run's meter (from what the ledger says it spent) and records, in its folder."""
        self.redactor.know_token_hash(entry.token_sha256)
        entry.gateway_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return ServedRun(
            entry=entry,
            meter=Meter(
                entry.gateway_dir / wire.USAGE_FILE,
                self.prices,
                budget=entry.budget_usd,
                spent=self.ledger.spent(entry.run_id),
            ),
            requests=JsonLines(entry.gateway_dir / wire.REQUESTS_LOG, self.redactor),
            egress_log=CountedLines(
                entry.gateway_dir / wire.EGRESS_LOG, self.redactor, self.egress
            ),
            policy=None if entry.allow is None else Policy.parse(list(entry.allow), []),
        )


class CountedLines(JsonLines):
    """A run's egress log that also counts its decisions in the broker's `egress` tally."""

    def __init__(self, path: Path, redactor: Redactor, tally: Tally) -> None:
        super().__init__(path, redactor)
        self.tally = tally

    def record(self, **fields: Any) -> None:
        decision = fields.get("decision")
        self.tally.add((decision if decision in ("allow", "deny") else "other",))
        super().record(**fields)


def _unobserved(seconds: float) -> None:
    """No metrics asked for: an upstream's latency is not kept."""


def checked(run_id: str, budget_usd: float | None, allow: tuple[str, ...] | None) -> None:
    """Raises BrokerError (or the policy's error) for what no run may be registered with."""
    if not RUN_ID.fullmatch(run_id):
        raise BrokerError(text("broker.not_run_id", value=repr(run_id[:100])))
    if budget_usd is not None and not budget_usd > 0:  # NaN too
        raise BrokerError(text("broker.bad_budget", budget=budget_usd))
    Policy.parse(list(allow or ()), [])  # a bad entry is refused before anything is made


class Broker(Registry):
    """The local broker: each run on unix sockets in its own socket folder, and the control
    socket flowerbox registers runs on."""

    def __init__(
        self,
        folder: Path,
        *,
        credentials: Credentials,
        prices: PriceTable,
        team_budget: float | None = None,
        alive: Callable[[str, Path], bool] = lambda run_id, socket_dir: True,
    ) -> None:
        """Open the ledger in `folder` (host-only), revoke the registered runs `alive` (given
        a run id and socket folder) says are gone, serve the others again, and bind the
        control socket.

        Raises:
            BrokerError: the ledger cannot be opened, or a run's socket cannot be bound.
        """
        super().__init__(folder, credentials=credentials, prices=prices, team_budget=team_budget)
        for entry in self.ledger.active():
            if not alive(entry.run_id, entry.socket_dir):
                self.ledger.revoke(entry.run_id)
                continue
            try:  # the socket folder is its box's to write: whatever it left there,
                self._serve(entry)  # that run alone is not served again
            except BrokerError as exc:
                self.ledger.revoke(entry.run_id)
                print(f"flowerbox broker: {exc}; its token is revoked", file=sys.stderr)
        try:
            self.control = _ControlServer(folder / CONTROL_SOCKET, self)
        except OSError as exc:  # a folder whose path is too long for a unix socket, say
            super().close()
            raise BrokerError(
                text("broker.control_unbound", path=folder / CONTROL_SOCKET, problem=exc)
            ) from exc

    def register(self, asked: Registration) -> str:
        """Serve a new run on sockets in its socket folder; its token (the one copy of it)."""
        run_id, socket_dir, gateway_dir = asked.run_id, asked.socket_dir, asked.gateway_dir
        budget_usd, allow = asked.budget_usd, asked.allow
        checked(run_id, budget_usd, allow)
        if not socket_dir.is_absolute() or not gateway_dir.is_absolute():
            raise BrokerError(text("broker.paths_relative"))
        token = secrets.token_urlsafe(32)
        entry = RunEntry(
            run_id,
            token_hash(token),
            budget_usd,
            allow,
            socket_dir,
            gateway_dir,
            asked.allow_api_fetch,
        )
        with self._lock:
            if self.ledger.known(run_id):
                raise BrokerError(text("broker.registered_already", run=run_id))
            self.ledger.register(entry)
        self._serve(entry)
        return token

    def serve_forever(self) -> None:
        self.control.serve_forever(poll_interval=0.2)

    def shutdown(self) -> None:
        """Stop serving (from another thread): nothing is revoked, the ledger stays."""
        self.control.shutdown()

    def close(self) -> None:
        self.control.server_close()
        super().close()

    def _serve(self, entry: RunEntry) -> None:
        run: ServedRun | None = None
        try:
            run = self._served(entry)
            if run.policy is not None:  # bound before api.sock, as the private gateway does
                policy = run.policy
                path = entry.socket_dir / wire.PROXY_SOCKET
                run.servers.append(EgressProxy(path, policy=policy, log=run.egress_log))
            run.servers.append(RunGateway(run, self))
        except (OSError, FlowerboxError) as exc:
            if run is not None:  # a socket bound before the one that failed: not left behind
                _unbind(run)
            raise BrokerError(
                text("broker.cannot_serve", run=entry.run_id, path=entry.socket_dir, problem=exc)
            ) from exc
        for server in run.servers:
            threading.Thread(target=server.serve_forever, args=(0.2,), daemon=True).start()
        with self._lock:
            self.runs[entry.run_id] = run


def _close(*runs: ServedRun) -> None:
    """Stop the runs' servers, all at once: each shutdown waits up to a poll interval for its
    loop, and a broker of a thousand runs would wait minutes for them one by one."""
    servers = [server for run in runs for server in run.servers]
    stopping = [threading.Thread(target=server.shutdown) for server in servers]
    for thread in stopping:
        thread.start()
    for thread in stopping:
        thread.join()
    for run in runs:
        _unbind(run)


def _unbind(run: ServedRun) -> None:
    """Close a run's sockets (stopped, or never served) and its files."""
    for server in run.servers:
        server.server_close()
    run.requests.close()
    run.egress_log.close()


class _ControlServer(PrivateUnixServer):
    def __init__(self, path: Path, broker: Broker) -> None:
        self.broker = broker
        super().__init__(path, _ControlHandler)


class _ControlHandler(socketserver.StreamRequestHandler):
    """One JSON object in, one out (flowerbox.broker.client speaks it)."""

    server: _ControlServer

    def handle(self) -> None:
        line = self.rfile.readline(CONTROL_LIMIT)
        held: ServedRun | None = None
        try:
            asked = json.loads(line)
            if isinstance(asked, dict) and asked.get("op") == "lease":
                held = self.server.broker.lease(str(asked["run_id"]), self.connection)
                answer: dict[str, Any] = {"held": True}
            else:
                answer = self._answer(asked)
        except (ValueError, TypeError, KeyError, FlowerboxError) as exc:
            answer = {"error": str(exc)}
        with contextlib.suppress(OSError):
            self.wfile.write(json.dumps(answer).encode() + b"\n")
        if held is not None:
            self._hold(held)

    def _hold(self, run: ServedRun) -> None:
        """Keep the connection (this thread's) until its holder ends it: the lease is lost
        from then on, the run's requests refused (checked at each forward, not here)."""
        with contextlib.suppress(OSError):
            while self.connection.recv(4096):
                pass
        if run.lease is not None and run.lease.lost():
            print(f"flowerbox broker: {run.entry.run_id} lost its keeper", file=sys.stderr)

    def _answer(self, asked: dict[str, Any]) -> dict[str, Any]:
        broker = self.server.broker
        op = asked["op"]
        if op == "register":
            return {"token": broker.register(Registration.from_json(asked))}
        if op == "revoke":
            return {"revoked": broker.revoke(str(asked["run_id"]))}
        if op == "status":
            return broker.status()
        raise BrokerError(text("broker.unknown_op", op=repr(op)))
