"""BoxSpec: what a box is, as data; and the docker kwargs it becomes. No docker import here.

Two containers from one image: the *agent* (flower and the Claude Code CLI; no network of its
own; the workspace, the run dir, the workbench and the CLI's HOME at their host paths) and the
*gateway* sidecar (the only holder of the credentials; listens on a unix socket in a private
folder both containers share; reaches the real API). Both are hardened the same way (DESIGN.md
"Hardened by default"; security-checklist.md A.1): the host user's uid:gid, read-only root with
a noexec tmpfs, every capability dropped, no-new-privileges, the default seccomp profile, pid,
memory and CPU limits, an init, no Docker socket, labels so flowerbox finds what it owns.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LABEL = "dev.flower.box"
API_PORT = 8080
PROXY_PORT = 3128  # the egress proxy inside the agent's container (docs/egress.md)
NETS = ("allowlist", "open")  # --net: the proxy's allowlist, or a network of the agent's own
PLACEHOLDER_KEY = "sk-flowerbox-placeholder"  # what the agent sees: worth nothing
SOCKET_DIR_IN_BOX = "/run/flowerbox"
SECRETS_IN_GATEWAY = "/run/flowerbox-secrets"
# Mounted read-only inside the workspace so nothing planted there runs later on the host or
# in the next build (DESIGN.md "Anti-persistence"). A workspace adds its own in CONFIG.
PROTECTED = (".git/hooks", ".git/config", "Dockerfile", "compose.yaml", ".flowerbox")
CONFIG = ".flowerbox/config.toml"  # inside a protected folder: the agent cannot change it
TMPFS = "rw,noexec,nosuid,nodev,size=256m"
# The gateway parses HTTP the agent writes: whatever that costs it, it never has every core
# of the host (at most half of them, and one at most; it needs far less).
GATEWAY_CPUS = 1.0


@dataclass(frozen=True)
class Limits:
    pids: int = 512
    memory: str = "4g"
    cpus: float = 2.0


@dataclass(frozen=True)
class BoxSpec:
    """One run's box. Paths are host paths, realpaths, mounted at the same path inside."""

    image: str
    workspace: Path
    run_dir: Path
    home: Path
    socket_dir: Path
    secrets_dir: Path
    uid: int
    gid: int
    command: tuple[str, ...]
    run_id: str
    workbench: Path | None = None
    limits: Limits = field(default_factory=Limits)
    upstream_on_loopback: bool = False
    budget_usd: float | None = None
    protected: tuple[str, ...] = PROTECTED  # workspace-relative, mounted read-only if present
    net: str = "allowlist"  # one of NETS
    allow: tuple[str, ...] = ()  # the egress allowlist, presets expanded (flowerbox.egress)
    egress_hosts: tuple[tuple[str, str], ...] = ()  # (name, address) for the gateway's hosts

    @property
    def labels(self) -> dict[str, str]:
        return {LABEL: "1", f"{LABEL}.run": self.run_id, f"{LABEL}.workspace": str(self.workspace)}

    @property
    def box_dir(self) -> Path:
        """This run's host folder for what flowerbox itself records (logs, metadata)."""
        return self.run_dir / "flowerbox" / self.run_id

    @property
    def api_socket(self) -> Path:
        return self.socket_dir / "api.sock"

    @property
    def egress_log(self) -> Path:
        """One JSON line per decision of the egress proxy (host side)."""
        return self.box_dir / "egress.jsonl"


def protected_paths(workspace: Path) -> tuple[str, ...]:
    """PROTECTED plus the workspace's own `protect = [...]` list in CONFIG, if any.

    Raises:
        ValueError: an unreadable CONFIG, or an entry that is not a relative path inside the
            workspace; the message names the file and the entry.
    """
    path = workspace / CONFIG
    if not path.is_file():
        return PROTECTED
    try:
        extra = tomllib.loads(path.read_text(encoding="utf-8")).get("protect", [])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}; fix it or remove it") from exc
    if not isinstance(extra, list) or not all(isinstance(entry, str) for entry in extra):
        raise ValueError(f'{path}: `protect` must be a list of paths, e.g. protect = ["deploy/"]')
    names = list(PROTECTED)
    for entry in extra:
        name = entry.strip().rstrip("/")
        if not name or Path(name).is_absolute() or ".." in Path(name).parts:
            raise ValueError(
                f"{path}: protect entry {entry!r} must be a path relative to the workspace, "
                "inside it (no leading / and no ..)"
            )
        if name not in names:
            names.append(name)
    return tuple(names)


def _hardening(spec: BoxSpec) -> dict[str, Any]:
    """What both containers share: who runs, what the root fs is, what the kernel allows."""
    return {
        "user": f"{spec.uid}:{spec.gid}",
        "read_only": True,
        "tmpfs": {"/tmp": TMPFS},
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "pids_limit": spec.limits.pids,
        "mem_limit": spec.limits.memory,
        "memswap_limit": spec.limits.memory,  # no swap beyond the memory limit
        "nano_cpus": int(spec.limits.cpus * 1e9),
        "init": True,
        "labels": spec.labels,
    }


def _bind(path: Path, *, read_only: bool = False) -> dict[str, str]:
    return {"bind": str(path), "mode": "ro" if read_only else "rw"}


def agent_env(spec: BoxSpec) -> dict[str, str]:
    """The agent's environment: nothing secret in it (the key is a placeholder)."""
    api = f"http://127.0.0.1:{API_PORT}"
    env = {
        "HOME": str(spec.home),
        "ANTHROPIC_BASE_URL": api,
        "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
        # The CLI sends even 127.0.0.1 traffic through a proxy unless excluded.
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # wait_online probes the gateway's view of the real upstream, not the relay.
        "FLOWER_HEALTH_URL": f"{api}/health",
        "FLOWER_NO_UPDATE": "1",
    }
    if spec.net == "allowlist":  # everything else leaves through the egress proxy
        proxy = f"http://127.0.0.1:{PROXY_PORT}"
        env |= dict.fromkeys(("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"), proxy)
    if spec.uid == 0:
        env["IS_SANDBOX"] = "1"  # the CLI refuses unattended permissions as root otherwise
    return env


def agent_kwargs(spec: BoxSpec) -> dict[str, Any]:
    """docker's containers.run() kwargs for the agent's container."""
    volumes = {
        str(spec.workspace): _bind(spec.workspace),
        str(spec.run_dir): _bind(spec.run_dir),
        str(spec.home): _bind(spec.home),
        str(spec.socket_dir): _bind(Path(SOCKET_DIR_IN_BOX)),
    }
    if spec.workbench is not None:
        volumes[str(spec.workbench)] = _bind(spec.workbench)
    for name in spec.protected:
        path = spec.workspace / name
        if path.exists():
            volumes[str(path)] = _bind(path, read_only=True)
    relays = [f"127.0.0.1:{API_PORT}={SOCKET_DIR_IN_BOX}/api.sock"]
    if spec.net == "allowlist":
        relays.append(f"127.0.0.1:{PROXY_PORT}={SOCKET_DIR_IN_BOX}/proxy.sock")
    inside = ["python", "-m", "flowerbox.inside", *(a for r in relays for a in ("--relay", r))]
    return {
        **_hardening(spec),
        "image": spec.image,
        "command": [*inside, "--", *spec.command],
        "working_dir": str(spec.workspace),
        "environment": agent_env(spec),
        "volumes": volumes,
        # No route of its own: the relay to the gateway is the way out. `--net open` is the
        # explicit escape hatch: a normal network (the API still goes through the gateway).
        "network_mode": "none" if spec.net == "allowlist" else "bridge",
        "name": f"flowerbox-{spec.run_id}",
        "labels": {**spec.labels, f"{LABEL}.role": "agent"},
    }


def gateway_kwargs(spec: BoxSpec) -> dict[str, Any]:
    """docker's containers.run() kwargs for the gateway sidecar (detached)."""
    command = [
        "python",
        "-m",
        "flowerbox.gateway",
        "--socket",
        f"{SOCKET_DIR_IN_BOX}/api.sock",
        "--credentials",
        f"{SECRETS_IN_GATEWAY}/credentials.env",
        "--usage",
        str(spec.run_dir / "gateway-usage.json"),
    ]
    if spec.budget_usd is not None:
        command += ["--budget", str(spec.budget_usd)]
    if spec.net == "allowlist":
        command += ["--proxy-socket", f"{SOCKET_DIR_IN_BOX}/proxy.sock"]
        command += ["--egress-log", str(spec.egress_log)]
        command += [arg for entry in spec.allow for arg in ("--allow", entry)]
    extra = {"extra_hosts": dict(spec.egress_hosts)} if spec.egress_hosts else {}
    cpus = min(spec.limits.cpus, GATEWAY_CPUS, (os.cpu_count() or 1) / 2)
    return {
        **_hardening(spec),
        "nano_cpus": int(cpus * 1e9),
        "image": spec.image,
        "command": command,
        "volumes": {
            str(spec.socket_dir): _bind(Path(SOCKET_DIR_IN_BOX)),
            str(spec.secrets_dir): _bind(Path(SECRETS_IN_GATEWAY), read_only=True),
            str(spec.run_dir): _bind(spec.run_dir),
        },
        "environment": {"FLOWER_NO_UPDATE": "1"},
        # A real API is reached over a network of its own; a loopback one (tests, a local
        # gateway of the user's) only from the host's network: the one exception to "only the
        # network it needs", documented in docs/gateway.md ("The gateway's own box").
        "network_mode": "host" if spec.upstream_on_loopback else "bridge",
        "name": f"flowerbox-gateway-{spec.run_id}",
        "labels": {**spec.labels, f"{LABEL}.role": "gateway"},
        "detach": True,
        **extra,
    }
