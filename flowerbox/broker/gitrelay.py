"""The broker's git relay: the only holder of the git credential, between a run's git
(an agent's clone, a deliver Job's push) and the run's own repository.

    relay = GitRelay(("0.0.0.0", 8081), runs=lookup, credential=cred, log=JsonLines(path))
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    ...
    relay.shutdown(); relay.server_close()

`runs(token)` is the broker's: the live run a token belongs to (its id, the repository it
was created with, and what its provenance note says of it), or None; so is `spent(run_id)`:
what the ledger says the run spent, for the note. Each request, read strictly
(flowerbox.sidecar.http), must carry exactly one `Authorization: Bearer <token>` of a live
run (else 401), be git's smart HTTP for that run's repository (flowerbox.broker.gitroute:
else 403/404/405), and, for a push, name the run's one ref alone (`refs/flowerbox/<run-id>`,
where no forge's CI runs; `refs/heads/flowerbox/<run-id>` if the run was made so), without
deleting it, and ask for the remote's report (the command list is read and judged before a
byte goes upstream: flowerbox.broker.pktline). Then it goes to the remote with the
credential as Basic auth and none of the client's: only `_FORWARDED` headers pass. The
remote's answer comes back with its body and `_RETURNED` headers only; an error, a redirect
or an unreachable remote is answered by the relay in a line of its own that never holds the
credential. A body is bounded (`body_limit`): past a Content-Length over it the request is
refused at once; a chunked body is cut where it passes it (the remote then has an
incomplete pack, which git never applies).

After a push the remote reported updating the run's branch (its report-status answer, read
as it passes, and to its end when the client has hung up: `ok <the run's ref>` and nothing
else counts), the relay notes the push's new commits under
`refs/notes/flowerbox` upstream, with the credential (flowerbox.broker.gitnotes). That comes
after the client's answer and never changes it.

Each decision is one JSON line in `log`: decision (allow/refuse), status, run, repository,
service, refs (for a push) and the reason; and each note one more, `note` (written, with
`commits` and `capped`; or failed, with the reason); never a token or the credential.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import socket
import socketserver
import ssl
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from itertools import chain
from typing import Any
from urllib.parse import urlsplit

import h11

from flower import text
from flowerbox.broker.gitnotes import CAP, Upstream, write_notes
from flowerbox.broker.gitroute import Refusal, Route, delivery_ref, push_refusal, route, serves
from flowerbox.broker.pktline import (
    Command,
    PushHead,
    Status,
    read_push,
    report,
    unsafe_capability,
)
from flowerbox.errors import BadRequest, BrokerError, ProvenanceError
from flowerbox.note import Provenance, Spend
from flowerbox.sidecar.admission import Admitted, peer_of
from flowerbox.sidecar.http import Incoming, RequestReader, linger_close
from flowerbox.sidecar.proxy import JsonLines

__all__ = [
    "GIT_KEYS",
    "GitCredential",
    "GitRelay",
    "RelayRun",
    "RunLookup",
    "SpendLookup",
    "git_credential",
]

BODY_LIMIT = 256 << 20  # a run's branch, new objects only
MAX_HEADERS = 64
TIMEOUT = 120.0  # a client's silence, the remote's silence
CHUNK = 64 * 1024
DEFAULT_USERNAME = "x-access-token"  # what GitHub and Gitea take with a token
GIT_KEYS = ("GIT_HOST", "GIT_TOKEN", "GIT_USERNAME", "GIT_BASE_URL")  # git_credential reads
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=")
_FORWARDED = frozenset(
    {"accept", "accept-language", "content-type", "content-encoding", "user-agent", "pragma"}
)
_RETURNED = ("content-type", "content-encoding", "cache-control", "expires", "pragma")
_CLOSE = ("connection", "close")


@dataclass(frozen=True)
class RelayRun:
    """A live run as the relay knows it: its id and the https URL of its repository; and,
    for its provenance note, its image, namespace and network as the broker has them (from
    the run's token Secret and its registration). `deliver_branch`: its one ref is a branch
    (the run was made with --deliver-branch)."""

    run_id: str
    repo: str
    image: str = "unknown"
    namespace: str = "unknown"
    network: str = "unknown"
    deliver_branch: bool = False

    @property
    def ref(self) -> str:
        """The one ref the run may push."""
        return delivery_ref(self.run_id, branch=self.deliver_branch)


RunLookup = Callable[[str], RelayRun | None]
SpendLookup = Callable[[str], Spend | None]


@dataclass(frozen=True)
class GitCredential:
    """The broker's git credential and the one remote host it is sent to. `origin` is where
    that host is reached (https://HOST unless set; tests set a loopback http server)."""

    host: str
    token: str = field(repr=False)
    username: str = DEFAULT_USERNAME
    origin: str = ""

    @property
    def base(self) -> str:
        return (self.origin or f"https://{self.host}").rstrip("/")

    def authorization(self) -> str:
        pair = f"{self.username}:{self.token}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")

    def scrub(self, text: str) -> str:
        """`text` with the token (and its Basic form) replaced: what a client may be shown."""
        for secret in (self.authorization().removeprefix("Basic "), self.token):
            text = text.replace(secret, "[credential]")
        return text


def git_credential(values: Mapping[str, str], source: str) -> GitCredential | None:
    """The git credential among a credentials file's `values` (GIT_HOST, GIT_TOKEN,
    GIT_USERNAME, and GIT_BASE_URL: where GIT_HOST is reached when not at https://GIT_HOST,
    as a forge on another port or behind a mirror), or None when it holds no GIT_TOKEN: the
    broker then relays no git.

    Raises:
        BrokerError: a token without a host it is for, or a base URL that is no http(s) URL.
    """
    token = values.get("GIT_TOKEN", "")
    if not token:
        return None
    host = values.get("GIT_HOST", "").strip().lower()
    if not host or "/" in host or "@" in host:
        raise BrokerError(text("broker.git_no_host", source=source))
    origin = values.get("GIT_BASE_URL", "").strip()
    if origin and (urlsplit(origin).scheme not in ("http", "https") or "@" in origin):
        raise BrokerError(text("broker.git_base_url", source=source))
    username = values.get("GIT_USERNAME") or DEFAULT_USERNAME
    return GitCredential(host, token, username, origin=origin)


class GitRelay(Admitted, socketserver.TCPServer):
    """The relay's TCP server; `server_address` has the port it bound. Its connections are
    admitted per peer and in all (flowerbox.sidecar.admission); a refusal that names no run
    is given to `unattributed` (cause, peer, what the client is told) instead of `log`."""

    allow_reuse_address = True
    request_queue_size = 1024
    unattributed: Callable[[str, str, str], None] | None = None

    def __init__(
        self,
        address: tuple[str, int],
        *,
        runs: RunLookup,
        credential: GitCredential,
        log: JsonLines,
        spent: SpendLookup | None = None,
        body_limit: int = BODY_LIMIT,
        note_cap: int = CAP,
    ) -> None:
        self.runs = runs
        self.credential = credential
        self.log = log
        self.spent = spent
        self.body_limit = body_limit
        self.note_cap = note_cap
        origin = urlsplit(credential.base)
        self._tls = origin.scheme == "https"
        self._origin = (origin.hostname or "", origin.port or (443 if self._tls else 80))
        self._prefix = origin.path
        self._context = ssl.create_default_context() if self._tls else None
        super().__init__(address, _Connection)

    def connect(self) -> http.client.HTTPConnection:
        """A new connection to the credential's remote."""
        host, port = self._origin
        if self._context is not None:
            return http.client.HTTPSConnection(host, port, timeout=TIMEOUT, context=self._context)
        return http.client.HTTPConnection(host, port, timeout=TIMEOUT)

    def upstream(self, where: Route) -> str:
        return self._prefix + where.upstream_target


class _Connection(socketserver.BaseRequestHandler):
    """One client connection, one request (answered with `connection: close`)."""

    server: GitRelay
    request: socket.socket

    def handle(self) -> None:
        self.request.settimeout(TIMEOUT)
        reader = RequestReader(self.request)
        exchange: _Exchange | None = None
        try:
            incoming = reader.next_request()
            if incoming is not None:
                exchange = _Exchange(self.server, reader, incoming)
                exchange.run()
        except BadRequest as exc:
            if exchange is None:
                _Exchange.malformed(self.server, self.request, exc, peer_of(self.client_address))
            else:
                exchange.refuse(Refusal(exc.status, f"bad request: {exc}"))
        except (OSError, h11.LocalProtocolError):
            pass  # the client went away, or broke off mid-answer: nothing left to say
        linger_close(self.request)
        if exchange is not None and exchange.pushed is not None:
            exchange.pushed.note(self.server)


@dataclass
class _Pushed:
    """A push the relay forwarded: the run, where, its one command, and the remote's
    report as it passes on to the client."""

    run: RelayRun
    where: Route
    command: Command
    status: Status
    facts: dict[str, Any]

    def note(self, relay: GitRelay) -> None:
        """The provenance note, when the remote reported the run's branch updated; a
        failure is logged (the client has its answer already)."""
        if self.status.updated() != {self.command.ref}:
            return
        credential = relay.credential
        upstream = Upstream(credential.base + self.where.path, credential.authorization())
        spend = relay.spent(self.run.run_id) if relay.spent is not None else None
        provenance = Provenance(
            run=self.run.run_id,
            image=self.run.image,
            network=self.run.network,
            spend=spend or Spend(None),
            more=(("namespace", self.run.namespace),),
        )
        try:
            noted = write_notes(upstream, self.command, provenance, cap=relay.note_cap)
        except ProvenanceError as exc:
            relay.log.record(note="failed", reason=credential.scrub(str(exc)), **self.facts)
            return
        commits = len(noted.commits)
        relay.log.record(note="written", commits=commits, capped=noted.capped, **self.facts)


class _Exchange:
    """One request: authorized, routed, judged, forwarded, answered, logged."""

    def __init__(self, relay: GitRelay, reader: RequestReader, incoming: Incoming) -> None:
        self.relay = relay
        self.reader = reader
        self.incoming = incoming
        self.facts: dict[str, Any] = {"method": incoming.method}
        self.answered = False
        self.pushed: _Pushed | None = None

    def run(self) -> None:
        if len(self.incoming.headers) > MAX_HEADERS:
            self.refuse(Refusal(431, text("relay.header_fields", most=MAX_HEADERS)))
            return
        run = self._run()
        if isinstance(run, Refusal):
            self.refuse(run)
            return
        self.facts["run"] = run.run_id
        where = route(self.incoming.method, self.incoming.target)
        if isinstance(where, Refusal):
            self.refuse(where)
            return
        self.facts |= {"repo": f"{where.host}{where.path}", "service": where.service}
        if not serves(where, run.repo):
            self.refuse(Refusal(403, text("relay.other_repo", run=run.run_id, repo=run.repo)))
        elif where.host != self.relay.credential.host:
            self.refuse(Refusal(403, text("relay.no_credential", host=where.host)))
        elif where.advertise:
            self._forward(where, None)
        else:
            self._post(where, run)

    def _run(self) -> RelayRun | Refusal:
        values = [v for k, v in self.incoming.headers if k == "authorization"]
        if len(values) != 1 or not values[0].startswith("Bearer "):
            return Refusal(401, text("relay.no_bearer"))
        token = values[0].removeprefix("Bearer ").strip()
        usable = token and len(token) <= 512 and not set(token) - _TOKEN_CHARS
        found = self.relay.runs(token) if usable else None
        if found is None:
            return Refusal(401, text("relay.dead_token"))
        return found

    def _post(self, where: Route, run: RelayRun) -> None:
        length = self.incoming.header("content-length")
        if length is not None and int(length) > self.relay.body_limit:
            self.refuse(Refusal(413, text("broker.body_over", limit=self.relay.body_limit)))
            return
        body = self._bounded(self.reader.body_chunks())
        if where.pushes:
            if (self.incoming.header("content-encoding") or "identity") != "identity":
                self.refuse(Refusal(415, text("relay.encoded")))
                return
            head = read_push(body)
            self.facts["refs"] = [c.shown() for c in head.commands]
            refused = _capability_refusal(head) or push_refusal(head, run.ref)
            if refused is not None:
                self._reject(head, refused, body)
                return
            if head.commands:
                status = Status(head.capabilities)
                self.pushed = _Pushed(run, where, head.commands[0], status, self.facts)
            body = chain([head.read], body)
        self._forward(where, body, None if length is None else int(length))

    def _reject(self, head: PushHead, reason: str, rest: Iterator[bytes]) -> None:
        """A refused push, answered as receive-pack answers a refusing hook, so git shows
        `! [remote rejected] REF (reason)`; the rest of the body is read (and dropped) first,
        as a client sends it all before it reads an answer (a refusal it is still sending
        into would reach it as a reset, not as the answer)."""
        for _ in rest:
            pass
        answer = report(head, reason)
        if answer is None:
            self.refuse(Refusal(403, reason))
            return
        self.relay.log.record(decision="refuse", status=403, reason=reason, **self.facts)
        self.answered = True
        headers = [("content-type", "application/x-git-receive-pack-result")]
        headers += [("cache-control", "no-cache"), ("content-length", str(len(answer)))]
        self.reader.send(h11.Response(status_code=200, headers=[*headers, _CLOSE]))
        self.reader.send(h11.Data(data=answer))
        self.reader.send(h11.EndOfMessage())

    def _bounded(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        size = 0
        for chunk in chunks:
            size += len(chunk)
            if size > self.relay.body_limit:
                raise BadRequest(text("broker.body_over", limit=self.relay.body_limit), 413)
            yield chunk

    def _forward(
        self, where: Route, body: Iterator[bytes] | None, length: int | None = None
    ) -> None:
        headers = [(k, v) for k, v in self.incoming.headers if k in _FORWARDED]
        if where.service == "git-upload-pack":  # protocol v2 is for fetches only
            headers += [(k, v) for k, v in self.incoming.headers if k == "git-protocol"]
        headers.append(("authorization", self.relay.credential.authorization()))
        conn = self.relay.connect()
        try:
            try:
                self._send(conn, where, headers, body, length)
                response = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                host = self.relay.credential.host
                self.refuse(Refusal(502, text("relay.unreachable", host=host, problem=exc)))
                return
            try:
                with response:  # closed here: a client gone mid-answer keeps no socket open
                    self._answer(response)
            except (OSError, http.client.HTTPException) as exc:  # logged; the answer is cut
                self.refuse(Refusal(502, text("relay.broke_off", error=type(exc).__name__)))
        finally:
            conn.close()

    def _send(
        self,
        conn: http.client.HTTPConnection,
        where: Route,
        headers: list[tuple[str, str]],
        body: Iterator[bytes] | None,
        length: int | None,
    ) -> None:
        conn.putrequest(self.incoming.method, self.relay.upstream(where), skip_accept_encoding=True)
        for name, value in headers:
            conn.putheader(name, value)
        if body is None:
            conn.endheaders()
            return
        framing = ("content-length", str(length)) if length is not None else None
        conn.putheader(*(framing or ("transfer-encoding", "chunked")))
        conn.endheaders()
        for chunk in body:
            if chunk:
                conn.send(chunk if framing else b"%x\r\n%b\r\n" % (len(chunk), chunk))
        if framing is None:
            conn.send(b"0\r\n\r\n")

    def _answer(self, response: http.client.HTTPResponse) -> None:
        status = response.status
        if status != 200:
            self.refuse(_remote_refusal(status, self.facts.get("repo", "")))
            return
        headers = [(k, v) for k in _RETURNED if (v := response.getheader(k)) is not None]
        length = response.getheader("content-length")
        if length is not None and response.getheader("transfer-encoding") is None:
            headers.append(("content-length", length))
        headers.append(_CLOSE)
        self.answered = True
        self.relay.log.record(decision="allow", status=200, **self.facts)
        gone = self._pass_on(h11.Response(status_code=200, headers=headers), None)
        while data := response.read1(CHUNK):
            if self.pushed is not None:
                self.pushed.status.feed(data)
            gone = self._pass_on(h11.Data(data=data), gone)
        if gone is not None:
            raise gone
        self.reader.send(h11.EndOfMessage())

    def _pass_on(self, event: h11.Event, gone: OSError | None) -> OSError | None:
        """Send `event` to the client, unless it went away (`gone`). A push's answer is read
        to its end all the same: the remote's report decides the note, and a run must not
        suppress its note by hanging up before the report comes."""
        if gone is not None:
            return gone
        try:
            self.reader.send(event)
        except OSError as exc:
            if self.pushed is None:
                raise
            return exc
        return None

    def refuse(self, refusal: Refusal) -> None:
        """Logged, then answered in one plain-text line (unless an answer has begun)."""
        reason = self.relay.credential.scrub(refusal.reason)
        unattributed = self.relay.unattributed
        if unattributed is not None and "run" not in self.facts:
            unattributed(f"refused {refusal.status}", self.incoming.peer, reason)
        else:
            self.relay.log.record(
                decision="refuse", status=refusal.status, reason=reason, **self.facts
            )
        if self.answered:
            return
        self.answered = True
        data = f"flowerbox git relay: {reason}\n".encode()
        headers = [("content-type", "text/plain; charset=utf-8"), _CLOSE]
        headers.append(("content-length", str(len(data))))
        if refusal.status == 401:
            headers.append(("www-authenticate", 'Bearer realm="flowerbox"'))
        self.reader.send(h11.Response(status_code=refusal.status, headers=headers))
        self.reader.send(h11.Data(data=data))
        self.reader.send(h11.EndOfMessage())

    @staticmethod
    def malformed(relay: GitRelay, sock: socket.socket, exc: BadRequest, peer: str) -> None:
        """A head that cannot be read: answered by hand (h11 has no state to answer from)."""
        reason = f"bad request: {exc}"
        if relay.unattributed is not None:
            relay.unattributed(f"malformed ({exc.status})", peer, reason)
        else:
            relay.log.record(decision="refuse", status=exc.status, reason=reason)
        data = f"flowerbox git relay: bad request: {exc}\n".encode()
        head = (
            f"HTTP/1.1 {exc.status} {HTTPStatus(exc.status).phrase}\r\n"
            "content-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(data)}\r\nconnection: close\r\n\r\n"
        )
        with contextlib.suppress(OSError):
            sock.sendall(head.encode() + data)


def _capability_refusal(head: PushHead) -> str | None:
    """Why a push's capabilities are refused (push options in any spelling, a signed push,
    one the relay does not know), or None."""
    unsafe = unsafe_capability(head.capabilities)
    if unsafe is None:
        return None
    if unsafe.partition("=")[0] == "push-options":
        return text("relay.push_options")
    return text("relay.capability", capability=repr(unsafe))


def _remote_refusal(status: int, repo: str) -> Refusal:
    """The relay's own words for the remote's non-200 answer; its body and headers (a
    Location, a challenge) are not passed on."""
    if status in (401, 403):
        return Refusal(502, text("relay.remote_refused_credential", repo=repo, status=status))
    if status == 404:
        return Refusal(404, text("relay.not_found", repo=repo))
    if 300 <= status < 400:
        return Refusal(502, text("relay.redirected", status=status))
    return Refusal(502, text("relay.remote_status", status=status))
