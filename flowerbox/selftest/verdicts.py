"""The self-test's judges: one verdict per escape probe, from what the box reported (the
JSON lines of `python -m selftest.probes`) and what only the host can see (Seen); and one per
host-boundary check (`judge_host`), from what the box planted and what flowerbox's own host
code did with it (selftest.hostboundary observes). A probe that did not report, or broke, and
an attack that was not planted, FAIL: silence proves nothing. Pure: no engine, no I/O.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from flower import parse_json, text
from flowerbox.selftest.kernel import sandboxed
from flowerbox.selftest.kernel import verdict as kernel_verdict
from flowerbox.selftest.probes import PROBES

__all__ = [
    "HOST_CHECKS",
    "PIDS_HEADROOM",
    "POD_JUDGES",
    "POD_PROBES",
    "SILENT",
    "ZERO_CAPS",
    "Judge",
    "Seen",
    "Verdict",
    "judge",
    "judge_host",
]

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
    runtime: str = "runc"  # the runtime the box's spec asked for
    host_btime: int | None = None  # the host kernel's boot time
    host_process: dict[str, Any] = field(default_factory=dict)  # kernel.host_process


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
    flag = o.get("prctl", o["NoNewPrivs"])  # the kernel's answer; an older image: the status
    ok = flag == 1
    return Verdict(
        "no_new_privs", ok, "set" if ok else f"no_new_privs {flag}: setuid binaries work"
    )


def _seccomp(o: dict[str, Any], seen: Seen) -> Verdict:
    if seen.runtime == "runsc" and sandboxed(seen.host_process):
        return _seccomp_gvisor(o, seen)
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


def _seccomp_gvisor(o: dict[str, Any], seen: Seen) -> Verdict:
    """Under gVisor the box's system calls go to gVisor's kernel, which loads no profile of
    the engine's (mode 0 inside); the filter that guards the host's kernel is the one runsc
    puts on its sandbox process, read on the host."""
    tried = ", ".join(f"{name} ({outcome})" for name, outcome in (o["syscalls"] or {}).items())
    mode = seen.host_process.get("seccomp")
    if mode != 2:
        return Verdict(
            "seccomp", False, f"gVisor's sandbox runs on the host in seccomp mode {mode}"
        )
    return Verdict(
        "seccomp",
        True,
        f"gVisor: its sandbox runs on the host in seccomp mode 2; inside, mode {o['Seccomp']}: "
        f"the calls a profile would refuse reach gVisor's kernel, not the host's ({tried})",
    )


def _read_only_root(o: dict[str, Any], seen: Seen, *, tmp_noexec: bool = True) -> Verdict:
    """`tmp_noexec`: /tmp must refuse to execute (a Pod's emptyDir has no such field)."""
    problems = []
    if "ro" not in o["root_mount"]:
        problems.append(f"/ is mounted {','.join(o['root_mount'][:1]) or 'without options'}")
    if o["root_writable"]:
        problems.append("the root filesystem took a write")
    if o["tmp_exec"] and tmp_noexec:
        problems.append("a script written to /tmp runs")
    if problems:
        return Verdict("read_only_root", False, "; ".join(problems))
    writable = o["writable_mounts"]
    executable = sorted(point for point, noexec in writable.items() if not noexec)
    tmp = "/tmp refuses to execute" if tmp_noexec else "/tmp is not checked for noexec"
    return Verdict(
        "read_only_root",
        True,
        f"/ is read-only, {tmp}; writable and executable by design: "
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


def _policy_tcp(o: dict[str, Any], seen: Seen) -> Verdict:
    """direct_tcp in a Pod: it has an interface and a route by design, so the network policy
    is the boundary, and the probe's connection to the cluster's API Service decides."""
    if o["connected"]:
        return Verdict(
            "direct_tcp",
            False,
            "reached the cluster's API Service past the run's network policy: does the "
            "network plugin enforce NetworkPolicy?",
        )
    return Verdict("direct_tcp", True, f"the network policy held ({o['error']})")


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


def _kernel(o: dict[str, Any], seen: Seen) -> Verdict:
    ok, why = kernel_verdict(
        o, asked=seen.runtime, host=seen.host_process, host_btime=seen.host_btime
    )
    return Verdict("kernel", ok, why)


def _pids_limit(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["started"] >= o["tried"] or o["started"] > seen.pids_limit:
        return Verdict("pids_limit", False, f"{o['started']} threads started, no limit hit")
    return Verdict("pids_limit", True, f"task {o['started'] + 1} refused (limit {seen.pids_limit})")


Judge = Callable[[dict[str, Any], Seen], Verdict]
JUDGES: dict[str, Judge] = {
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
    "kernel": _kernel,
}
assert tuple(JUDGES) == PROBES, "every probe has exactly one judge, in the same order"

# A Pod (`selftest --on kube`) is judged on what a Pod spec decides and the host can see in
# its log. Left out (NOT_ON_A_POD): interfaces, udp and ipv6_route (a Pod has an interface
# and routes by design; its network policy is the boundary, which direct_tcp tries), the
# proxy probes (the egress log is the broker's, not the host's), protected_paths,
# protected_parents and git_redirects (nothing on the claim is mounted read-only: the fetch
# and deliver Jobs turn git's hooks off instead), survivor (the host cannot see a Pod's
# processes; they end with it). pids_limit stays: it checks the node pool's kubelet
# podPidsLimit, the Pod's only one.
NOT_ON_A_POD = frozenset(
    {
        "interfaces",
        "udp",
        "ipv6_route",
        "proxy_denied_name",
        "proxy_internal_targets",
        "protected_paths",
        "protected_parents",
        "git_redirects",
        "survivor",
        "kernel",  # the node's kernel and process table are not the host's to see
    }
)
POD_PROBES: tuple[str, ...] = tuple(name for name in PROBES if name not in NOT_ON_A_POD)
POD_JUDGES: dict[str, Judge] = {
    **{name: JUDGES[name] for name in POD_PROBES},
    "read_only_root": partial(_read_only_root, tmp_noexec=False),
    "direct_tcp": _policy_tcp,
}


def _gateway_health(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["status"] == 200:
        return Verdict("gateway_health", True, text("doctor.gateway_ok"))
    why = o.get("error") or f"{o['status']} {o.get('body', '')[:120]}"
    return Verdict("gateway_health", False, text("doctor.gateway_health", why=why))


def judge(
    output: str,
    seen: Seen,
    probes: tuple[str, ...] = PROBES,
    *,
    judges: Mapping[str, Judge] = JUDGES,
) -> list[Verdict]:
    """One verdict per probe, in `probes` order, from the box's JSON lines and the host's
    view (`judges`: a Pod's are POD_JUDGES). A probe that did not report, or reported an
    error, FAILs: silence proves nothing."""
    observations: dict[str, dict[str, Any]] = {}
    for line in output.splitlines():
        with contextlib.suppress(ValueError):
            data = parse_json(line)
            if isinstance(data, dict) and data.get("probe") in probes:
                observations[data["probe"]] = data
    verdicts = []
    for name in probes:
        decide = {**judges, "gateway_health": _gateway_health}[name]  # doctor's extra
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


# --- the host boundary: flowerbox's host code against what the box planted ------------------

HOST_CHECKS: tuple[str, ...] = (
    "dotenv_redirect",
    "forged_record",
    "linked_runs_files",
    "fifo_runs_files",
    "git_hook_redirect",
)
PLANTED = "planted"


def _finished(call: dict[str, Any]) -> str:
    """'' when the host's call returned (or raised) in time, else what happened."""
    return "" if call["state"] != "timed out" else f"hung (no answer in {call['seconds']} s)"


def _rejected(call: dict[str, Any]) -> bool:
    """The host's call refused the planted file as box-written input (flowerbox.box.untrusted)."""
    return call["state"] == "raised" and str(call["value"]).startswith(
        ("UntrustedFileError", "RunError")
    )


def _verdict(check: str, problems: list[str], passed: str) -> Verdict:
    """FAIL naming every problem, or PASS saying what held."""
    return Verdict(check, not problems, "; ".join(problems) or passed)


def _dotenv_redirect(plant: str, o: dict[str, Any]) -> Verdict:
    name = "dotenv_redirect"
    if plant.startswith("yours, read-only"):
        what = "your own .env is here, empty and read-only in the box: the redirect was refused"
    elif plant == PLANTED:
        what = "a .env sending the key to the probe server, with a PYTHONPATH"
    else:
        return Verdict(name, False, f"the workspace .env could be written in the box ({plant})")
    problems = []
    if o["yielded"]:
        problems.append(f"the credential lookup took {', '.join(o['yielded'])} from it")
    if o["from_workspace"]:
        problems.append(f"{', '.join(o['from_workspace'])} came from ./.env")
    if o["received"]:
        problems.append(f"the probe server got {o['received'][0]!r}")
    if o["ran"]:
        problems.append("its sitecustomize.py ran on the host")
    return _verdict(
        name,
        problems,
        f"{what}; flowerbox's credential lookup read nothing from ./.env, nothing reached the "
        "probe server, no code of it ran",
    )


def _forged_record(o: dict[str, Any], forged: str) -> Verdict:
    problems = []
    if forged in o["listed"]:
        problems.append("ps lists it")
    if o["found"] == forged:
        problems.append("stop/resume find it")
    if forged in o["refused"]:
        problems.append("a new run is refused for it")
    if o["outside"]:
        problems.append(f"the folder outside it names changed: {', '.join(o['outside'])}")
    return _verdict(
        "forged_record",
        [f"a running run {forged} forged in runs/flowerbox: {'; '.join(problems)}"]
        * bool(problems),
        f"a running run {forged} forged in runs/flowerbox/ (naming a folder outside) is no run "
        "to the host: not listed, not found by its id, blocks nothing",
    )


def _linked_runs_files(o: dict[str, Any]) -> Verdict:
    asks, raw, drop = o["asks"], o["raw"], o["drop"]
    problems = [
        f"{what} {hung}"
        for what, call in (("reading the questions", asks), ("reading asks.json", raw))
        if (hung := _finished(call))
    ]
    if asks["state"] == "done" and asks["value"]:
        problems.append(f"questions read through the link: {asks['value']!r:.80}")
    if asks["state"] == "raised":
        problems.append(f"reading the questions broke: {asks['value']}")
    if raw["state"] != "timed out" and not _rejected(raw):
        problems.append(f"asks.json -> /dev/zero was read ({raw['value']})")
    if not _rejected(drop):
        problems.append(f"an answer was dropped through the inbox link ({drop['value']})")
    if o["outside"]:
        problems.append(f"written in the folder outside: {', '.join(o['outside'])}")
    return _verdict(
        "linked_runs_files",
        problems,
        f"asks.json -> /dev/zero: no question, refused as a link in {raw['seconds']:.3f} s; an "
        "answer dropped into inbox -> a folder outside: refused, nothing written there",
    )


def _fifo_runs_files(o: dict[str, Any]) -> Verdict:
    if o.get("on_host") == [False, False]:  # made in the box, absent here: no host read to trap
        return Verdict(
            "fifo_runs_files",
            True,
            "the box made its FIFOs, yet none is on the host: its kernel keeps them (gVisor's "
            "FIFOs in a bind mount live in its own kernel), so no host read can hang on one",
        )
    problems = []
    for what, call in (("the events file", o["events"]), ("the gateway meter", o["usage"])):
        if hung := _finished(call):
            problems.append(f"reading {what} (a FIFO) {hung}")
        elif not _rejected(call):
            problems.append(f"{what}, a FIFO, was read as a file ({call['value']})")
    if hung := _finished(o["cost"]):
        problems.append(f"the run's cost {hung}")
    return _verdict(
        "fifo_runs_files",
        problems,
        f"FIFOs at the events file and the gateway meter: refused, not opened for reading, in "
        f"{max(o['events']['seconds'], o['usage']['seconds']):.3f} s; the cost is read from the "
        "host's own ledger",
    )


def _git_hook_redirect(git: dict[str, Any], o: dict[str, Any]) -> Verdict:
    name = "git_hook_redirect"
    if git["git"] == "absent":
        return Verdict(
            name, False, "not tried: the workspace is no git repository (run selftest in one)"
        )
    if git["git"] == "folder" and git["commondir"] != PLANTED:
        return Verdict(name, False, f"not planted: {git['commondir']}")
    problems = []
    if o["repo_changed"]:
        problems.append(f"reached your repository: {', '.join(o['repo_changed'])}")
    if o["ran"]:
        problems.append(f"your `git status` ran the box's {' and '.join(o['ran'])}")
    if o["code"] != 0:
        problems.append(f"your `git status` failed ({o['code']}: {o['stderr']})")
    planted = (
        "a commondir naming a folder with a hook and core.fsmonitor"
        if git["git"] == "folder"
        else "your .git is a file (a linked worktree), read-only in the box"
    )
    return _verdict(
        name, problems, f"{planted}: your .git has no commondir, your `git status` ran no hook"
    )


_PLANT_OF = {
    "dotenv_redirect": "dotenv",
    "forged_record": "record",
    "linked_runs_files": "links",
    "fifo_runs_files": "fifos",
}
_PLANTED_JUDGES: dict[str, Callable[[dict[str, Any]], Verdict]] = {
    "linked_runs_files": _linked_runs_files,
    "fifo_runs_files": _fifo_runs_files,
}


def _host_verdict(
    check: str, o: dict[str, Any], lines: dict[str, dict[str, Any]], forged: str
) -> Verdict:
    if check == "git_hook_redirect":
        git = lines.get("git_redirects")
        if git is None or "broken" in git:
            return Verdict(check, False, "the box did not report its git plant")
        return _git_hook_redirect(git, o)
    plants = lines.get("host_plants", {})
    plant = str(plants.get(_PLANT_OF[check], plants.get("run_dir", SILENT)))
    if check == "dotenv_redirect":
        return _dotenv_redirect(plant, o)
    if plant != PLANTED:
        return Verdict(check, False, f"not planted: {plant}")
    if check == "forged_record":
        return _forged_record(o, forged)
    return _PLANTED_JUDGES[check](o)


def judge_host(output: str, observed: dict[str, dict[str, Any]], *, forged: str) -> list[Verdict]:
    """One verdict per host-boundary check, in HOST_CHECKS order, from the box's plant report
    (the `host_plants` and `git_redirects` lines of `output`) and `observed` (what the host
    code did, selftest.hostboundary.observe). A plant that was not made FAILs the check."""
    lines: dict[str, dict[str, Any]] = {}
    for line in output.splitlines():
        with contextlib.suppress(ValueError):
            data = parse_json(line)
            if isinstance(data, dict) and data.get("probe") in ("host_plants", "git_redirects"):
                lines[data["probe"]] = data
    verdicts = []
    for check in HOST_CHECKS:
        o = observed.get(check)
        if o is None or "broken" in o:
            why = "no observation" if o is None else o["broken"]
            verdicts.append(Verdict(check, False, f"the host side did not report: {why}"))
            continue
        try:
            verdicts.append(_host_verdict(check, o, lines, forged))
        except (KeyError, TypeError) as exc:
            verdicts.append(Verdict(check, False, f"unreadable observation ({exc!r})"))
    return verdicts
