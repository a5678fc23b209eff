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
from flowerbox.selftest.kernel import BOOT_SLACK_S, sandboxed
from flowerbox.selftest.probes import PROBES

__all__ = [
    "HOST_CHECKS",
    "PIDS_HEADROOM",
    "POD_JUDGES",
    "POD_PROBES",
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
        why = text("verdict.identity_uid", uid=uid, euid=euid, yours=seen.uid)
        return Verdict("identity", False, why)
    extra = sorted(set(o["groups"]) - {seen.gid})
    if o["gid"] != seen.gid or extra:
        return Verdict(
            "identity",
            False,
            text("verdict.identity_groups", gid=o["gid"], groups=o["groups"], yours=seen.gid),
        )
    if uid == 0:
        return Verdict(
            "identity",
            True,
            text("verdict.identity_root"),
        )
    return Verdict("identity", True, text("verdict.identity_ok", uid=uid, gid=seen.gid))


def _capabilities(o: dict[str, Any], seen: Seen) -> Verdict:
    ok = o["CapEff"] == o["CapBnd"] == ZERO_CAPS
    why = text("verdict.caps_ok") if ok else text("verdict.caps", eff=o["CapEff"], bnd=o["CapBnd"])
    return Verdict("capabilities", ok, why)


def _no_new_privs(o: dict[str, Any], seen: Seen) -> Verdict:
    flag = o.get("prctl", o["NoNewPrivs"])  # the kernel's answer; an older image: the status
    ok = flag == 1
    why = text("verdict.nnp_ok") if ok else text("verdict.nnp", flag=flag)
    return Verdict("no_new_privs", ok, why)


def _seccomp(o: dict[str, Any], seen: Seen) -> Verdict:
    if seen.runtime == "runsc" and sandboxed(seen.host_process):
        return _seccomp_gvisor(o, seen)
    if o["Seccomp"] != 2:
        return Verdict("seccomp", False, text("verdict.seccomp_none", mode=o["Seccomp"]))
    tried = o["syscalls"]
    if tried is None:
        return Verdict(
            "seccomp",
            False,
            text("verdict.seccomp_no_table", machine=o["machine"]),
        )
    allowed = {name: outcome for name, outcome in tried.items() if outcome != "EPERM"}
    if allowed:
        got = ", ".join(f"{name} ({outcome})" for name, outcome in allowed.items())
        return Verdict("seccomp", False, text("verdict.seccomp_reached", got=got))
    return Verdict("seccomp", True, text("verdict.seccomp_ok", tried=", ".join(tried)))


def _seccomp_gvisor(o: dict[str, Any], seen: Seen) -> Verdict:
    """Under gVisor the box's system calls go to gVisor's kernel, which loads no profile of
    the engine's (mode 0 inside); the filter that guards the host's kernel is the one runsc
    puts on its sandbox process, read on the host."""
    tried = ", ".join(f"{name} ({outcome})" for name, outcome in (o["syscalls"] or {}).items())
    mode = seen.host_process.get("seccomp")
    if mode != 2:
        return Verdict("seccomp", False, text("verdict.gvisor_seccomp", mode=mode))
    return Verdict(
        "seccomp",
        True,
        text("verdict.gvisor_seccomp_ok", mode=o["Seccomp"], tried=tried),
    )


def _read_only_root(o: dict[str, Any], seen: Seen, *, tmp_noexec: bool = True) -> Verdict:
    """`tmp_noexec`: /tmp must refuse to execute (a Pod's emptyDir has no such field)."""
    problems = []
    if "ro" not in o["root_mount"]:
        options = ",".join(o["root_mount"][:1]) or text("verdict.root_no_options")
        problems.append(text("verdict.root_mounted", options=options))
    if o["root_writable"]:
        problems.append(text("verdict.root_written"))
    if o["tmp_exec"] and tmp_noexec:
        problems.append(text("verdict.tmp_runs"))
    if problems:
        return Verdict("read_only_root", False, "; ".join(problems))
    writable = o["writable_mounts"]
    executable = sorted(point for point, noexec in writable.items() if not noexec)
    tmp = text("verdict.tmp_noexec") if tmp_noexec else text("verdict.tmp_unchecked")
    shown = ", ".join(executable) or text("verdict.nothing")
    return Verdict("read_only_root", True, text("verdict.root_ok", tmp=tmp, executable=shown))


def _docker_socket(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["engines"]:
        engines = ", ".join(o["engines"])
        return Verdict("docker_socket", False, text("verdict.engine_answers", engines=engines))
    if o["unopenable"]:
        return Verdict(
            "docker_socket",
            False,
            text("verdict.sockets_unopenable", sockets=", ".join(o["unopenable"])),
        )
    if o["truncated"]:
        return Verdict("docker_socket", False, text("verdict.walk_cut", why=o["truncated"]))
    others = ", ".join(o["others"]) or text("verdict.none")
    why = text("verdict.no_engine", entries=o["entries"], others=others)
    return Verdict("docker_socket", True, why)


def _interfaces(o: dict[str, Any], seen: Seen) -> Verdict:
    ok = o["interfaces"] == ["lo"]
    return Verdict("interfaces", ok, text("verdict.interfaces", names=" ".join(o["interfaces"])))


def _direct_tcp(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["connected"] or f"direct_tcp {seen.token}" in seen.received:
        return Verdict("direct_tcp", False, text("verdict.tcp_reached"))
    if not o["route_v4"]:
        return Verdict("direct_tcp", False, text("verdict.ipv4_route"))
    return Verdict("direct_tcp", True, text("verdict.tcp_ok", error=o["error"]))


def _policy_tcp(o: dict[str, Any], seen: Seen) -> Verdict:
    """direct_tcp in a Pod: it has an interface and a route by design, so the network policy
    is the boundary, and the probe's connection to the cluster's API Service decides."""
    if o["connected"]:
        return Verdict("direct_tcp", False, text("verdict.policy_passed"))
    return Verdict("direct_tcp", True, text("verdict.policy_held", error=o["error"]))


def _udp(o: dict[str, Any], seen: Seen) -> Verdict:
    if f"udp {seen.token}" in seen.received:
        return Verdict("udp", False, text("verdict.udp_reached"))
    if not o["route_v4"]:
        return Verdict("udp", False, text("verdict.udp_route"))
    return Verdict("udp", True, text("verdict.udp_ok", route=o["route_v4"]))


def _raw_socket(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["opened"]:
        return Verdict("raw_socket", False, text("verdict.raw_opened", what=", ".join(o["opened"])))
    return Verdict("raw_socket", True, text("verdict.raw_ok"))


def _ipv6_route(o: dict[str, Any], seen: Seen) -> Verdict:
    if not o["route_error"]:
        return Verdict("ipv6_route", False, text("verdict.ipv6_route"))
    return Verdict("ipv6_route", True, text("verdict.ipv6_ok", error=o["route_error"]))


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
        return Verdict("proxy_denied_name", False, text("verdict.no_proxy_env"))
    forms = {form: o[form] for form in ("connect", "plain")}
    let_through = [form for form, answer in forms.items() if not _refused(answer)]
    if let_through:
        answers = ", ".join(f"{form}: {forms[form].get('status')}" for form in let_through)
        why = text("verdict.name_not_refused", name=o["name"], answers=answers)
        return Verdict("proxy_denied_name", False, why)
    decisions = _decisions(seen, o["name"])
    if not decisions or any(decision != "deny" for decision in decisions):
        why = text("verdict.name_logged", name=o["name"], decisions=decisions)
        return Verdict("proxy_denied_name", False, why)
    return Verdict("proxy_denied_name", True, text("verdict.name_ok", name=o["name"]))


def _proxy_internal_targets(o: dict[str, Any], seen: Seen) -> Verdict:
    if o.get("proxy") is None:
        return Verdict("proxy_internal_targets", False, text("verdict.no_proxy"))
    if f"proxied {seen.token}" in seen.received:  # (the denied-name probe sends "named")
        return Verdict("proxy_internal_targets", False, text("verdict.proxy_reached"))
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
            text("verdict.targets_open", open=open_targets or "-", unlogged=unlogged or "-"),
        )
    why = text("verdict.targets_ok", targets=", ".join(o["targets"]))
    return Verdict("proxy_internal_targets", True, why)


def _protected_paths(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["writable"] or seen.changed:
        bad = sorted({*o["writable"], *seen.changed})
        return Verdict("protected_paths", False, text("verdict.writable", paths=", ".join(bad)))
    if o["renamed"]:
        why = text("verdict.renamed", paths=", ".join(o["renamed"]))
        return Verdict("protected_paths", False, why)
    absent = [name for name in GIT_PROTECTED if name in o["missing"]]
    if seen.git and absent:
        why = text("verdict.not_in_workspace", paths=", ".join(absent))
        return Verdict("protected_paths", False, why)
    if not o["refused"]:
        return Verdict("protected_paths", False, text("verdict.nothing_protected"))
    why = text("verdict.protected_ok", paths=", ".join(o["refused"]))
    return Verdict("protected_paths", True, why)


def _protected_parents(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["renamed"]:
        return Verdict(
            "protected_parents",
            False,
            text("verdict.parent_renamed", paths=", ".join(o["renamed"])),
        )
    if not o["refused"]:
        return Verdict("protected_parents", True, text("verdict.no_parents"))
    why = text("verdict.parents_ok", paths=", ".join(o["refused"]))
    return Verdict("protected_parents", True, why)


def _git_redirects(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["git"] == "file":  # a linked worktree: its .git file names the gitdir git uses
        if not o["file_refused"] or not o["file_rename_refused"]:
            return Verdict(
                "git_redirects",
                False,
                text("verdict.gitfile_writable"),
            )
        return Verdict("git_redirects", True, text("verdict.gitfile_ok"))
    if o["git"] != "folder":
        return Verdict("git_redirects", True, text("verdict.git_is", git=o["git"]))
    problems = []
    if seen.repo_changed:
        problems.append(text("verdict.repo_reached", what=", ".join(seen.repo_changed)))
    if o["moved"]:
        problems.append(text("verdict.git_moved", replace=o["replace"]))
    if problems:
        return Verdict("git_redirects", False, "; ".join(problems))
    return Verdict(
        "git_redirects",
        True,
        text("verdict.git_ok", commondir=o["commondir"], replace=o["replace"]),
    )


def _setuid(o: dict[str, Any], seen: Seen) -> Verdict:
    sudo = o.get("sudo")
    if sudo is not None and sudo["code"] == 0:
        return Verdict("setuid", False, text("verdict.sudo_gave", uid=sudo["stdout"]))
    su = o.get("su")
    if su is None and o["euid"] == 0 and o["CapBnd"] == ZERO_CAPS:
        return Verdict("setuid", True, text("verdict.setuid_root"))
    said = text("verdict.sudo_refused" if sudo else "verdict.sudo_absent")
    if su is None:
        if o.get("su_setuid_root"):
            return Verdict("setuid", False, text("verdict.su_unseen"))
        return Verdict("setuid", True, text("verdict.no_su", sudo=said))
    if su["CapEff"] != ZERO_CAPS or (su["euid"] == 0 != o["euid"]):
        why = text("verdict.su_gained", euid=su["euid"], eff=su["CapEff"])
        return Verdict("setuid", False, why)
    return Verdict("setuid", True, text("verdict.su_ok", euid=su["euid"], sudo=said))


def _survivor(o: dict[str, Any], seen: Seen) -> Verdict:
    if seen.survivors:
        return Verdict("survivor", False, text("verdict.left", what=", ".join(seen.survivors)))
    why = text("verdict.survivor_ok", process=o["process"], container=o["container"])
    return Verdict("survivor", True, why)


def _kernel_verdict(
    o: dict[str, Any], *, asked: str, host: dict[str, Any], host_btime: int | None
) -> tuple[bool, str]:
    """(ok, why) for the box's `kernel` observation `o`, the runtime `asked`, and the host's
    view of the box's first process (`host`, host_process) and boot time."""
    process = host.get("argv0")
    seen = (
        text("verdict.kernel_seen", process=repr(process), uid=host.get("uid"))
        if process is not None
        else text("verdict.kernel_unseen", error=host.get("error"))
    )
    box_btime = o.get("btime")
    if not isinstance(box_btime, int) or host_btime is None:
        own_kernel = False
        booted = text("verdict.boot_unknown", box=box_btime, host=host_btime)
    elif abs(box_btime - host_btime) > BOOT_SLACK_S:
        own_kernel, booted = True, text("verdict.booted_after", seconds=box_btime - host_btime)
    else:
        own_kernel, booted = False, text("verdict.booted_with", btime=box_btime)
    if asked != "runsc":
        if sandboxed(host):
            return False, text("verdict.runc_yet", seen=seen)
        return True, text("verdict.runc_ok", seen=seen, booted=booted)
    if sandboxed(host) and own_kernel:
        log = str(o.get("log", ""))[:60]
        platform = host.get("platform") or text("verdict.runsc_default")
        why = text("verdict.gvisor_ok", platform=platform, seen=seen, booted=booted)
        return True, text("verdict.gvisor_log", why=why, log=repr(log))
    return False, text("verdict.not_gvisor", seen=seen, booted=booted)


def _kernel(o: dict[str, Any], seen: Seen) -> Verdict:
    ok, why = _kernel_verdict(
        o, asked=seen.runtime, host=seen.host_process, host_btime=seen.host_btime
    )
    return Verdict("kernel", ok, why)


def _pids_limit(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["started"] >= o["tried"] or o["started"] > seen.pids_limit:
        return Verdict("pids_limit", False, text("verdict.pids_unlimited", started=o["started"]))
    why = text("verdict.pids_ok", task=o["started"] + 1, limit=seen.pids_limit)
    return Verdict("pids_limit", True, why)


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
            verdicts.append(Verdict(name, False, text("verdict.silent")))
        elif "broken" in o:
            verdicts.append(Verdict(name, False, text("verdict.broke", why=o["broken"])))
        else:
            try:
                verdicts.append(decide(o, seen))
            except (KeyError, TypeError) as exc:
                verdicts.append(Verdict(name, False, text("verdict.unreadable", problem=repr(exc))))
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
    return "" if call["state"] != "timed out" else text("verdict.hung", seconds=call["seconds"])


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
        what = text("verdict.dotenv_yours")
    elif plant == PLANTED:
        what = text("verdict.dotenv_planted")
    else:
        return Verdict(name, False, text("verdict.dotenv_writable", plant=plant))
    problems = []
    if o["yielded"]:
        problems.append(text("verdict.dotenv_yielded", keys=", ".join(o["yielded"])))
    if o["from_workspace"]:
        problems.append(text("verdict.dotenv_from", keys=", ".join(o["from_workspace"])))
    if o["received"]:
        problems.append(text("verdict.server_got", got=repr(o["received"][0])))
    if o["ran"]:
        problems.append(text("verdict.sitecustomize_ran"))
    return _verdict(name, problems, text("verdict.dotenv_ok", what=what))


def _forged_record(o: dict[str, Any], forged: str) -> Verdict:
    problems = []
    if forged in o["listed"]:
        problems.append(text("verdict.forged_listed"))
    if o["found"] == forged:
        problems.append(text("verdict.forged_found"))
    if forged in o["refused"]:
        problems.append(text("verdict.forged_blocks"))
    if o["outside"]:
        problems.append(text("verdict.outside_changed", names=", ".join(o["outside"])))
    return _verdict(
        "forged_record",
        [text("verdict.forged", run=forged, problems="; ".join(problems))] * bool(problems),
        text("verdict.forged_ok", run=forged),
    )


def _linked_runs_files(o: dict[str, Any]) -> Verdict:
    asks, raw, drop = o["asks"], o["raw"], o["drop"]
    problems = [
        text("verdict.call_hung", what=what, hung=hung)
        for what, call in (
            (text("verdict.reading_questions"), asks),
            (text("verdict.reading_asks"), raw),
        )
        if (hung := _finished(call))
    ]
    if asks["state"] == "done" and asks["value"]:
        problems.append(text("verdict.questions_read", value=f"{asks['value']!r:.80}"))
    if asks["state"] == "raised":
        problems.append(text("verdict.questions_broke", value=asks["value"]))
    if raw["state"] != "timed out" and not _rejected(raw):
        problems.append(text("verdict.zero_read", value=raw["value"]))
    if not _rejected(drop):
        problems.append(text("verdict.answer_dropped", value=drop["value"]))
    if o["outside"]:
        problems.append(text("verdict.written_outside", names=", ".join(o["outside"])))
    why = text("verdict.links_ok", seconds=f"{raw['seconds']:.3f}")
    return _verdict("linked_runs_files", problems, why)


def _fifo_runs_files(o: dict[str, Any]) -> Verdict:
    if o.get("on_host") == [False, False]:  # made in the box, absent here: no host read to trap
        return Verdict(
            "fifo_runs_files",
            True,
            text("verdict.fifos_in_kernel"),
        )
    problems = []
    for what, call in (
        (text("verdict.events_file"), o["events"]),
        (text("verdict.gateway_meter"), o["usage"]),
    ):
        if hung := _finished(call):
            problems.append(text("verdict.fifo_hung", what=what, hung=hung))
        elif not _rejected(call):
            problems.append(text("verdict.fifo_read", what=what, value=call["value"]))
    if hung := _finished(o["cost"]):
        problems.append(text("verdict.cost_hung", hung=hung))
    seconds = f"{max(o['events']['seconds'], o['usage']['seconds']):.3f}"
    return _verdict("fifo_runs_files", problems, text("verdict.fifos_ok", seconds=seconds))


def _git_hook_redirect(git: dict[str, Any], o: dict[str, Any]) -> Verdict:
    name = "git_hook_redirect"
    if git["git"] == "absent":
        return Verdict(name, False, text("verdict.hook_no_git"))
    if git["git"] == "folder" and git["commondir"] != PLANTED:
        return Verdict(name, False, text("verdict.not_planted", plant=git["commondir"]))
    problems = []
    if o["repo_changed"]:
        problems.append(text("verdict.repo_reached", what=", ".join(o["repo_changed"])))
    if o["ran"]:
        ran = text("verdict.and").join(o["ran"])
        problems.append(text("verdict.status_ran", ran=ran))
    if o["code"] != 0:
        problems.append(text("verdict.status_failed", code=o["code"], stderr=o["stderr"]))
    planted = text("verdict.hook_folder" if git["git"] == "folder" else "verdict.hook_file")
    return _verdict(name, problems, text("verdict.hook_ok", planted=planted))


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
            return Verdict(check, False, text("verdict.no_git_plant"))
        return _git_hook_redirect(git, o)
    plants = lines.get("host_plants", {})
    plant = str(plants.get(_PLANT_OF[check], plants.get("run_dir", text("verdict.no_observation"))))
    if check == "dotenv_redirect":
        return _dotenv_redirect(plant, o)
    if plant != PLANTED:
        return Verdict(check, False, text("verdict.not_planted", plant=plant))
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
            why = text("verdict.no_observation") if o is None else o["broken"]
            verdicts.append(Verdict(check, False, text("verdict.host_silent", why=why)))
            continue
        try:
            verdicts.append(_host_verdict(check, o, lines, forged))
        except (KeyError, TypeError) as exc:
            why = text("verdict.unreadable", problem=repr(exc))
            verdicts.append(Verdict(check, False, why))
    return verdicts
