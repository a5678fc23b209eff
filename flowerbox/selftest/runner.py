"""`flowerbox selftest`: the escape probes run in a box made exactly as a real run's, judged here.

    report = selftest(BoxOptions())
    for verdict in report.verdicts: print(verdict.line())

The host side starts a probe server on its own loopback (TCP and UDP: what reaches it proves a
way out), prepares the box from the same code as `flowerbox "ask"` (same spec, hardening,
protected paths, gateway and proxy; only the command is the probe module), runs
`python -m flowerbox.selftest.probes` inside, and decides each probe from what the box reported plus
what only the host can see: what the probe server received, the egress log, the protected
files' contents, and anything (a process, a container) that outlived the box. The
judging itself is flowerbox.selftest.verdicts.

Then the host boundary: the last thing the box does is plant the trust-boundary attacks in
the workspace (flowerbox.selftest.tampering.host_plants); once it is gone, flowerbox's own host code
is run against them (selftest.hostboundary), judged as a section of its own, and every plant
is removed again.

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
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from flower import Lookup, load_dotenv, text
from flowerbox import wire
from flowerbox.box.engine import Box, connect, ensure_image, image_id, labelled
from flowerbox.box.gitshadow import layout
from flowerbox.box.options import BoxOptions
from flowerbox.box.prepare import LOOPBACK, Prepared, in_git, prepare, workspace_of
from flowerbox.box.source import RUNNING_CHECKOUT
from flowerbox.box.spec import BoxSpec
from flowerbox.runs.boundary import before_run
from flowerbox.selftest import hostboundary
from flowerbox.selftest.controls import DOCKER_SOCKET, Control, Where
from flowerbox.selftest.hostboundary import Area
from flowerbox.selftest.kernel import boot_time, host_process
from flowerbox.selftest.probes import PROBES
from flowerbox.selftest.tampering import HOOKS_PLANT, Plants
from flowerbox.selftest.verdicts import PIDS_HEADROOM, Seen, Verdict, judge, judge_host

HOST_SECTION = "host boundary"


@dataclass(frozen=True)
class Report:
    verdicts: list[Verdict]  # the in-box probes
    control: str  # "" for the real box, else the negative control's name
    stderr: str = ""
    host: list[Verdict] = field(default_factory=list)  # the host-boundary checks
    left: list[str] = field(default_factory=list)  # plants the host side could not remove

    @property
    def ok(self) -> bool:
        return all(verdict.ok for verdict in (*self.verdicts, *self.host))


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


# --- running it -----------------------------------------------------------------------------


def denied_name(token: str) -> str:
    return f"flowerbox-selftest-{token}.invalid"


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
    *,
    tcp: str,
    udp: str,
    token: str,
    marker: str,
    probes: tuple[str, ...] = PROBES,
    area: Area | None = None,
) -> list[str]:
    command = [
        "python",
        "-m",
        wire.PROBES_MODULE,
        "--server",
        tcp,
        "--udp",
        udp,
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
    if area is not None:
        command += ["--host-marker", area.marker, "--outside", str(area.outside)]
        command += ["--run-id", spec.run_id]
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
                found.append(text("verdict.process", pid=cmdline.parent.name))
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


def _repo_state(workspace: Path) -> dict[str, Any]:
    """What a git redirect would change in the user's real `.git`, seen from the host (no
    symlink followed): what `.git` is (its inode: a replacement is a new one) and whether it
    holds a `commondir`."""
    git = workspace / ".git"
    try:
        info = git.lstat()
    except OSError:
        return {"git": None, "commondir": False}
    commondir = git / "commondir"
    return {
        "git": (info.st_mode >> 12, info.st_ino),
        "commondir": commondir.is_symlink() or commondir.exists(),
    }


def _repo_changes(workspace: Path, before: dict[str, Any]) -> list[str]:
    """The redirects that reached the user's repository."""
    after = _repo_state(workspace)
    changes = []
    if after["git"] != before["git"]:
        changes.append(text("verdict.git_replaced"))
    if after["commondir"] and not before["commondir"]:
        changes.append(text("verdict.commondir_appeared"))
    return changes


def _remove_git_plant(workspace: Path, before: dict[str, Any], token: str) -> None:
    """The probe's commondir plant (a regular file naming its hooks folder, nothing else)
    and that folder, where they reached the user's own `.git` (a box given the user's
    gitdir); only in the same `.git`, only our own."""
    if _repo_state(workspace)["git"] != before["git"] or before["commondir"]:
        return
    plant = workspace / ".git" / "commondir"
    with contextlib.suppress(OSError):
        ours = f"{HOOKS_PLANT}{token}\n".encode()
        if plant.is_file() and not plant.is_symlink() and plant.read_bytes() == ours:
            plant.unlink()
    hostboundary.remove_git_plant(workspace, token)


def _credentials(placeholder_upstream: str | None) -> contextlib.AbstractContextManager[None]:
    if placeholder_upstream is None:
        return contextlib.nullcontext()
    return placeholder_credentials(placeholder_upstream)


def hand_over(prepared: Prepared, *, placeholder_upstream: str | None) -> None:
    """Write the gateway's credentials file, just before the box starts: the placeholder
    aimed at `placeholder_upstream`, never the user's own (None: the user's, for doctor)."""
    with _credentials(placeholder_upstream):
        prepared.write_secrets()


def run_box(options: BoxOptions, *, placeholder_upstream: str | None) -> Prepared:
    """The box a `flowerbox "ask"` run in `workspace` would get, from the same prepare(): its
    protected paths, isolation (and so the workbench mount) when the workspace is a
    repository's top folder (unless `options` say no isolation), the user's egress `options`, and
    the gateway on the network a run's would take (the host's only for a loopback
    ANTHROPIC_BASE_URL, as the user's own settings say). With `placeholder_upstream`, the
    gateway will get a placeholder key aimed there (hand_over writes it).
    """
    isolate = options.isolate and layout(workspace_of(options.workspace)) == "dir"
    with _credentials(placeholder_upstream):
        prepared = prepare(["selftest"], replace(options, isolate=isolate))
    # The user's own settings (never a workspace .env: as a run looks, after prepare() checked
    # $FLOWER_ENV) decide the gateway's network, as they would a run's.
    load_dotenv(lookup=Lookup.from_process(project=False))
    upstream = os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
    prepared.spec = replace(
        prepared.spec, upstream_on_loopback=urlsplit(upstream).hostname in LOOPBACK
    )
    return prepared


def selftest(
    options: BoxOptions,
    *,
    control: Control | None = None,
    probes: tuple[str, ...] = PROBES,
    real_credentials: bool = False,
) -> Report:
    """Run the probes in a box prepared as a real run's (run_box, then the boundary's
    before_run: the box's own gitdir) or in a negative control, and judge; with every probe,
    then run the host side against what the box planted and judge that too (Report.host).
    Only the credentials are a placeholder, aimed at the probe server, and the command is the
    probe module.

    Raises:
        ConfigError: a bad workspace (the same refusals as a run).
        flowerbox.errors.BoxError: no engine, no image, a container that would not start.
    """
    token, marker = secrets.token_hex(6), f"fbx-survivor-{secrets.token_hex(6)}"
    with ProbeServer() as server:
        placeholder = None if real_credentials else server.url
        prepared = run_box(options, placeholder_upstream=placeholder)
        spec = prepared.spec
        names = spec.protected
        where = Where(
            workspace=spec.workspace,
            protected=tuple(spec.workspace / n for n in names if (spec.workspace / n).exists()),
            docker_socket=_docker_socket_path(),
            denied_name=denied_name(token),
        )
        shape = None
        if control is not None:
            spec = control.spec(spec, where)
            shape = partial(_shaped, control=control, where=where)
        before, repo = _digests(spec.workspace, names), _repo_state(spec.workspace)
        out, err = bytearray(), bytearray()
        host: list[Verdict] = []
        left_over: list[str] = []
        from_host: dict[str, Any] = {}  # the agent's container as the engine started it

        def started(facts: dict[str, Any]) -> None:  # read while the box runs
            from_host["process"] = host_process(facts.get("host_pid"))

        area = Area.make(spec.workspace, token) if probes == PROBES else None
        try:
            command = probe_command(
                spec,
                tcp=f"127.0.0.1:{server.port}",
                udp=f"127.0.0.1:{server.udp_port}",
                token=token,
                marker=marker,
                probes=probes,
                area=area,
            )
            spec = replace(spec, command=tuple(command))
            try:
                client = connect()
                ensure_image(
                    client, options.image, context=RUNNING_CHECKOUT, base_image=options.base_image
                )
                # a run's own git too
                spec = before_run(spec, image_id=image_id(client, options.image))
                prepared = Prepared(spec)
                hand_over(prepared, placeholder_upstream=placeholder)
                box = Box(spec, client=client, shape=shape, on_started=started)
                box.run(write=out.extend, write_err=err.extend)
                survivors = labelled(client, f"{wire.SURVIVOR_LABEL}={marker}")
                left = [text("verdict.container", name=c.name) for c in survivors]
                left += [
                    text("verdict.container", name=c.name)
                    for c in labelled(client, f"{wire.RUN_LABEL}={spec.run_id}")
                ]
                for container in survivors:
                    with contextlib.suppress(Exception):
                        container.remove(force=True)
            finally:
                prepared.cleanup()
            repo_changed = _repo_changes(spec.workspace, repo)
            if area is not None:
                host = _host_boundary(
                    spec, out.decode(errors="replace"), area, server, repo_changed, token
                )
        finally:
            _remove_git_plant(spec.workspace, repo, token)
            if area is not None:
                plants = Plants(token)
                left_over = hostboundary.remove(spec.workspace, plants, area, run_id=spec.run_id)
        seen = Seen(
            uid=os.getuid(),
            gid=os.getgid(),
            pids_limit=spec.limits.pids,
            token=token,
            received=list(server.received),
            egress=_egress_log(spec),
            changed=[n for n, d in _digests(spec.workspace, names).items() if before[n] != d],
            survivors=left + _processes_with(marker),
            git=in_git(spec.workspace),
            repo_changed=repo_changed,
            runtime=spec.runtime,
            host_btime=boot_time(),
            host_process=from_host.get("process", {}),
        )
    verdicts = judge(out.decode(errors="replace"), seen, probes)
    name = "" if control is None else control.name
    return Report(verdicts, name, err.decode(errors="replace"), host, left_over)


def _host_boundary(
    spec: BoxSpec,
    output: str,
    area: Area,
    server: ProbeServer,
    repo_changed: list[str],
    token: str,
) -> list[Verdict]:
    """flowerbox's host code run against what the box planted, judged."""

    plants = Plants(token)
    observed = hostboundary.observe(
        spec.workspace,
        plants,
        run=hostboundary.check_run(spec, plants),
        area=area,
        port=server.port,
        received=list(server.received),
        repo_changed=repo_changed,
        git=in_git(spec.workspace),
    )
    return judge_host(output, observed, forged=plants.forged_id)


def _shaped(kwargs: dict[str, Any], *, control: Control, where: Where) -> dict[str, Any]:
    return control.agent(kwargs, where)


def _docker_socket_path() -> str:
    host = os.environ.get("DOCKER_HOST", "")
    return host.removeprefix("unix://") if host.startswith("unix://") else DOCKER_SOCKET
