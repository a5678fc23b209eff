"""The self-test's judges: one verdict per escape probe, from what the box reported (the
JSON lines of `python -m flowerbox.probes`) and what only the host can see (Seen). A probe
that did not report, or broke, FAILs: silence proves nothing. Pure: no engine, no I/O.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flowerbox.probes import PROBES

__all__ = ["PIDS_HEADROOM", "SILENT", "ZERO_CAPS", "Seen", "Verdict", "judge"]

ZERO_CAPS = "0000000000000000"
DENY_PREFIX = "flowerbox egress: denied"
GIT_PROTECTED = (".git/hooks", ".git/config")
PIDS_HEADROOM = 64  # the probe tries this many threads past the limit
SILENT = "no observation"


@dataclass(frozen=True)
class Verdict:
    probe: str
    ok: bool
    why: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'}  {self.probe:<22} {self.why}"


@dataclass
class Seen:
    """What only the host can see, gathered after the box is gone."""

    uid: int
    gid: int
    pids_limit: int
    token: str
    received: list[str] = field(default_factory=list)  # lines/datagrams at the probe server
    egress: list[dict[str, Any]] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # protected paths whose content changed
    survivors: list[str] = field(default_factory=list)  # containers and processes left behind
    git: bool = True  # the workspace is a git repository
    repo_changed: list[str] = field(default_factory=list)  # the user's .git, seen afterwards


# --- judging: one function per probe --------------------------------------------------------


def _identity(o: dict[str, Any], seen: Seen) -> Verdict:
    uid, euid = o["uid"], o["euid"]
    if not uid == euid == seen.uid:
        return Verdict("identity", False, f"uid {uid} (euid {euid}), expected your uid {seen.uid}")
    extra = sorted(set(o["groups"]) - {seen.gid})
    if o["gid"] != seen.gid or extra:
        return Verdict(
            "identity",
            False,
            f"gid {o['gid']}, supplementary groups {o['groups']}: expected your gid {seen.gid} "
            "and no other group (a group can open what it owns, the engine's socket included)",
        )
    if uid == 0:
        return Verdict(
            "identity",
            True,
            "uid 0: flowerbox runs as root, so the box does (every other restriction holds); "
            "run flowerbox as your own user, in the docker group, to avoid it",
        )
    return Verdict("identity", True, f"uid {uid}, gid {seen.gid}, no other group: yours, not root")


def _capabilities(o: dict[str, Any], seen: Seen) -> Verdict:
    ok = o["CapEff"] == o["CapBnd"] == ZERO_CAPS
    why = "CapEff and CapBnd are 0" if ok else f"CapEff {o['CapEff']}, CapBnd {o['CapBnd']}"
    return Verdict("capabilities", ok, why)


def _no_new_privs(o: dict[str, Any], seen: Seen) -> Verdict:
    ok = o["NoNewPrivs"] == 1
    return Verdict("no_new_privs", ok, "set" if ok else "NoNewPrivs 0: setuid binaries work")


def _seccomp(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["Seccomp"] != 2:
        return Verdict("seccomp", False, f"mode {o['Seccomp']}: no seccomp filter")
    tried = o["syscalls"]
    if tried is None:
        return Verdict(
            "seccomp",
            False,
            f"no syscall table for {o['machine']}: what the filter refuses is unknown",
        )
    allowed = {name: outcome for name, outcome in tried.items() if outcome != "EPERM"}
    if allowed:
        got = ", ".join(f"{name} ({outcome})" for name, outcome in allowed.items())
        return Verdict("seccomp", False, f"a filter is loaded, but these reached the kernel: {got}")
    return Verdict("seccomp", True, f"mode 2; refused with EPERM: {', '.join(tried)}")


def _read_only_root(o: dict[str, Any], seen: Seen) -> Verdict:
    problems = []
    if "ro" not in o["root_mount"]:
        problems.append(f"/ is mounted {','.join(o['root_mount'][:1]) or 'without options'}")
    if o["root_writable"]:
        problems.append("the root filesystem took a write")
    if o["tmp_exec"]:
        problems.append("a script written to /tmp runs")
    if problems:
        return Verdict("read_only_root", False, "; ".join(problems))
    writable = o["writable_mounts"]
    executable = sorted(point for point, noexec in writable.items() if not noexec)
    return Verdict(
        "read_only_root",
        True,
        "/ is read-only, /tmp refuses to execute; writable and executable by design: "
        f"{', '.join(executable) or 'nothing'}",
    )


def _docker_socket(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["engines"]:
        engines = ", ".join(o["engines"])
        return Verdict("docker_socket", False, f"a Docker engine answers at {engines}")
    if o["unopenable"]:
        return Verdict(
            "docker_socket",
            False,
            f"sockets the box sees but may not open (an engine's? another group or uid could): "
            f"{', '.join(o['unopenable'])}",
        )
    if o["truncated"]:
        return Verdict("docker_socket", False, f"the walk was cut short ({o['truncated']})")
    others = ", ".join(o["others"]) or "none"
    return Verdict(
        "docker_socket",
        True,
        f"no engine among the unix sockets reachable ({o['entries']} entries walked; "
        f"sockets: {others})",
    )


def _interfaces(o: dict[str, Any], seen: Seen) -> Verdict:
    ok = o["interfaces"] == ["lo"]
    return Verdict("interfaces", ok, f"network interfaces: {' '.join(o['interfaces'])}")


def _direct_tcp(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["connected"] or f"direct_tcp {seen.token}" in seen.received:
        return Verdict("direct_tcp", False, "without the proxy it reached the host's loopback")
    if not o["route_v4"]:
        return Verdict("direct_tcp", False, "the kernel has an IPv4 route out")
    return Verdict("direct_tcp", True, f"no way out without the proxy ({o['error']})")


def _udp(o: dict[str, Any], seen: Seen) -> Verdict:
    if f"udp {seen.token}" in seen.received:
        return Verdict("udp", False, "a datagram reached the host's loopback")
    if not o["route_v4"]:
        return Verdict("udp", False, "the kernel would route a datagram out (an IPv4 route)")
    return Verdict("udp", True, f"no datagram left the box; no route out ({o['route_v4']})")


def _raw_socket(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["opened"]:
        return Verdict("raw_socket", False, f"opened: {', '.join(o['opened'])}")
    return Verdict("raw_socket", True, "raw and packet sockets refused")


def _ipv6_route(o: dict[str, Any], seen: Seen) -> Verdict:
    if not o["route_error"]:
        return Verdict("ipv6_route", False, "the kernel has an IPv6 route out")
    return Verdict("ipv6_route", True, f"no IPv6 route ({o['route_error']})")


def _decisions(seen: Seen, host: str) -> list[str]:
    """The egress log's decisions about `host` (host or host:port), in order."""
    found = []
    for entry in seen.egress:
        target = str(entry.get("host", ""))
        if target == host or target.rpartition(":")[0] == host:
            found.append(str(entry.get("decision", "")))
    return found


def _refused(answer: dict[str, Any]) -> bool:
    return answer.get("status") == 403 and str(answer.get("body", "")).startswith(DENY_PREFIX)


def _proxy_denied_name(o: dict[str, Any], seen: Seen) -> Verdict:
    if o.get("proxy") is None:
        return Verdict("proxy_denied_name", False, "no egress proxy in the box (HTTPS_PROXY)")
    forms = {form: o[form] for form in ("connect", "plain")}
    let_through = [form for form, answer in forms.items() if not _refused(answer)]
    if let_through:
        answers = ", ".join(f"{form}: {forms[form].get('status')}" for form in let_through)
        return Verdict("proxy_denied_name", False, f"{o['name']} not refused ({answers})")
    decisions = _decisions(seen, o["name"])
    if not decisions or any(decision != "deny" for decision in decisions):
        return Verdict("proxy_denied_name", False, f"egress log for {o['name']}: {decisions}")
    return Verdict(
        "proxy_denied_name", True, f"{o['name']}: 403 for CONNECT and plain HTTP, logged deny"
    )


def _proxy_internal_targets(o: dict[str, Any], seen: Seen) -> Verdict:
    if o.get("proxy") is None:
        return Verdict("proxy_internal_targets", False, "no egress proxy in the box")
    if f"proxied {seen.token}" in seen.received:  # (the denied-name probe sends "named")
        return Verdict("proxy_internal_targets", False, "the proxy reached the host's loopback")
    open_targets = [target for target, answer in o["targets"].items() if not _refused(answer)]
    unlogged = [
        target
        for target in o["targets"]
        if _decisions(seen, target.rpartition(":")[0].strip("[]")) != ["deny"]
    ]
    if open_targets or unlogged:
        return Verdict(
            "proxy_internal_targets",
            False,
            f"not refused: {open_targets or '-'}; no single deny logged: {unlogged or '-'}",
        )
    return Verdict("proxy_internal_targets", True, f"refused and logged: {', '.join(o['targets'])}")


def _protected_paths(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["writable"] or seen.changed:
        bad = sorted({*o["writable"], *seen.changed})
        return Verdict("protected_paths", False, f"writable inside: {', '.join(bad)}")
    if o["renamed"]:
        return Verdict("protected_paths", False, f"renamed inside: {', '.join(o['renamed'])}")
    absent = [name for name in GIT_PROTECTED if name in o["missing"]]
    if seen.git and absent:
        return Verdict("protected_paths", False, f"not in the workspace: {', '.join(absent)}")
    if not o["refused"]:
        return Verdict(
            "protected_paths",
            False,
            "nothing protected exists here to try (no .git, Dockerfile...): run selftest in a "
            "git repository",
        )
    return Verdict("protected_paths", True, f"read-only, not renamed: {', '.join(o['refused'])}")


def _protected_parents(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["renamed"]:
        return Verdict(
            "protected_parents",
            False,
            f"renamed inside (a protected path moves along, its name is free): "
            f"{', '.join(o['renamed'])}",
        )
    if not o["refused"]:
        return Verdict("protected_parents", True, "no protected path lies below a folder here")
    return Verdict("protected_parents", True, f"not renamed: {', '.join(o['refused'])}")


def _git_redirects(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["git"] == "file":  # a linked worktree: its .git file names the gitdir git uses
        if not o["file_refused"] or not o["file_rename_refused"]:
            return Verdict(
                "git_redirects",
                False,
                "the workspace's .git file (a linked worktree) can be rewritten or moved "
                "inside: a `gitdir:` of the box's own would take your git there",
            )
        return Verdict("git_redirects", True, ".git is a file (a linked worktree): read-only")
    if o["git"] != "folder":
        return Verdict("git_redirects", True, f"the workspace's .git: {o['git']}")
    problems = []
    if seen.repo_changed:
        problems.append(f"reached your repository: {', '.join(seen.repo_changed)}")
    if o["moved"]:
        problems.append(f".git moved away inside, {o['replace']}")
    if problems:
        return Verdict("git_redirects", False, "; ".join(problems))
    return Verdict(
        "git_redirects",
        True,
        f"commondir: {o['commondir']}, not in your repository; .git not replaced ({o['replace']})",
    )


def _setuid(o: dict[str, Any], seen: Seen) -> Verdict:
    sudo = o.get("sudo")
    if sudo is not None and sudo["code"] == 0:
        return Verdict("setuid", False, f"sudo -n gave uid {sudo['stdout']}")
    su = o.get("su")
    if su is None and o["euid"] == 0 and o["CapBnd"] == ZERO_CAPS:
        return Verdict(
            "setuid", True, "uid 0 already (flowerbox runs as root); CapBnd 0: nothing to gain"
        )
    if su is None:
        if o.get("su_setuid_root"):
            return Verdict("setuid", False, "could not observe su's credentials")
        return Verdict("setuid", True, f"no setuid-root su; sudo {'refused' if sudo else 'absent'}")
    if su["CapEff"] != ZERO_CAPS or (su["euid"] == 0 != o["euid"]):
        return Verdict(
            "setuid", False, f"su (setuid root) ran as euid {su['euid']}, CapEff {su['CapEff']}"
        )
    return Verdict(
        "setuid",
        True,
        f"su (setuid root) gained nothing: euid {su['euid']}, no capabilities; "
        f"sudo {'refused' if sudo else 'absent'}",
    )


def _survivor(o: dict[str, Any], seen: Seen) -> Verdict:
    if seen.survivors:
        return Verdict("survivor", False, f"left behind: {', '.join(seen.survivors)}")
    return Verdict(
        "survivor",
        True,
        f"nothing outlived the box (process: {o['process']}, container: {o['container']})",
    )


def _pids_limit(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["started"] >= o["tried"] or o["started"] > seen.pids_limit:
        return Verdict("pids_limit", False, f"{o['started']} threads started, no limit hit")
    return Verdict("pids_limit", True, f"task {o['started'] + 1} refused (limit {seen.pids_limit})")


JUDGES: dict[str, Callable[[dict[str, Any], Seen], Verdict]] = {
    "identity": _identity,
    "capabilities": _capabilities,
    "no_new_privs": _no_new_privs,
    "seccomp": _seccomp,
    "read_only_root": _read_only_root,
    "docker_socket": _docker_socket,
    "interfaces": _interfaces,
    "direct_tcp": _direct_tcp,
    "udp": _udp,
    "raw_socket": _raw_socket,
    "ipv6_route": _ipv6_route,
    "proxy_denied_name": _proxy_denied_name,
    "proxy_internal_targets": _proxy_internal_targets,
    "protected_paths": _protected_paths,
    "protected_parents": _protected_parents,
    "git_redirects": _git_redirects,
    "setuid": _setuid,
    "survivor": _survivor,
    "pids_limit": _pids_limit,
}
assert tuple(JUDGES) == PROBES, "every probe has exactly one judge, in the same order"


def _gateway_health(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["status"] == 200:
        return Verdict("gateway_health", True, "the gateway started; its upstream is reachable")
    why = o.get("error") or f"{o['status']} {o.get('body', '')[:120]}"
    return Verdict("gateway_health", False, f"health: {why}")


def judge(output: str, seen: Seen, probes: tuple[str, ...] = PROBES) -> list[Verdict]:
    """One verdict per probe, in `probes` order, from the box's JSON lines and the host's
    view. A probe that did not report, or reported an error, FAILs: silence proves nothing."""
    observations: dict[str, dict[str, Any]] = {}
    for line in output.splitlines():
        with contextlib.suppress(ValueError):
            data = json.loads(line)
            if isinstance(data, dict) and data.get("probe") in probes:
                observations[data["probe"]] = data
    verdicts = []
    for name in probes:
        decide = {**JUDGES, "gateway_health": _gateway_health}[name]  # doctor's extra
        o = observations.get(name)
        if o is None:
            verdicts.append(Verdict(name, False, f"{SILENT}: the probe did not report"))
        elif "broken" in o:
            verdicts.append(Verdict(name, False, f"the probe broke: {o['broken']}"))
        else:
            try:
                verdicts.append(decide(o, seen))
            except (KeyError, TypeError) as exc:
                verdicts.append(Verdict(name, False, f"unreadable observation ({exc!r})"))
    return verdicts
