"""The escape self-test's probes, run INSIDE a box: each prints what the process really gets.

    python -m flowerbox.selftest.probes --server 127.0.0.1:PORT --udp 127.0.0.1:PORT --token T \\
        --marker M --pids 576 --denied-name x.invalid --protect .git/hooks --protect ...

One JSON line per probe on stdout, `{"probe": NAME, ...observations, "token": T}`; a probe
that crashes reports `{"probe": NAME, "broken": ..., "token": T}`. The token (--token) ties a
line to this probe run where the output is a log a reader gets back later (a Pod's, on a
cluster: flowerbox.kube.selftest keeps only lines carrying it). Nothing is judged here: the
host side (`flowerbox.selftest.runner`) knows what was expected (the host user's uid, the
pids limit, what the probe server received, the egress log) and decides PASS or FAIL.

Every target stays on this machine (DESIGN.md "Probes never leave this machine"): the probe
server on the host's loopback, names under `.invalid`, and route lookups (a UDP `connect()`
to a documentation address asks the kernel for a route and sends no packet).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import http.client
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from flowerbox import wire
from flowerbox.selftest import sockets, syscalls
from flowerbox.selftest.kernel import boot_time, kernel_log
from flowerbox.selftest.tampering import (  # noqa: F401 - main() looks every probe up by name
    git_redirects,
    host_plants,
    protected_parents,
    protected_paths,
)

PROBES: tuple[str, ...] = (
    "identity",
    "capabilities",
    "no_new_privs",
    "seccomp",
    "read_only_root",
    "docker_socket",
    "interfaces",
    "direct_tcp",
    "udp",
    "raw_socket",
    "ipv6_route",
    "proxy_denied_name",
    "proxy_internal_targets",
    "protected_paths",
    "protected_parents",
    "git_redirects",
    "setuid",
    "survivor",
    "pids_limit",
    "kernel",
)
# Not escape probes: what `flowerbox doctor` asks a real box (--only gateway_health).
EXTRA: tuple[str, ...] = ("gateway_health",)
# Run after the probes, judged by none of them: the attacks the host side is then run
# against (flowerbox.selftest.hostboundary), left in place for it.
PLANTS: tuple[str, ...] = ("host_plants",)
# Route lookups only (RFC 5737 / RFC 3849 documentation ranges): no packet is sent.
ROUTE_V4 = ("198.51.100.1", 9)
ROUTE_V6 = ("2001:db8::1", 9)
# Targets the proxy must refuse as addresses, whatever the allowlist says about names.
METADATA = "169.254.169.254:80"
PRIVATE = "10.0.0.1:443"
TIMEOUT = 3.0

Observation = dict[str, Any]


@contextlib.contextmanager
def _closing_socket(family: int, kind: int, proto: int = 0) -> Iterator[socket.socket]:
    sock = socket.socket(family, kind, proto)
    try:
        sock.settimeout(TIMEOUT)
        yield sock
    finally:
        sock.close()


def _status() -> dict[str, str]:
    lines = Path("/proc/self/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def identity(args: argparse.Namespace) -> Observation:
    """Who the process is, supplementary groups included (a `docker` group is the engine)."""
    return {
        "uid": os.getuid(),
        "euid": os.geteuid(),
        "gid": os.getgid(),
        "groups": sorted(os.getgroups()),
    }


def capabilities(args: argparse.Namespace) -> Observation:
    status = _status()
    return {"CapEff": status["CapEff"], "CapBnd": status["CapBnd"]}


def no_new_privs(args: argparse.Namespace) -> Observation:
    """The flag as the kernel answers prctl(PR_GET_NO_NEW_PRIVS), the judged fact (gVisor's
    /proc/self/status has no NoNewPrivs line), and the status line where there is one."""
    libc = ctypes.CDLL(None, use_errno=True)
    return {
        "NoNewPrivs": int(_status().get("NoNewPrivs", "0")),
        "prctl": libc.prctl(39, 0, 0, 0, 0),
    }


def seccomp(args: argparse.Namespace) -> Observation:
    """The filter mode, and what seven syscalls the default profile refuses really got
    (flowerbox.selftest.syscalls: harmless arguments, "EPERM" from a filter)."""
    try:
        tried: dict[str, str] | None = syscalls.attempt_all()
    except KeyError:
        tried = None  # a machine without a syscall table here: the judge says so
    return {
        "Seccomp": int(_status().get("Seccomp", "0")),
        "machine": os.uname().machine,
        "syscalls": tried,
    }


def read_only_root(args: argparse.Namespace) -> Observation:
    """Is the root filesystem mounted read-only, does it refuse a write (at / and in the
    world-writable /var/tmp, which a non-root uid could use on a writable root), can a script
    written to /tmp be executed; and which mounts are writable (the workspace is, by design)."""
    mounts = _mounts()
    root_writable, root_error = False, ""
    for folder in ("/", "/var/tmp"):
        probe = Path(folder) / f".flowerbox-probe-{os.getpid()}"
        try:
            probe.write_text("x")
            probe.unlink()
            root_writable = True
        except OSError as exc:
            root_error = root_error or _err(exc)
    script = Path("/tmp") / f".flowerbox-probe-{os.getpid()}.sh"
    try:
        script.write_text("#!/bin/sh\necho ran\n")
        script.chmod(0o755)
        ran = subprocess.run([str(script)], capture_output=True, text=True, timeout=TIMEOUT)
        tmp_exec, tmp_error = ran.stdout.strip() == "ran", ran.stderr.strip()
    except OSError as exc:
        tmp_exec, tmp_error = False, _err(exc)
    finally:
        with contextlib.suppress(OSError):
            script.unlink()
    return {
        "root_mount": mounts.get("/", []),
        "root_writable": root_writable,
        "root_error": root_error,
        "tmp_exec": tmp_exec,
        "tmp_error": tmp_error,
        "writable_mounts": {
            point: "noexec" in options
            for point, options in mounts.items()
            if "rw" in options and point.split("/")[1:2] not in (["proc"], ["sys"], ["dev"])
        },
    }


def _mounts() -> dict[str, list[str]]:
    """Mount point -> its per-mount options (ro/rw, noexec...), from /proc/self/mountinfo."""
    found = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        if len(parts) > 5:
            found[sockets.unescape(parts[4])] = parts[5].split(",")
    return found


_ENGINES: list[str] = []  # what docker_socket found answering, for survivor


def docker_socket(args: argparse.Namespace) -> Observation:
    """Every unix socket the box can reach (selftest.sockets: the mounted filesystems and the
    network namespace's abstract ones), each asked `GET /_ping` as an engine would answer."""
    found = sockets.reachable()
    answers = {name: sockets.ping(name) for name in found.sockets}
    engines = [name for name, answer in answers.items() if answer == "engine"]
    _ENGINES[:] = engines
    return {
        "engines": engines,
        "unopenable": {n: a for n, a in answers.items() if a.startswith("unopenable")},
        "others": {n: a for n, a in answers.items() if n not in engines},
        "entries": found.entries,
        "truncated": found.truncated,
    }


def interfaces(args: argparse.Namespace) -> Observation:
    return {"interfaces": sorted(os.listdir("/sys/class/net"))}


def _route(family: int, target: tuple[str, int]) -> str:
    """'' when the kernel has a route to `target`, else the error (no packet is sent)."""
    try:
        with _closing_socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect(target)
        return ""
    except OSError as exc:
        return _err(exc)


def direct_tcp(args: argparse.Namespace) -> Observation:
    """As if the proxy variables were unset: a TCP connection to the host-loopback probe server, and
    whether the kernel has any IPv4 route out."""
    host, port = args.server  # a plain socket: no proxy variable applies to it
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT) as sock:
            sock.sendall(f"direct_tcp {args.token}\n".encode())
            reply = sock.recv(256).decode(errors="replace").strip()
        connected, error = True, ""
    except OSError as exc:
        connected, error, reply = False, _err(exc), ""
    return {
        "connected": connected,
        "error": error,
        "reply": reply,
        "route_v4": _route(socket.AF_INET, ROUTE_V4),
    }


def udp(args: argparse.Namespace) -> Observation:
    """A datagram to the host-loopback probe server (the host side says whether it arrived),
    and whether the kernel would route one off this machine's loopback: a bridged box's way
    out, which 127.0.0.1 (its own loopback there) cannot show."""
    host, port = args.udp
    try:
        with _closing_socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(f"udp {args.token}".encode(), (host, port))
        sent, error = True, ""
    except OSError as exc:
        sent, error = False, _err(exc)
    return {"sent": sent, "error": error, "route_v4": _route(socket.AF_INET, ROUTE_V4)}


def raw_socket(args: argparse.Namespace) -> Observation:
    """Raw ICMP and packet sockets are only opened, never used."""
    kinds = {
        "AF_INET/SOCK_RAW/ICMP": (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
        "AF_PACKET/SOCK_RAW": (socket.AF_PACKET, socket.SOCK_RAW, 0),
    }
    opened, errors = [], {}
    for name, (family, kind, proto) in kinds.items():
        try:
            with _closing_socket(family, kind, proto):
                opened.append(name)
        except OSError as exc:
            errors[name] = _err(exc)
    return {"opened": opened, "errors": errors}


def ipv6_route(args: argparse.Namespace) -> Observation:
    return {"route_error": _route(socket.AF_INET6, ROUTE_V6)}


def _proxy() -> tuple[str, int] | None:
    url = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    if not url:
        return None
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 3128


def _through_proxy(
    proxy: tuple[str, int], request: str, token: str, *, label: str = "proxied"
) -> Observation:
    """Send one request line to the proxy; on a 200 CONNECT, send the token through the
    tunnel (the probe server records it: proof the connection was really made)."""
    try:
        with socket.create_connection(proxy, timeout=TIMEOUT * 3) as sock:
            sock.sendall(request.encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                head += chunk
            top, _, rest = head.partition(b"\r\n\r\n")
            status_line = top.split(b"\r\n", 1)[0].decode(errors="replace")
            code = int(status_line.split()[1]) if len(status_line.split()) > 1 else 0
            body = rest
            if code == 200 and request.startswith("CONNECT"):
                sock.sendall(f"{label} {token}\n".encode())
            with contextlib.suppress(OSError):
                sock.settimeout(1.0)
                while len(body) < 2048 and (chunk := sock.recv(2048)):
                    body += chunk
        return {"status": code, "body": body[:300].decode(errors="replace")}
    except OSError as exc:
        return {"status": 0, "error": _err(exc)}


def _connect_line(target: str) -> str:
    return f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"


def proxy_denied_name(args: argparse.Namespace) -> Observation:
    """A name the allowlist does not hold, in both forms: CONNECT and plain HTTP."""
    proxy = _proxy()
    if proxy is None:
        return {"proxy": None}
    name, port = args.denied_name, args.server[1]  # the probe server's port: if let through,
    target = f"{name}:{port}"  # a name mapped to the host's loopback reaches it
    plain = f"GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n"
    return {
        "proxy": f"{proxy[0]}:{proxy[1]}",
        "name": name,
        "connect": _through_proxy(proxy, _connect_line(target), args.token, label="named"),
        "plain": _through_proxy(proxy, plain, args.token, label="named"),
    }


def proxy_internal_targets(args: argparse.Namespace) -> Observation:
    """Loopback (the host probe server itself: if the proxy connects, the server sees it),
    link-local metadata and a private address, through the proxy."""
    proxy = _proxy()
    if proxy is None:
        return {"proxy": None}
    host, port = args.server
    targets = [f"{host}:{port}", f"localhost:{port}", METADATA, PRIVATE]
    answers = {t: _through_proxy(proxy, _connect_line(t), args.token) for t in targets}
    return {"proxy": f"{proxy[0]}:{proxy[1]}", "targets": answers}


def setuid(args: argparse.Namespace) -> Observation:
    """Start a setuid-root binary (su: blocked at its password prompt, or, for root, running
    sleep) and read the uid and capabilities the kernel gave it; and ask sudo for root
    without a password, if sudo exists."""
    observation: Observation = {
        "euid": os.geteuid(),
        "CapBnd": _status()["CapBnd"],
        "su": None,
        "sudo": None,
    }
    su = next((p for p in ("/usr/bin/su", "/bin/su") if Path(p).exists()), None)
    if su is not None:
        mode = Path(su).stat()
        observation["su_setuid_root"] = bool(mode.st_mode & stat.S_ISUID) and mode.st_uid == 0
        observation["su"] = _credentials_of([su, "root", "-c", "sleep 5"])
    sudo = next((p for p in ("/usr/bin/sudo", "/bin/sudo") if Path(p).exists()), None)
    if sudo is not None:
        ran = subprocess.run(
            [sudo, "-n", "id", "-u"], capture_output=True, text=True, timeout=TIMEOUT
        )
        observation["sudo"] = {"code": ran.returncode, "stdout": ran.stdout.strip()}
    return observation


def _credentials_of(command: list[str]) -> dict[str, Any] | None:
    """The effective uid and CapEff of `command` once exec'd (None if it was gone first)."""
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                argv0 = Path(f"/proc/{process.pid}/cmdline").read_bytes().split(b"\0")[0]
                lines = Path(f"/proc/{process.pid}/status").read_text().splitlines()
            except OSError:
                return None
            if Path(argv0.decode()).name == Path(command[0]).name:  # exec done: creds final
                status = {k: v.split() for k, _, v in (line.partition(":") for line in lines)}
                return {"euid": int(status["Uid"][1]), "CapEff": status["CapEff"][0]}
            time.sleep(0.001)
        return None
    finally:
        process.kill()
        process.wait()


def survivor(args: argparse.Namespace) -> Observation:
    """Try to leave something behind: a detached process in a new session, and, where a
    Docker socket is reachable, a container of our own. The host looks for both afterwards."""
    observation: Observation = {"marker": args.marker}
    code = "import time; time.sleep(600)"
    try:
        subprocess.Popen(
            [sys.executable, "-c", code, args.marker],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        observation["process"] = "started"
    except OSError as exc:
        observation["process"] = _err(exc)
    engines = _ENGINES or docker_socket(args)["engines"]
    if not engines:
        observation["container"] = "no engine socket answered"
        return observation
    try:
        # lazy: only a box with an engine socket in reach gets this far
        from docker import DockerClient

        address = engines[0]
        if address.startswith("@"):
            raise OSError(f"an engine on the abstract socket {address}: not tried")
        client = DockerClient(base_url=f"unix://{address}", timeout=30)
        client.containers.run(
            args.image,
            ["sleep", "600"],
            detach=True,
            network_mode="none",
            labels={wire.SURVIVOR_LABEL: args.marker},
            name=f"flowerbox-survivor-{args.marker}",
        )
        observation["container"] = "started"
    except Exception as exc:  # noqa: BLE001 - any failure to start one is the observation
        observation["container"] = _err(exc)
    return observation


def pids_limit(args: argparse.Namespace) -> Observation:
    """Start up to --pids threads (each a task the pids limit counts) until one is refused."""
    release = threading.Event()
    started = 0
    error = ""
    threads = []
    try:
        for _ in range(args.pids):
            thread = threading.Thread(target=release.wait, daemon=True)
            thread.start()
            threads.append(thread)
            started += 1
    except RuntimeError as exc:
        error = _err(exc)
    finally:
        release.set()
        for thread in threads:
            thread.join()
    return {"tried": args.pids, "started": started, "error": error}


def kernel(args: argparse.Namespace) -> Observation:
    """The box's kernel as the box sees it (flowerbox.selftest.kernel: the host adds what only
    it can see): its boot time, and the first lines of its log."""
    return {"btime": boot_time(), "log": kernel_log(), "release": os.uname().release}


def gateway_health(args: argparse.Namespace) -> Observation:
    """The gateway's own health answer (FLOWER_HEALTH_URL, through the relay): up, and is
    the real upstream reachable from it?"""
    url = urlsplit(os.environ.get("FLOWER_HEALTH_URL", ""))
    if not url.hostname:
        return {"status": 0, "error": "FLOWER_HEALTH_URL is not set"}
    try:
        conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=TIMEOUT * 3)
        try:
            conn.request("GET", url.path or "/health")
            response = conn.getresponse()
            return {"status": response.status, "body": response.read(300).decode(errors="replace")}
        finally:
            conn.close()
    except OSError as exc:
        return {"status": 0, "error": _err(exc)}


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m flowerbox.selftest.probes")
    parser.add_argument("--server", type=_address, required=True, help="HOST:PORT (TCP)")
    parser.add_argument("--udp", type=_address, required=True, help="HOST:PORT (UDP)")
    parser.add_argument("--token", required=True, help="what reaches the probe server")
    parser.add_argument("--marker", required=True, help="names what tries to survive")
    parser.add_argument("--pids", type=int, default=600, help="threads to try to start")
    parser.add_argument("--denied-name", required=True, help="a name the proxy must refuse")
    parser.add_argument("--workspace", default=os.getcwd())
    parser.add_argument("--protect", action="append", default=[], help="a protected path")
    parser.add_argument("--image", default="flowerbox:dev", help="a survivor container's image")
    parser.add_argument("--only", action="append", default=[], help="run just these probes")
    parser.add_argument(
        "--host-marker", default="/tmp/fbx-selftest-unset", help="what planted code would touch"
    )
    parser.add_argument("--outside", default="/nonexistent", help="a host folder to link to")
    parser.add_argument("--run-id", default="selftest", help="names the planted events file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    table: dict[str, Callable[[argparse.Namespace], Observation]] = {
        name: globals()[name] for name in (*PROBES, *EXTRA, *PLANTS)
    }
    for name in args.only or (*PROBES, *PLANTS):
        try:
            observation = {"probe": name, **table[name](args)}
        except Exception as exc:  # noqa: BLE001 - one broken probe must not hide the others
            observation = {"probe": name, "broken": _err(exc)}
        print(json.dumps({**observation, "token": args.token}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
