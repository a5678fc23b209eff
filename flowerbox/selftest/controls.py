"""The self-test's negative controls: boxes broken on purpose, so each probe is seen to fail.

    control = control_named("engine_socket")
    spec = control.spec(spec, where)           # the gateway's side (the proxy's allowlist)
    kwargs = control.agent(kwargs, where)      # the agent's container

`ALL_WEAK` (`flowerbox selftest --negative-control`) breaks everything at once: every probe
must FAIL in it. Each of `VARIANTS` (`--weaken NAME`) breaks exactly one property of the real
box and names the probes that must then FAIL; all the others must still PASS
(tests/docker/test_selftest.py asserts both on the engine, docs/selftest.md has the table). A
probe that PASSes in its own variant cannot fail, so it proves nothing; a probe that FAILs in
another's is not testing what it says. A few properties are seen by more than one probe (a
network of the box's own is seen by its interfaces, TCP, UDP and routes): those variants name
each of them.

Every variant stays on this machine: a network way out is the host's network (its loopback is
where the probe server listens) or a namespace the caller made (`joined_network:CONTAINER`),
never a bridge (whose addresses are private-range).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from flower import text as said
from flowerbox.box.spec import TMPFS, BoxSpec
from flowerbox.errors import ConfigError
from flowerbox.wire import SOCKET_DIR_IN_BOX

DOCKER_SOCKET = "/var/run/docker.sock"
ODD_SOCKET = "/srv/engine.sock"  # where nobody looks for an engine
ALLOW_ALL_SECCOMP = json.dumps({"defaultAction": "SCMP_ACT_ALLOW"})
SPARE_GID = 4242  # an extra group when the engine's socket has none to borrow
SPARE_LOOPBACK = "127.0.0.2"

Kwargs = dict[str, Any]


@dataclass(frozen=True)
class Where:
    """What a control needs to know about this box and this engine (host paths)."""

    workspace: Path
    protected: tuple[Path, ...]  # the protected paths that exist
    docker_socket: str  # the engine's socket on the host
    denied_name: str  # the name the proxy probe asks for

    @property
    def parents(self) -> tuple[Path, ...]:
        """The folders between a protected path and the workspace root (root excluded)."""
        found: list[Path] = []
        for path in self.protected:
            for parent in path.relative_to(self.workspace).parents[:-1]:
                if self.workspace / parent not in found:
                    found.append(self.workspace / parent)
        return tuple(found)


def _same(kwargs: Kwargs, where: Where) -> Kwargs:
    return kwargs


def _same_spec(spec: BoxSpec, where: Where) -> BoxSpec:
    return spec


@dataclass(frozen=True)
class Control:
    name: str
    breaks: str  # the property, in words
    fails: frozenset[str]  # the probes and host-boundary checks that must FAIL (ALL_WEAK: below)
    agent: Callable[[Kwargs, Where], Kwargs] = field(default=_same)
    spec: Callable[[BoxSpec, Where], BoxSpec] = field(default=_same_spec)
    # A weakening gVisor does not take from the engine (measured, runsc 20221219): it loads
    # no seccomp profile of the engine's (its kernel serves the calls, itself under runsc's
    # own filter), sets no_new_privs on every process, drops CAP_NET_RAW (no --net-raw) and
    # has no network but its loopback. Under runsc such a variant leaves gVisor to break it.
    runc_only: bool = False

    def under(self, runtime: str) -> Control:
        """This control for a box that asked for `runtime`: a runc_only one, under runsc,
        runs the box on runc, so the kernel probe FAILs too."""
        if runtime != "runsc" or not self.runc_only:
            return self
        agent = self.agent
        return replace(
            self,
            breaks=f"{self.breaks}, on runc (gVisor does not take it from the engine)",
            fails=self.fails | {"kernel"},
            agent=lambda kwargs, where: _on_runc(agent(kwargs, where), where),
        )


# --- the pieces: one loosening each ----------------------------------------------------------


def _without_binds(kwargs: Kwargs, targets: set[Path]) -> Kwargs:
    """The agent's kwargs without the mounts whose place in the box is one of `targets`."""
    wanted = {str(path) for path in targets}
    volumes = {h: b for h, b in kwargs["volumes"].items() if b["bind"] not in wanted}
    return {**kwargs, "volumes": volumes}


def _with_socket(kwargs: Kwargs, where: Where, *, at: str) -> Kwargs:
    volumes = {**kwargs["volumes"], where.docker_socket: {"bind": at, "mode": "rw"}}
    return {**kwargs, "volumes": volumes}


def _host_network(kwargs: Kwargs) -> Kwargs:
    """The host's network; the relay's loopback ports move to free ones (they are the host's
    loopback now, where another box may listen on the same)."""
    moves = {port: _free_port() for port in _relay_ports(kwargs["command"])}
    return {
        **kwargs,
        "network_mode": "host",
        "command": [_moved(arg, moves) for arg in kwargs["command"]],
        "environment": {k: _moved(v, moves) for k, v in kwargs["environment"].items()},
    }


def _relay_ports(command: list[str]) -> list[int]:
    """The loopback ports of `--relay 127.0.0.1:PORT=SOCKET` arguments."""
    return [
        int(arg.split("=", 1)[0].rpartition(":")[2])
        for arg in command
        if arg.startswith("127.0.0.1:") and f"={SOCKET_DIR_IN_BOX}/" in arg
    ]


def _moved(text: str, moves: dict[int, int]) -> str:
    for old, new in moves.items():
        text = text.replace(f"127.0.0.1:{old}", f"127.0.0.1:{new}")
    return text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def engine_gid(path: str) -> int:
    """The group of the engine's socket (`docker`, usually): the group that opens it."""
    try:
        return os.stat(path).st_gid
    except OSError:
        return SPARE_GID


def _allowing(spec: BoxSpec, *entries: str, mapped: str | None = None) -> BoxSpec:
    """The proxy's allowlist plus `entries`; `mapped` resolves to the host's loopback in the
    gateway's hosts file, so nothing is looked up."""
    hosts = spec.egress_hosts if mapped is None else (*spec.egress_hosts, (mapped, "127.0.0.1"))
    return replace(spec, allow=(*spec.allow, *entries), egress_hosts=hosts)


def _protection_binds(where: Where) -> set[Path]:
    """Every mount that protects something in the workspace: the protected paths, the folders
    above them, and a `.git` of the box's own."""
    return {*where.protected, *where.parents, where.workspace / ".git"}


# --- the all-weak control ---------------------------------------------------------------------


def weaken(kwargs: Kwargs, where: Where) -> Kwargs:
    """Every loosening at once: root, default capabilities, no seccomp and no
    no-new-privileges, a writable root with an executable /tmp, no pids limit, the host's
    network, the engine's socket, and nothing in the workspace protected."""
    weak = {k: v for k, v in kwargs.items() if k not in ("cap_drop", "tmpfs", "pids_limit")}
    weak = _without_binds(weak, _protection_binds(where))
    weak = _with_socket(_host_network(weak), where, at=DOCKER_SOCKET)
    return {
        **_on_runc(weak, where),
        "user": "0:0",
        "security_opt": ["seccomp=unconfined"],
        "read_only": False,
    }


def permissive(spec: BoxSpec, where: Where) -> BoxSpec:
    """A proxy that lets the probes' loopback targets and denied name through, in a box
    whose spec claims gVisor (weaken runs it on runc)."""
    spec = _allowing(spec, "127.0.0.1", "localhost", where.denied_name, mapped=where.denied_name)
    return _claims_runsc(spec, where)


# The host-boundary checks a box can fail: the one whose plant lands in the user's `.git`
# when the box has it. The others judge the host's own code, which no box setting changes
# (tests/flowerbox/test_hostboundary.py feeds them a host that trusts the workspace instead).
ALL_WEAK_HOST_FAILS = frozenset({"git_hook_redirect"})
ALL_WEAK = Control(
    "all_weak",
    "everything at once",
    frozenset(),  # every probe: the caller fills in its probe list
    agent=weaken,
    spec=permissive,
)

# --- one property each ------------------------------------------------------------------------


def _set(**changes: Any) -> Callable[[Kwargs, Where], Kwargs]:
    def change(kwargs: Kwargs, where: Where) -> Kwargs:
        return {**kwargs, **changes}

    return change


def _without(*keys: str) -> Callable[[Kwargs, Where], Kwargs]:
    def change(kwargs: Kwargs, where: Where) -> Kwargs:
        return {k: v for k, v in kwargs.items() if k not in keys}

    return change


def _on_runc(kwargs: Kwargs, where: Where) -> Kwargs:
    """The host's kernel, whatever the spec asked for: a gVisor box's limits as runc takes
    them (its RLIMIT_NPROC, the agent's limit, back as the engine's pids limit)."""
    nproc = [limit["soft"] for limit in kwargs.get("ulimits", []) if limit["name"] == "nproc"]
    runc = {k: v for k, v in kwargs.items() if k != "ulimits"}
    if nproc and "pids_limit" in runc:
        runc["pids_limit"] = nproc[0]
    return {**runc, "runtime": "runc"}


def _claims_runsc(spec: BoxSpec, where: Where) -> BoxSpec:
    return replace(spec, runtime="runsc")


def _extra_group(kwargs: Kwargs, where: Where) -> Kwargs:
    return {**kwargs, "group_add": [str(engine_gid(where.docker_socket))]}


def _allow_all_seccomp(kwargs: Kwargs, where: Where) -> Kwargs:
    return {**kwargs, "security_opt": [*kwargs["security_opt"], f"seccomp={ALLOW_ALL_SECCOMP}"]}


def _odd_socket(kwargs: Kwargs, where: Where) -> Kwargs:
    return _with_socket(kwargs, where, at=ODD_SOCKET)


def _engine_reachable(kwargs: Kwargs, where: Where) -> Kwargs:
    return _extra_group(_allow_all_seccomp(_odd_socket(kwargs, where), where), where)


def _protected_writable(kwargs: Kwargs, where: Where) -> Kwargs:
    return _without_binds(kwargs, set(where.protected))


def _parents_writable(kwargs: Kwargs, where: Where) -> Kwargs:
    """The folders above protected paths, `.git` aside (git_redirects' own: a box's `.git`)."""
    return _without_binds(kwargs, set(where.parents) - {where.workspace / ".git"})


def _users_gitdir(kwargs: Kwargs, where: Where) -> Kwargs:
    """The box's own gitdir taken away: `.git` is the user's, seen through the workspace."""
    return _without_binds(kwargs, {where.workspace / ".git"})


def _host_net(kwargs: Kwargs, where: Where) -> Kwargs:
    return _host_network(kwargs)


def _allow_name(spec: BoxSpec, where: Where) -> BoxSpec:
    """The name on the allowlist, resolving (hosts file) to 127.0.0.2: a loopback address
    nothing listens on and the loopback probe does not ask for, listed so the proxy connects
    (a listed name resolving to an unlisted loopback address is still refused)."""
    spec = _allowing(spec, where.denied_name, SPARE_LOOPBACK)
    return replace(spec, egress_hosts=(*spec.egress_hosts, (where.denied_name, SPARE_LOOPBACK)))


def _allow_loopback(spec: BoxSpec, where: Where) -> BoxSpec:
    return _allowing(spec, "127.0.0.1", "localhost")


def _variant(name: str, breaks: str, *fails: str, **how: Any) -> Control:
    return Control(name, breaks, frozenset(fails), **how)


EXEC_TMPFS = {"/tmp": TMPFS.replace("noexec", "exec")}  # noexec is docker's default

VARIANTS: dict[str, Control] = {
    control.name: control
    for control in (
        _variant(
            "root_user",
            # uid 0 without capabilities cannot even open the user's 0700 socket folder
            "runs as uid 0, with CapAdd DAC_OVERRIDE (which root needs to reach the gateway)",
            "identity",
            "capabilities",
            "setuid",  # su, as root, runs with that capability
            agent=_set(user="0:0", cap_add=["DAC_OVERRIDE"]),
        ),
        _variant("extra_group", "the engine's group added", "identity", agent=_extra_group),
        _variant("cap_add", "CapAdd CHOWN", "capabilities", agent=_set(cap_add=["CHOWN"])),
        _variant(
            # In the bounding set only: a non-root process cannot use it (no ambient
            # capabilities, no-new-privileges), so raw_socket rightly still PASSes.
            "cap_net_raw",
            "CapAdd NET_RAW",
            "capabilities",
            agent=_set(cap_add=["NET_RAW"]),
            runc_only=True,
        ),
        _variant(
            "new_privileges",
            "no no-new-privileges (su, setuid root, gains root)",
            "no_new_privs",
            "setuid",
            agent=_set(security_opt=[]),
            runc_only=True,
        ),
        _variant(
            "seccomp_allow_all",
            'the seccomp profile {"defaultAction": "SCMP_ACT_ALLOW"}',
            "seccomp",
            agent=_allow_all_seccomp,
            runc_only=True,
        ),
        _variant("writable_root", "a writable root", "read_only_root", agent=_set(read_only=False)),
        _variant("tmp_exec", "an executable /tmp", "read_only_root", agent=_set(tmpfs=EXEC_TMPFS)),
        _variant(
            "engine_socket",
            f"the engine's socket at {ODD_SOCKET}",
            "docker_socket",
            agent=_odd_socket,
        ),
        _variant(
            "engine_reachable",
            "the attack review's box: the socket at an odd path, its group, an allow-all seccomp",
            "identity",
            "seccomp",
            "docker_socket",
            "survivor",
            agent=_engine_reachable,
            runc_only=True,
        ),
        _variant(
            "host_network",
            "the host's network",
            "interfaces",
            "direct_tcp",
            "udp",
            "ipv6_route",
            agent=_host_net,
            runc_only=True,
        ),
        _variant(
            "protected_writable",
            "the protected paths not mounted read-only",
            "protected_paths",
            agent=_protected_writable,
        ),
        _variant(
            "parents_writable",
            "the folders above protected paths renamable (.git aside)",
            "protected_parents",
            agent=_parents_writable,
        ),
        _variant(
            "users_gitdir",
            "the user's own .git in the box instead of a shadow of it (a plain folder there)",
            "git_redirects",
            "protected_parents",  # .git, above .git/hooks, is then a folder like any other
            "git_hook_redirect",  # the commondir plant reaches it: your git status runs a hook
            agent=_users_gitdir,
        ),
        _variant(
            "no_pids_limit",
            "no pids limit (nor, under gVisor, the RLIMIT_NPROC that stands for it)",
            "pids_limit",
            agent=_without("pids_limit", "ulimits"),
        ),
        _variant(
            "proxy_allows_name",
            "the denied name on the allowlist",
            "proxy_denied_name",
            spec=_allow_name,
        ),
        _variant(
            "claims_runsc",
            "a box whose spec says gVisor (runsc), run on runc: the host's kernel",
            "kernel",
            agent=_on_runc,
            spec=_claims_runsc,
        ),
        _variant(
            "proxy_allows_loopback",
            "the host's loopback on the allowlist",
            "proxy_internal_targets",
            spec=_allow_loopback,
        ),
    )
}
JOINED = "joined_network"


def _joined(container: str) -> Callable[[Kwargs, Where], Kwargs]:
    def change(kwargs: Kwargs, where: Where) -> Kwargs:
        return {**kwargs, "network_mode": f"container:{container}"}

    return change


def control_named(text: str) -> Control:
    """A variant by its name, or `joined_network:CONTAINER`: the box joins the network
    namespace of CONTAINER, which the caller made with a way out to another namespace (a
    bridge's shape without its private-range addresses; tests/docker/test_selftest.py builds
    one from a veth pair and loopback-range addresses).

    Raises:
        ConfigError: an unknown name; the message lists the known ones.
    """
    name, _, argument = text.partition(":")
    if name == JOINED and argument:
        return _variant(
            JOINED,
            f"the network namespace of {argument}: a route out to another namespace",
            "interfaces",
            "direct_tcp",
            "udp",
            agent=_joined(argument),
            runc_only=True,
        )
    if name in VARIANTS and not argument:
        return VARIANTS[name]
    raise ConfigError(
        said(
            "selftest.weaken_unknown", value=repr(text), variants=", ".join(VARIANTS), joined=JOINED
        )
    )
