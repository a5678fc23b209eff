"""The broker on a cluster: the API and the egress proxy on TCP, each request's run told by
the token it carries alone.

    broker = ClusterBroker(folder, api=("0.0.0.0", 8080), proxy=("0.0.0.0", 3128),
                           credentials=creds, prices=PriceTable(), team_budget=50.0)
    broker.learn(RunToken(run_id, token_sha256, budget_usd, allow))   # from its Secret
    broker.serve_forever()

Every agent Pod reaches the same two ports (the NetworkPolicy lets them reach nothing else),
so the socket says nothing about whose a request is: the token does. An API request carries
it as `x-api-key` (or `Authorization: Bearer`); the ledger maps its SHA-256 to the run. A
proxy request carries it as the password of `Proxy-Authorization: Basic` (the CLI sends the
proxy URL's userinfo so: `HTTPS_PROXY=http://run:TOKEN@broker:3128`, flowerbox.kube.pod).
No token, one the broker does not serve (unknown, or its run's Secret deleted), or two
credentials that disagree (a request smuggling a second token) is refused from the head
alone, before a byte of its body is read: 401 for the API, 407 for the proxy, and nothing is
forwarded. Such refusals name no live run, so anyone who reaches the ports can send them as
fast as the network goes: each is counted (flowerbox.broker.refusals: the ledger's
`refusals` table, per minute, listener, cause, peer and the revoked run, if any), never a
row or a line of its own, and the broker's log is rate-limited. The three listeners share
one admission (flowerbox.sidecar.admission): connections per peer and in all.

The runs come from the cluster (flowerbox.broker.tokens: the run tokens' Secrets), never
over the network: there is no control socket here.
"""

from __future__ import annotations

import base64
import binascii
import socketserver
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from flower import text
from flowerbox.broker.gitrelay import GitCredential, GitRelay, RelayRun
from flowerbox.broker.ledger import RunEntry, token_hash
from flowerbox.broker.refusals import LineBudget, Refusals
from flowerbox.broker.server import Charge, Registry, ServedRun, checked
from flowerbox.broker.tally import REFUSED, cause
from flowerbox.broker.tcp import OnTcp
from flowerbox.errors import BrokerError, FlowerboxError
from flowerbox.note import allowlist
from flowerbox.sidecar.admission import Admission
from flowerbox.sidecar.egress import Policy
from flowerbox.sidecar.gateway import Credentials, Gateway, Refusal, Tenant
from flowerbox.sidecar.http import Incoming
from flowerbox.sidecar.meter import Meter
from flowerbox.sidecar.pricing import PriceTable
from flowerbox.sidecar.proxy import EgressProxy, JsonLines, Rules

__all__ = ["UNATTRIBUTED", "ClusterBroker", "RunToken", "presented_token", "proxy_token"]

UNATTRIBUTED = "-"  # the ledger's run id for a refusal whose token names no run
RUNS = "runs"  # each run's usage and records, in the broker's folder
GIT_LOG = "git.jsonl"  # the git relay's decisions and notes, one JSON line each
NO_EGRESS = Policy.parse([], [])


@dataclass(frozen=True)
class Unserved:
    """Why a token is served for no run, and whom its refusal is recorded against."""

    run_id: str  # the run a revoked token was made for; UNATTRIBUTED for any other
    why: str
    note: str


@dataclass(frozen=True)
class RunToken:
    """A run as the cluster tells it: its id, its token's SHA-256, budget and allowlist; and
    for the git relay, its repository and image ("" when its Secret names none), and whether
    the one ref it may push is a branch."""

    run_id: str
    token_sha256: str
    budget_usd: float | None
    allow: tuple[str, ...]
    repo: str = ""
    image: str = ""
    namespace: str = ""
    allow_api_fetch: bool = False
    deliver_branch: bool = False


def presented_token(incoming: Incoming) -> str | None:
    """The one token an API request carries (x-api-key, or a bearer token); None if none.

    Raises:
        ValueError: a credential header sent twice, or two that disagree: which one the
            broker and an upstream would read is not certain, so neither is.
    """
    names = [name for name, _ in incoming.headers if name in ("x-api-key", "authorization")]
    if len(names) != len(set(names)):
        raise ValueError("a credential header sent twice")
    keys = {incoming.header(name) or "" for name in names}
    keys = {key.removeprefix("Bearer ").strip() for key in keys} - {""}
    if len(keys) > 1:
        raise ValueError("x-api-key and Authorization disagree")
    return next(iter(keys), None)


def proxy_token(incoming: Incoming) -> str | None:
    """The token a proxy request carries: the password of its one `Proxy-Authorization:
    Basic` (the user name is not looked at). None if none.

    Raises:
        ValueError: the header sent twice, or not Basic user:password.
    """
    sent = [value for name, value in incoming.headers if name == "proxy-authorization"]
    if not sent:
        return None
    if len(sent) > 1:
        raise ValueError("Proxy-Authorization sent twice")
    scheme, _, encoded = sent[0].strip().partition(" ")
    try:
        pair = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError("Proxy-Authorization is not Basic base64(user:token)") from exc
    if scheme.lower() != "basic" or ":" not in pair:
        raise ValueError("Proxy-Authorization is not Basic base64(user:token)")
    return pair.partition(":")[2] or None


class ClusterBroker(Registry):
    """The runs the cluster told of, served on two TCP listeners."""

    def __init__(
        self,
        folder: Path,
        *,
        api: tuple[str, int],
        proxy: tuple[str, int],
        credentials: Credentials,
        prices: PriceTable,
        team_budget: float | None = None,
        git: tuple[tuple[str, int], GitCredential] | None = None,
        admission: Admission | None = None,
    ) -> None:
        """Open the ledger in `folder`, keep the runs it holds as served until the Secrets
        are listed (`learn` serves the ones still listed, `sync` revokes the others: until
        then nothing says a run still is one), and bind both listeners, and the git relay's
        when `git` gives its address and the credential it alone holds. `admission`: the
        connections a peer and all peers may hold open (`--max-per-peer`, `--max-connections`).

        Raises:
            BrokerError: the ledger cannot be opened, or an address cannot be bound.
        """
        self.tokens: dict[str, ServedRun] = {}
        self.relayed: dict[str, RelayRun] = {}  # run id -> what the git relay knows of it
        self.live: frozenset[str] = frozenset()  # the runs a Job holding their token runs
        super().__init__(folder, credentials=credentials, prices=prices, team_budget=team_budget)
        # run id -> a run the ledger serves, not yet seen in the cluster's Secrets
        self.unlisted = {entry.run_id: entry for entry in self.ledger.active()}
        if git is not None:
            self.redactor.know_secret(git[1].token)
            self.redactor.know_secret(git[1].authorization().removeprefix("Basic "))
        self.git_log = JsonLines(folder / GIT_LOG, self.redactor)
        self.log_budget = LineBudget()
        self.refusals = Refusals(self.ledger, self.line)
        try:
            self.gateway = TokenGateway(self, api)
            self.proxy = TokenProxy(self, proxy)
            self.relay = None if git is None else self._relay(*git)
        except OSError as exc:
            raise BrokerError(
                text("broker.cannot_listen", api=api, proxy=proxy, git=git, problem=exc)
            ) from exc
        admission = admission or Admission()
        for name, server in (("api", self.gateway), ("proxy", self.proxy), ("git", self.relay)):
            if server is not None:
                server.admission = admission
                server.turned_away = partial(self._turned_away, name)

    def _turned_away(self, listener: str, peer: str) -> None:
        self.refusals.count(listener, "too many connections", peer=peer)

    def _relay(self, address: tuple[str, int], credential: GitCredential) -> GitRelay:
        relay = GitRelay(
            address,
            runs=self.relay_run,
            credential=credential,
            log=self.git_log,
            spent=self.ledger.spend,
        )
        relay.unattributed = partial(self._unattributed, "git")
        return relay

    def _unattributed(self, listener: str, cause: str, peer: str, detail: str) -> None:
        self.refusals.count(listener, cause, peer=peer, detail=detail)

    def learn(self, told: RunToken) -> None:
        """Serve a run the cluster told of; one served already is left as it is.

        Raises:
            BrokerError: what no run may be registered with, a run id the ledger knows
                with another token (a deleted run's Secret made again is no new run), or a
                token another run has (one token, one run: whose would it spend?).
        """
        checked(told.run_id, told.budget_usd, told.allow)
        folder = self.folder / RUNS / told.run_id
        # No socket here: the run's folder stands in for it in the ledger's row.
        entry = RunEntry(
            told.run_id,
            told.token_sha256,
            told.budget_usd,
            told.allow,
            folder,
            folder,
            told.allow_api_fetch,
        )
        with self._lock:
            served = self.runs.get(told.run_id)
            kept = self.unlisted.pop(told.run_id, None)
            again = served is not None and served.entry.token_sha256 == told.token_sha256
            resumed = kept is not None and kept.token_sha256 == told.token_sha256
            if kept is not None and not resumed:  # its Secret now holds another token
                self.ledger.revoke(told.run_id)
            if not (again or resumed):
                if self.ledger.known(told.run_id):
                    raise BrokerError(text("broker.token_mismatch", run=told.run_id))
                if self.ledger.run_of(told.token_sha256) is not None:
                    raise BrokerError(text("broker.token_reused"))
                self.ledger.register(entry)
        self._relayed(told)
        if again:
            return
        self._serve(kept if resumed and kept is not None else entry)
        self.line(f"run {told.run_id}: serving its token")

    def sync(self, told: list[RunToken]) -> None:
        """The cluster's whole list: the runs not on it revoked, the new ones served (one that
        cannot be is said on stderr and left out: never a reason to serve no other)."""
        listed = {run.run_id for run in told}
        with self._lock:
            gone = [run_id for run_id in [*self.runs, *self.unlisted] if run_id not in listed]
        for run_id in gone:
            self.revoke(run_id)
            self.line(f"run {run_id}: no Secret any more; its token is revoked")
        for run in told:
            try:
                self.learn(run)
            except FlowerboxError as exc:
                self.line(f"run {run.run_id}: {exc}")

    def revoke(self, run_id: str) -> bool:
        with self._lock:
            served = self.runs.get(run_id)
            if served is not None:
                self.tokens.pop(served.entry.token_sha256, None)
            self.relayed.pop(run_id, None)
            unlisted = self.unlisted.pop(run_id, None) is not None
        if unlisted:
            self.ledger.revoke(run_id)
            return True
        return super().revoke(run_id)

    def running(self, run_ids: frozenset[str]) -> None:
        """The runs whose token a running Job holds (flowerbox.broker.tokens.Holders): a
        run's token is refused while it has none (the run ended, or was stopped), and
        served again once one runs (a resume, a deliver)."""
        with self._lock:
            started, ended = run_ids - self.live, self.live - run_ids
            self.live = run_ids
        for run_id in sorted(started):
            self.line(f"run {run_id}: a Job holding its token runs; its token is served")
        for run_id in sorted(ended):
            self.line(f"run {run_id}: no Job holding its token runs; its token is refused")

    def outcomes(self) -> dict[tuple[str, ...], int]:
        """The ledger's, and the refusals counted but not in it yet (a second's worth)."""
        counts = super().outcomes()
        for (listener, said), count in self.refusals.pending().items():
            key = (listener, REFUSED, cause(said))
            counts[key] = counts.get(key, 0) + count
        return counts

    def served(self) -> list[tuple[ServedRun, bool]]:
        """The runs whose Secret is listed; live: a running Job holds its token."""
        with self._lock:
            return [(run, run_id in self.live) for run_id, run in self.runs.items()]

    def relay_run(self, token: str) -> RelayRun | None:
        """The git relay's `runs`: the live run `token` is served for, with the repository
        its Secret named; None for any other token, or a run created with no repository."""
        found = self.serving(token)
        if isinstance(found, Unserved):
            return None
        with self._lock:
            return self.relayed.get(found.entry.run_id)

    def _relayed(self, told: RunToken) -> None:
        """What the relay needs of a run served, kept apart from the ledger (which has no
        place for it), and so learned again from its Secret after a restart; as it was first
        learned: a Secret edited later changes neither the repository nor the image."""
        if not told.repo:
            return
        image, namespace = told.image or "unknown", told.namespace or "unknown"
        network = allowlist(told.allow)
        run = RelayRun(told.run_id, told.repo, image, namespace, network, told.deliver_branch)
        with self._lock:
            self.relayed.setdefault(told.run_id, run)

    def serving(self, token: str) -> ServedRun | Unserved:
        """The run `token` is served for, or why there is none (for its refusal)."""
        found = token_hash(token)
        with self._lock:
            run = self.tokens.get(found)
            live = run is not None and run.entry.run_id in self.live
        if run is not None and not run.revoked.is_set():
            if live:
                return run
            why = text("broker.why_no_job", run=run.entry.run_id)
            return Unserved(run.entry.run_id, why, "refused: no running Job")
        ended = self.ledger.run_of(found)
        if ended is None:
            why = text("broker.why_unknown_token")
            return Unserved(UNATTRIBUTED, why, "refused: unknown token")
        with self._lock:
            unlisted = ended in self.unlisted
        if unlisted:
            why = text("broker.why_not_listed", run=ended)
            return Unserved(ended, why, "refused: not listed yet")
        why = text("broker.why_ended", run=ended)
        return Unserved(ended, why, "refused: token revoked")

    def line(self, text: str) -> None:
        """A line of the broker's own (never dropped: the requests' lines are)."""
        Gateway.line(self.gateway, f"broker: {text}")

    def serve_forever(self) -> None:
        for server in self._others():
            threading.Thread(target=server.serve_forever, args=(0.2,), daemon=True).start()
        self.gateway.serve_forever(poll_interval=0.2)

    def shutdown(self) -> None:
        """Stop serving (from another thread): nothing is revoked, the ledger stays."""
        for server in self._others():
            server.shutdown()
        self.gateway.shutdown()

    def close(self) -> None:
        for server in (self.gateway, *self._others()):
            server.server_close()
        self.refusals.flush()
        self.git_log.close()
        super().close()

    def _others(self) -> list[socketserver.BaseServer]:
        """The listeners besides the API's, served on threads of their own."""
        return [self.proxy] if self.relay is None else [self.proxy, self.relay]

    def _serve(self, entry: RunEntry) -> None:
        run = self._served(entry)
        with self._lock:
            self.runs[entry.run_id] = run
            self.tokens[entry.token_sha256] = run


class TokenGateway(Gateway, OnTcp):
    """The gateway's request path on TCP; each request's tenant is its token's run."""

    settle_before_end = True  # as a run's gateway in the local broker: the ledger first

    def __init__(self, broker: ClusterBroker, address: tuple[str, int]) -> None:
        self.broker = broker
        self.tcp_address = address
        nobody = Meter(None, broker.prices)  # no request is charged to it: `tenant` decides
        where = Path(":".join(map(str, address)))  # a name only: OnTcp makes no file
        super().__init__(where, credentials=broker.credentials, meter=nobody)
        self.redactor = broker.redactor  # it knows the run tokens too

    def tenant(self, incoming: Incoming) -> Tenant:
        try:
            token = presented_token(incoming)
        except ValueError as exc:
            why = text("broker.why_two_credentials", problem=exc)
            return self._refused(Unserved(UNATTRIBUTED, why, "refused: two credentials"), incoming)
        if token is None:
            why = text("broker.why_no_token")
            return self._refused(Unserved(UNATTRIBUTED, why, "refused: no token"), incoming)
        found = self.broker.serving(token)
        if isinstance(found, Unserved):
            return self._refused(found, incoming)
        charge = Charge(found, self.broker.team, self.broker.ledger)
        return Tenant(charge, charge.record, fetch=found.fetch)

    def credential_kind(self, sent: set[str]) -> str:
        return "run token"  # the only kind `tenant` lets through

    def malformed(self, **fields: Any) -> None:
        cause = f"malformed ({fields.get('status')})"
        peer = str(fields.get("peer", "-"))
        self.broker.refusals.count("api", cause, peer=peer, detail=str(fields.get("note", "")))

    def line(self, text: str) -> None:
        """Rate-limited (flowerbox.broker.refusals.LineBudget): a flood writes no log."""
        allowed, dropped = self.broker.log_budget.take()
        if allowed:
            said = f" ({dropped} lines before this one were dropped: too many)" if dropped else ""
            super().line(text + said)

    def service_actions(self) -> None:
        super().service_actions()
        self.broker.refusals.due()

    def upstream_answered(self, seconds: float) -> None:
        self.broker.upstream_latency(seconds)

    def _refused(self, unserved: Unserved, incoming: Incoming) -> Tenant:
        """Answered 401 before anything else (never forwarded), counted."""
        message = f"flowerbox broker: {unserved.why}"
        refusal = Refusal(401, "authentication_error", message, unserved.note)
        counted = partial(
            self.broker.refusals.count,
            "api",
            unserved.note,
            peer=incoming.peer,
            run_id=unserved.run_id,
            detail=unserved.why,
        )
        return Tenant(Meter(None, self.broker.prices), lambda **fields: counted(), refusal)


class TokenProxy(EgressProxy, OnTcp):
    """The egress proxy on TCP: each request held to its token's run's allowlist."""

    def __init__(self, broker: ClusterBroker, address: tuple[str, int]) -> None:
        self.broker = broker
        self.tcp_address = address
        where = Path(":".join(map(str, address)))  # a name only: OnTcp makes no file
        super().__init__(where, policy=NO_EGRESS, log=_Counted(broker.refusals))

    def rules(self, incoming: Incoming) -> Rules:
        try:
            token = proxy_token(incoming)
        except ValueError as exc:
            return Rules(NO_EGRESS, self.log, text("broker.why_proxy_two", problem=exc))
        if token is None:
            why = text("broker.why_proxy_no_token")
            return Rules(NO_EGRESS, self.log, why)
        found = self.broker.serving(token)
        if isinstance(found, Unserved):
            return Rules(NO_EGRESS, _Counted(self.broker.refusals, found.run_id), found.why)
        return Rules(found.policy or NO_EGRESS, found.egress_log)


class _Counted:
    """The proxy's log of what names no live run: each record a refusal count."""

    def __init__(self, refusals: Refusals, run_id: str = UNATTRIBUTED) -> None:
        self.refusals = refusals
        self.run_id = run_id

    def record(self, **fields: Any) -> None:
        reason = str(fields.get("reason", ""))
        cause = "malformed" if reason.startswith("bad request:") else "refused 407"
        peer = str(fields.get("peer", "-"))
        self.refusals.count("proxy", cause, peer=peer, run_id=self.run_id, detail=reason)
