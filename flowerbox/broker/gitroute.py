"""Where a request to the git relay may go, decided from its method and target alone, and
which pushes a run may make. Pure functions: the relay (flowerbox.broker.gitrelay) calls
them, tests call them as they are.

    where = route("GET", "/github.com/acme/app.git/info/refs?service=git-upload-pack")
    where.repository            # ("github.com", "/acme/app.git")
    serves(where, "https://github.com/acme/app.git")      # the run's own repository?
    push_refusal(head, delivery_ref(run_id))  # None, or why the push is refused

A run's git is told `url.http://<broker>:8081/.insteadOf https://` (flowerbox.kube.render), so
`https://HOST/PATH` reaches the relay as `/HOST/PATH/...`. Only git's smart HTTP is routed:
`GET .../info/refs?service=git-upload-pack|git-receive-pack` and `POST .../git-upload-pack|
git-receive-pack`. Dumb HTTP (objects/, HEAD, info/refs without a service), other queries,
other methods and any path that is not plain segments (no `.`/`..`, no escapes, no userinfo)
are refused here, never forwarded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from flower import text
from flowerbox.broker.pktline import REPORTS, PushHead
from flowerbox.wire import DELIVERY_BRANCH, DELIVERY_REF

__all__ = ["SERVICES", "Refusal", "Route", "delivery_ref", "push_refusal", "route", "serves"]

SERVICES = ("git-upload-pack", "git-receive-pack")
PUSH = "git-receive-pack"
_HOST = re.compile(r"[a-z0-9][a-z0-9.-]{0,252}(?::[0-9]{1,5})?")
_SEGMENT = re.compile(r"[A-Za-z0-9._~-]{1,255}")
_ADVERTISE = "/info/refs"


@dataclass(frozen=True)
class Refusal:
    """A request the relay answers itself: `status` and a reason the client may read."""

    status: int
    reason: str


@dataclass(frozen=True)
class Route:
    """A smart-HTTP request: the remote's `host` (host[:port] as in the URL), the
    repository's `path` on it, the git `service`, and whether it is the ref advertisement."""

    host: str
    path: str
    service: str
    advertise: bool

    @property
    def repository(self) -> tuple[str, str]:
        return self.host, self.path

    @property
    def upstream_target(self) -> str:
        """The request target on the remote, under its origin."""
        if self.advertise:
            return f"{self.path}{_ADVERTISE}?service={self.service}"
        return f"{self.path}/{self.service}"

    @property
    def pushes(self) -> bool:
        return self.service == PUSH and not self.advertise


def route(method: str, target: str) -> Route | Refusal:
    """The route of a request, or why the relay does not serve it."""
    if method not in ("GET", "POST"):
        return Refusal(405, text("relay.method", method=method))
    path, _, query = target.partition("?")
    if method == "GET":
        if not path.endswith(_ADVERTISE) or query not in {f"service={s}" for s in SERVICES}:
            return Refusal(404, text("relay.not_smart"))
        path, service = path.removesuffix(_ADVERTISE), query.removeprefix("service=")
    else:
        path, _, service = path.rpartition("/")
        if query or service not in SERVICES:
            return Refusal(404, text("relay.not_service"))
    host, _, rest = path.removeprefix("/").partition("/")
    segments = rest.split("/")
    if (
        not path.startswith("/")
        or not _HOST.fullmatch(host)
        or not all(_SEGMENT.fullmatch(s) and s not in (".", "..") for s in segments)
    ):
        return Refusal(404, text("relay.not_repo"))
    return Route(host, "/" + rest, service, method == "GET")


def serves(where: Route, repo: str) -> bool:
    """Whether `where` is the repository `repo` (the https URL a run was created with): the
    same host (letter case aside) and the same path (a trailing slash aside)."""
    url = urlsplit(repo)
    if url.scheme != "https" or url.username or url.password or url.query or url.fragment:
        return False
    return (url.netloc.lower(), url.path.rstrip("/")) == (where.host, where.path.rstrip("/"))


def delivery_ref(run_id: str, *, branch: bool = False) -> str:
    """The one ref a run may push: `refs/flowerbox/<run-id>`, where no forge's CI runs (it
    runs on branch and tag pushes); `refs/heads/flowerbox/<run-id>` for a run made with
    --deliver-branch. Its run id in it: a run never moves another run's delivery."""
    return (DELIVERY_BRANCH if branch else DELIVERY_REF).format(run_id=run_id)


def push_refusal(head: PushHead, own: str) -> str | None:
    """Why a push is refused, or None: a run pushes its own ref (`own`: its delivery_ref)
    alone, never deletes it, carries no push options (a forge acts on some: GitLab's
    `merge_request.*` can merge), and asks for the remote's report (without it the relay
    never learns that the ref was updated, so the push would land with no provenance note)."""
    if not head.commands:
        return None  # git's probe: the remote updates nothing
    if len(head.commands) != 1:
        names = ", ".join(c.ref for c in head.commands)
        return text("relay.many_refs", count=len(head.commands), names=names, own=own)
    command = head.commands[0]
    if command.ref != own:
        return text("relay.not_own", ref=command.ref, own=own)
    if command.deletes:
        return text("relay.deletes", own=own)
    if head.options:
        return text("relay.push_options")
    if not REPORTS & set(head.capabilities):
        return text("relay.no_report")
    return None
