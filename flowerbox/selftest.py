"""`flowerbox selftest`: the escape probes run in a box made exactly as a real run's, judged here.

    report = selftest(workspace=None, image="flowerbox:dev")
    for verdict in report.verdicts: print(verdict.line())

The host side starts a probe server on its own loopback (TCP and UDP: what reaches it proves a
way out), prepares the box from the same code as `flowerbox "ask"` (same spec, hardening,
protected paths, gateway and proxy; only the command is the probe module), runs
`python -m flowerbox.probes` inside, and decides each probe from what the box reported plus
what only the host can see: what the probe server received, the egress log, the protected
files' contents, and anything (a process, a container) that outlived the box.

The gateway gets a placeholder key and the probe server as its upstream: a self-test never
hands real credentials to anything. `negative=True` runs the same probes in a deliberately
weak container (root, default capabilities, no seccomp, no no-new-privileges, a writable
root, no pids limit, the host's network, the Docker socket, the protected paths writable):
every probe must FAIL there, or it proves nothing (security-checklist.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from flowerbox.probes import PROBES, SURVIVOR_LABEL
from flowerbox.spec import SOCKET_DIR_IN_BOX, BoxSpec

ZERO_CAPS = "0000000000000000"
DENY_PREFIX = "flowerbox egress: denied"
GIT_PROTECTED = (".git/hooks", ".git/config")
PIDS_HEADROOM = 64  # the probe tries this many threads past the limit
DOCKER_SOCKET = "/var/run/docker.sock"
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
    pids_limit: int
    token: str
    received: list[str] = field(default_factory=list)  # lines/datagrams at the probe server
    egress: list[dict[str, Any]] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # protected paths whose content changed
    survivors: list[str] = field(default_factory=list)  # containers and processes left behind
    git: bool = True  # the workspace is a git repository


@dataclass(frozen=True)
class Report:
    verdicts: list[Verdict]
    negative: bool
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return all(verdict.ok for verdict in self.verdicts)


# --- the probe server: what reaches it is a way out ----------------------------------------


class ProbeServer:
    """TCP and UDP on 127.0.0.1 (random ports); records every line or datagram it gets."""

    def __init__(self) -> None:
        self.received: list[str] = []
        lock = threading.Lock()
        received = self.received

        class Tcp(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                self.connection.settimeout(3)
                with contextlib.suppress(OSError):
                    line = self.rfile.readline(256).decode(errors="replace").strip()
                    with lock:
                        received.append(line)
                    self.wfile.write(b"flowerbox-probe-server\n")

        class Udp(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with lock:
                    received.append(self.request[0].decode(errors="replace").strip())

        self._tcp = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Tcp)
        self._udp = socketserver.ThreadingUDPServer(("127.0.0.1", 0), Udp)
        self._tcp.daemon_threads = self._udp.daemon_threads = True
        self.port = int(self._tcp.server_address[1])
        self.udp_port = int(self._udp.server_address[1])

    def __enter__(self) -> ProbeServer:
        for server in (self._tcp, self._udp):
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        for server in (self._tcp, self._udp):
            server.shutdown()
            server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


# --- judging: one function per probe --------------------------------------------------------


def _identity(o: dict[str, Any], seen: Seen) -> Verdict:
    uid, euid = o["uid"], o["euid"]
    if uid == euid == seen.uid == 0:
        return Verdict(
            "identity",
            True,
            "uid 0: flowerbox runs as root, so the box does (every other restriction holds); "
            "run flowerbox as your own user, in the docker group, to avoid it",
        )
    if uid == euid == seen.uid:
        return Verdict("identity", True, f"uid {uid}: yours, not root")
    return Verdict("identity", False, f"uid {uid} (euid {euid}), expected your uid {seen.uid}")


def _capabilities(o: dict[str, Any], seen: Seen) -> Verdict:
    ok = o["CapEff"] == o["CapBnd"] == ZERO_CAPS
    why = "CapEff and CapBnd are 0" if ok else f"CapEff {o['CapEff']}, CapBnd {o['CapBnd']}"
    return Verdict("capabilities", ok, why)


def _no_new_privs(o: dict[str, Any], seen: Seen) -> Verdict:
    ok = o["NoNewPrivs"] == 1
    return Verdict("no_new_privs", ok, "set" if ok else "NoNewPrivs 0: setuid binaries work")


def _seccomp(o: dict[str, Any], seen: Seen) -> Verdict:
    ok = o["Seccomp"] == 2
    why = "mode 2 (a filter)" if ok else f"mode {o['Seccomp']}: no seccomp filter"
    return Verdict("seccomp", ok, why)


def _read_only_root(o: dict[str, Any], seen: Seen) -> Verdict:
    problems = []
    if o["root_writable"]:
        problems.append("/ is writable")
    if o["tmp_exec"]:
        problems.append("a script written to /tmp runs")
    if problems:
        return Verdict("read_only_root", False, "; ".join(problems))
    return Verdict("read_only_root", True, "/ refuses writes, /tmp refuses to execute")


def _docker_socket(o: dict[str, Any], seen: Seen) -> Verdict:
    if o["sockets"]:
        return Verdict("docker_socket", False, f"the engine's socket is here: {o['sockets']}")
    return Verdict("docker_socket", True, "no docker.sock")


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
    return Verdict("udp", True, "no datagram left the box")


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
    if f"proxied {seen.token}" in seen.received:
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
    return Verdict("protected_paths", True, f"read-only: {', '.join(o['refused'])}")


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


# --- the negative control's weak container -------------------------------------------------


def weaken(
    kwargs: dict[str, Any], *, protected: tuple[Path, ...], docker_socket: str
) -> dict[str, Any]:
    """The agent's container kwargs made deliberately weak, one loosening per probe: root,
    default capabilities, no seccomp and no no-new-privileges, a writable root with an
    executable /tmp, no pids limit, the host's network, the Docker socket, and the protected
    paths left writable. The relay's loopback ports move to free ones (the host's network)."""
    weak = {k: v for k, v in kwargs.items() if k not in ("cap_drop", "tmpfs", "pids_limit")}
    ro = {str(path) for path in protected}
    volumes = {host: bind for host, bind in kwargs["volumes"].items() if host not in ro}
    volumes[docker_socket] = {"bind": DOCKER_SOCKET, "mode": "rw"}
    moves = {port: _free_port() for port in _relay_ports(kwargs["command"])}
    return {
        **weak,
        "user": "0:0",
        "security_opt": ["seccomp=unconfined"],
        "read_only": False,
        "network_mode": "host",
        "volumes": volumes,
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


def permissive(spec: BoxSpec, name: str) -> BoxSpec:
    """The negative control's proxy: it lets the probes' loopback targets and denied name
    through (the name mapped to the host's loopback in the gateway's hosts file, so nothing
    is looked up), so the proxy probes show they see a proxy that does not refuse."""
    return replace(
        spec,
        allow=(*spec.allow, "127.0.0.1", "localhost", name),
        egress_hosts=(*spec.egress_hosts, (name, "127.0.0.1")),
    )


def denied_name(token: str) -> str:
    return f"flowerbox-selftest-{token}.invalid"


# --- running it -----------------------------------------------------------------------------


@contextlib.contextmanager
def placeholder_credentials(upstream: str) -> Iterator[None]:
    """For the duration, this process's credentials are a placeholder key aimed at `upstream`
    (the probe server): prepare() then hands the gateway nothing real. Keys present in the
    environment, even empty, are never overwritten by .env files (flower.load_dotenv)."""
    keys = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
    saved = {key: os.environ.get(key) for key in keys}
    os.environ.update(
        ANTHROPIC_API_KEY="sk-flowerbox-selftest",
        ANTHROPIC_AUTH_TOKEN="",
        ANTHROPIC_BASE_URL=upstream,
    )
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def probe_command(
    spec: BoxSpec,
    server: ProbeServer,
    *,
    token: str,
    marker: str,
    probes: tuple[str, ...] = PROBES,
) -> list[str]:
    command = [
        "python",
        "-m",
        "flowerbox.probes",
        "--server",
        f"127.0.0.1:{server.port}",
        "--udp",
        f"127.0.0.1:{server.udp_port}",
        "--token",
        token,
        "--marker",
        marker,
        "--pids",
        str(spec.limits.pids + PIDS_HEADROOM),
        "--denied-name",
        denied_name(token),
        "--workspace",
        str(spec.workspace),
        "--image",
        spec.image,
    ]
    for name in spec.protected:
        command += ["--protect", name]
    if probes != PROBES:
        command += [arg for name in probes for arg in ("--only", name)]
    return command


def _digests(workspace: Path, names: tuple[str, ...]) -> dict[str, str]:
    """A content digest per protected path (a folder: its file names and contents)."""
    found = {}
    for name in names:
        path = workspace / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        digest = hashlib.sha256()
        for file in files:
            if file.is_file():
                digest.update(str(file.relative_to(workspace)).encode())
                digest.update(file.read_bytes())
        found[name] = digest.hexdigest()
    return found


def _processes_with(marker: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if marker.encode() in cmdline.read_bytes():
                found.append(f"process {cmdline.parent.name}")
    return found


def _egress_log(spec: BoxSpec) -> list[dict[str, Any]]:
    path = spec.egress_log
    entries = []
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    entries.append(entry)
    return entries


def selftest(
    *,
    workspace: Path | None,
    image: str,
    base_image: str | None = None,
    negative: bool = False,
    prepare_options: dict[str, Any] | None = None,
    probes: tuple[str, ...] = PROBES,
    real_credentials: bool = False,
) -> Report:
    """Run the probes in a box prepared as a real run's (or, negative, a weak one); judge.

    Raises:
        ValueError: a bad workspace (the same refusals as a run).
        flowerbox.box.BoxError: no engine, no image, a container that would not start.
    """
    from flowerbox.box import Box, connect, ensure_image, labelled
    from flowerbox.cli import CHECKOUT
    from flowerbox.prepare import in_git, prepare

    token, marker = secrets.token_hex(6), f"fbx-survivor-{secrets.token_hex(6)}"
    with ProbeServer() as server:
        credentials = (
            contextlib.nullcontext() if real_credentials else placeholder_credentials(server.url)
        )
        with credentials:
            prepared = prepare(
                ["selftest"],
                workspace=workspace,
                image=image,
                isolate=False,
                **(prepare_options or {}),
            )
        spec = replace(
            prepared.spec,
            command=tuple(
                probe_command(prepared.spec, server, token=token, marker=marker, probes=probes)
            ),
        )
        if negative:
            spec = permissive(spec, denied_name(token))
        names = spec.protected
        before = _digests(spec.workspace, names)
        out, err = bytearray(), bytearray()
        try:
            client = connect()
            ensure_image(client, image, context=CHECKOUT, base_image=base_image)
            shape = None
            if negative:
                paths = tuple(spec.workspace / name for name in names)
                shape = partial(weaken, protected=paths, docker_socket=_docker_socket_path())
            Box(spec, client=client, shape=shape).run(write=out.extend, write_err=err.extend)
            survivors = labelled(client, f"{SURVIVOR_LABEL}={marker}")
            left = [f"container {c.name}" for c in survivors]
            left += [
                f"container {c.name}" for c in labelled(client, f"dev.flower.box.run={spec.run_id}")
            ]
            for container in survivors:
                with contextlib.suppress(Exception):
                    container.remove(force=True)
        finally:
            prepared.cleanup()
        seen = Seen(
            uid=os.getuid(),
            pids_limit=spec.limits.pids,
            token=token,
            received=list(server.received),
            egress=_egress_log(spec),
            changed=[n for n, d in _digests(spec.workspace, names).items() if before[n] != d],
            survivors=left + _processes_with(marker),
            git=in_git(spec.workspace),
        )
    verdicts = judge(out.decode(errors="replace"), seen, probes)
    return Report(verdicts, negative, err.decode(errors="replace"))


def _docker_socket_path() -> str:
    host = os.environ.get("DOCKER_HOST", "")
    return host.removeprefix("unix://") if host.startswith("unix://") else DOCKER_SOCKET


# --- the command ----------------------------------------------------------------------------


def main(
    *,
    workspace: Path | None,
    image: str,
    base_image: str | None,
    negative: bool,
    as_json: bool,
    network: dict[str, Any] | None = None,
) -> int:
    """`flowerbox selftest`: print one line per probe; 0 all PASS, 1 any FAIL, 2 no box."""
    from rich.console import Console

    from flowerbox.box import BoxError

    stderr = Console(stderr=True, highlight=False, soft_wrap=True)
    if negative:
        stderr.print(
            "negative control: a deliberately weak container (root, default capabilities, "
            "no seccomp, host network, the Docker socket): every probe should FAIL here"
        )
    try:
        report = selftest(
            workspace=workspace,
            image=image,
            base_image=base_image,
            negative=negative,
            prepare_options=network,
        )
    except (ValueError, RuntimeError, BoxError) as exc:
        stderr.print(f"[bold red]error:[/] {exc}")
        return 2
    for verdict in report.verdicts:
        if as_json:
            print(json.dumps({"probe": verdict.probe, "ok": verdict.ok, "why": verdict.why}))
        else:
            print(verdict.line())
    failed = sum(not verdict.ok for verdict in report.verdicts)
    if any(verdict.why.startswith(SILENT) for verdict in report.verdicts):
        stderr.print(
            "some probes never reported: an image older than this flowerbox? run "
            f"`flowerbox build`. The box's stderr ended with:\n{report.stderr[-1500:]}",
            markup=False,
        )
    stderr.print(
        f"{len(report.verdicts)} probes: {len(report.verdicts) - failed} PASS, {failed} FAIL"
    )
    return 1 if failed else 0
