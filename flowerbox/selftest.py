"""`flowerbox selftest`: the escape probes run in a box made exactly as a real run's, judged here.

    report = selftest(workspace=None, image="flowerbox:dev")
    for verdict in report.verdicts: print(verdict.line())

The host side starts a probe server on its own loopback (TCP and UDP: what reaches it proves a
way out), prepares the box from the same code as `flowerbox "ask"` (same spec, hardening,
protected paths, gateway and proxy; only the command is the probe module), runs
`python -m flowerbox.probes` inside, and decides each probe from what the box reported plus
what only the host can see: what the probe server received, the egress log, the protected
files' contents, and anything (a process, a container) that outlived the box. The
judging itself is flowerbox.verdicts.

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
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from flowerbox.probes import PROBES, SURVIVOR_LABEL
from flowerbox.spec import SOCKET_DIR_IN_BOX, BoxSpec, protected_sources
from flowerbox.verdicts import PIDS_HEADROOM, SILENT, Seen, Verdict, judge

DOCKER_SOCKET = "/var/run/docker.sock"


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
    from flowerbox.boundary import before_run
    from flowerbox.box import Box, connect, ensure_image, image_id, labelled
    from flowerbox.cli import CHECKOUT
    from flowerbox.prepare import Prepared, in_git, prepare

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
            spec = before_run(spec, image_id=image_id(client, image))  # a run's own git too
            prepared = Prepared(spec)
            prepared.write_secrets()
            shape = None
            if negative:
                paths = protected_sources(spec)
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
