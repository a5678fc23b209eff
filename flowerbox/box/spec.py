"""BoxSpec: what a box is, as data; and the docker kwargs it becomes. No docker import here.

Two containers from one image: the *agent* (flower and the Claude Code CLI; no network of its
own; the workspace, the run dir, the workbench and the CLI's HOME at their host paths) and the
*gateway* sidecar (the only holder of the credentials; listens on a unix socket in a private
folder both containers share; reaches the real API). Both are hardened the same way (DESIGN.md
"Hardened by default"; security-checklist.md A.1): the host user's uid:gid, read-only root with
a noexec tmpfs, every capability dropped, no-new-privileges, the default seccomp profile, pid,
memory and CPU limits, an init, no Docker socket, labels so flowerbox finds what it owns.

What the agent's container sees of the host (docs/threat-model.md): the workspace, its runs/,
the CLI's HOME and the workbench, read-write; never the user's git directory (a shadow of it
is mounted at `<workspace>/.git`, flowerbox.box.gitshadow) nor flowerbox's own records
(flowerbox.box.state). Every mount point is un-renameable from inside, so the protected paths are
bind-mounted read-only and each of their parent folders onto itself; a workspace `.env` is
hidden behind an empty read-only file. Docker follows links in a mount's source, so only real
folders and files (no link on the way: flowerbox.box.untrusted) are ever mounted.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from flower import ANSWER_COMMAND_ENV, LANG_ENV, RUN_ID_ENV, RunDir, text
from flowerbox import wire
from flowerbox.box.untrusted import read_bytes, real_folder, regular_file
from flowerbox.errors import ConfigError
from flowerbox.wire import (
    BOX_LABEL,
    OBJECTS_IN_BOX,
    PLACEHOLDER_KEY,
    ROLE_LABEL,
    RUN_LABEL,
    SECRETS_IN_GATEWAY,
    SOCKET_DIR_IN_BOX,
    WORKSPACE_LABEL,
)

NETS = ("allowlist", "open")  # --net: the proxy's allowlist, or a network of the agent's own
# --runtime: the agent's container under the host's kernel (runc), or under gVisor's
# user-space kernel (runsc, registered by `docker/engine.sh --gvisor`). The gateway always
# runs on runc: it holds the key and needs a network of its own.
RUNTIMES = ("runc", "runsc")
SENTRY_PIDS = 2  # under gVisor, the engine's pids limit: this many times the agent's tasks
# What <workspace>/.git is (flowerbox.box.gitshadow.layout): a folder (the box gets a shadow of
# it), a file (a linked worktree: mounted read-only), or nothing.
GitLayout = Literal["dir", "file", "none"]
EMPTY = "/dev/null"  # what a masked workspace .env shows inside: nothing
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
    state_dir: Path  # this run's host-only records (flowerbox.box.state.run_folder)
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
    allow: tuple[str, ...] = ()  # the egress allowlist, presets expanded (flowerbox.sidecar.egress)
    egress_hosts: tuple[tuple[str, str], ...] = ()  # (name, address) for the gateway's hosts
    allow_api_fetch: bool = False  # the gateway forwards bodies that make the API fetch
    git: GitLayout = "none"
    shadow_git: Path | None = None  # the box's own gitdir, mounted at <workspace>/.git ("dir")
    git_objects: Path | None = None  # the user's objects folder, mounted read-only ("dir")
    git_alternates: tuple[Path, ...] = ()  # the user's own alternates, read-only where they are
    disk_budget_gb: float | None = None  # the run stops once its folders grew past it
    inode_budget: int | None = None  # ... or once it made more files and folders than this
    lang: str = ""  # flower's language inside ($FLOWER_LANG); "": flower's own default
    # Served by a running broker (flowerbox.broker): no gateway container; the box's key is
    # the run's token, a 0600 file in secrets_dir mounted read-only into the agent (never in
    # its docker environment or argv, nor in a flowerbox record: records.spec_to_json).
    broker: bool = False
    run_token: str = field(default="", repr=False)
    runtime: str = "runc"  # the agent's container runtime, one of RUNTIMES

    @property
    def labels(self) -> dict[str, str]:
        return {BOX_LABEL: "1", RUN_LABEL: self.run_id, WORKSPACE_LABEL: str(self.workspace)}

    @property
    def api_socket(self) -> Path:
        return self.socket_dir / wire.API_SOCKET

    @property
    def gateway_dir(self) -> Path:
        """Host-only, mounted into the gateway alone: what it writes, the agent cannot."""
        return self.state_dir / "gateway"

    @property
    def lease_socket(self) -> Path:
        """The gateway's lease (flowerbox.sidecar.lease): whoever keeps the box holds it."""
        return self.gateway_dir / wire.LEASE_SOCKET

    @property
    def usage_file(self) -> Path:
        """The gateway's usage ledger: requests, tokens and cost of this run."""
        return self.gateway_dir / wire.USAGE_FILE

    @property
    def egress_log(self) -> Path:
        """One JSON line per decision of the egress proxy."""
        return self.gateway_dir / wire.EGRESS_LOG

    def stderr_log(self, role: str) -> Path:
        """Where the host keeps a container's stderr (`role`: agent or gateway) once it is
        removed: host-only, written by the host from the engine's log, never by the box."""
        return self.state_dir / f"{role}.stderr.log"

    @property
    def requests_log(self) -> Path:
        """One JSON line per request the gateway answered (`flowerbox logs --requests`)."""
        return self.gateway_dir / wire.REQUESTS_LOG

    @property
    def events_file(self) -> Path:
        """flower's Events as JSON lines, written inside the box (`--events`): box-written,
        so the host reads it through flowerbox.box.untrusted only."""
        return RunDir(self.run_dir).events(self.run_id)


def protected_paths(workspace: Path) -> tuple[str, ...]:
    """PROTECTED plus the workspace's own `protect = [...]` list in CONFIG, if any.

    Raises:
        ConfigError: an unreadable CONFIG, or an entry that is not a relative path inside the
            workspace; the message names the file and the entry.
    """
    path = workspace / CONFIG
    try:  # box-writable like all of the workspace: no link followed, bounded
        data = read_bytes(workspace, CONFIG, limit=64 * 1024)
        extra = [] if data is None else tomllib.loads(data.decode()).get("protect", [])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(text("spec.config_unreadable", path=path, problem=exc)) from exc
    if not isinstance(extra, list) or not all(isinstance(entry, str) for entry in extra):
        raise ConfigError(text("spec.protect_list", path=path))
    names = list(PROTECTED)
    for entry in extra:
        name = entry.strip().rstrip("/")
        if not name or Path(name).is_absolute() or ".." in Path(name).parts:
            raise ConfigError(text("spec.protect_entry", path=path, entry=repr(entry)))
        if name not in names:
            names.append(name)
    return tuple(names)


CONTAINER_LOG_MB = 16


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
        # The engine keeps each container's output on the host's disk; without a cap a box
        # printing for hours fills it (issue 37, D2): the last 2 x CONTAINER_LOG_MB are kept.
        "log_config": {
            "type": "json-file",
            "config": {"max-size": f"{CONTAINER_LOG_MB}m", "max-file": "2"},
        },
    }


def _bind(path: Path, *, read_only: bool = False) -> dict[str, str]:
    return {"bind": str(path), "mode": "ro" if read_only else "rw"}


def answer_command(run_id: str) -> str:
    """How a person answers question `{id}` of run `run_id` from the host."""
    return f'flowerbox answer {{id}} "..." -r {run_id}'


def agent_env(spec: BoxSpec) -> dict[str, str]:
    """The agent's environment: nothing secret in it (the key is a placeholder)."""
    api = f"http://127.0.0.1:{wire.API_PORT}"
    env = {
        "HOME": str(spec.home),
        "ANTHROPIC_BASE_URL": api,
        "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,  # a broker's token: a file (agent_kwargs)
        # The CLI sends even 127.0.0.1 traffic through a proxy unless excluded.
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # wait_online probes the gateway's view of the real upstream, not the relay.
        "FLOWER_HEALTH_URL": f"{api}/health",
        RUN_ID_ENV: spec.run_id,  # flower inside runs under flowerbox's id: one id for both
        # flower inside has no terminal: its questions are answered from the host, so it
        # waits for them and says how (flowerbox answer; or typed into an attached run).
        ANSWER_COMMAND_ENV: answer_command(spec.run_id),
    }
    if spec.lang:  # the language the host's command line resolved (flower.core.lang)
        env[LANG_ENV] = spec.lang
    if spec.net == "allowlist":  # everything else leaves through the egress proxy
        proxy = f"http://127.0.0.1:{wire.PROXY_PORT}"
        env |= dict.fromkeys(("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"), proxy)
    if spec.uid == 0:
        env["IS_SANDBOX"] = "1"  # the CLI refuses unattended permissions as root otherwise
    return env


def _git_volumes(spec: BoxSpec) -> dict[str, dict[str, str]]:
    """The box's git: its own shadow gitdir at <workspace>/.git with the user's objects
    read-only beside it; a `.git` file (a linked worktree) read-only; else nothing."""
    dot_git = spec.workspace / ".git"
    if spec.git == "file":
        return {str(dot_git): _bind(dot_git, read_only=True)}
    if spec.git != "dir" or spec.shadow_git is None or spec.git_objects is None:
        return {}
    volumes = {
        str(spec.shadow_git): _bind(dot_git),
        str(spec.git_objects): _bind(Path(OBJECTS_IN_BOX), read_only=True),
    }
    volumes |= {str(path): _bind(path, read_only=True) for path in spec.git_alternates}
    for name in spec.protected:  # .git/hooks, .git/config: the shadow's copies, read-only
        rest = Path(name).relative_to(".git") if Path(name).parts[0] == ".git" else None
        if rest is not None and rest.parts and _present(spec.shadow_git, rest):
            volumes[str(spec.shadow_git / rest)] = _bind(dot_git / rest, read_only=True)
    return volumes


def _present(root: Path, relative: Path) -> bool:
    return real_folder(root, relative) or regular_file(root, relative)


def _protected_volumes(spec: BoxSpec) -> dict[str, dict[str, str]]:
    """Each protected path read-only, and each folder above it (below the workspace) bound
    onto itself: a mount point cannot be renamed, so `mv .github x` cannot swap it out."""
    volumes: dict[str, dict[str, str]] = {}
    for name in spec.protected:
        parts = Path(name).parts
        if parts[0] == ".git" or not _present(spec.workspace, Path(name)):
            continue
        for depth in range(1, len(parts)):
            parent = spec.workspace.joinpath(*parts[:depth])
            volumes.setdefault(str(parent), _bind(parent))
        path = spec.workspace / name
        volumes[str(path)] = _bind(path, read_only=True)
    return volumes


def _runtime(spec: BoxSpec) -> dict[str, Any]:
    """The agent's runtime, and what it needs besides. Under gVisor the engine's pids limit
    counts the sandbox's host threads, not the agent's tasks (which its own kernel runs), so
    the agent's limit is set as RLIMIT_NPROC, which gVisor's kernel enforces for the box alone
    (under runc it would count every process of the user's uid on the host), and the engine's
    keeps bounding the sandbox's host threads with headroom (SENTRY_PIDS): a sandbox that
    meets it dies (measured: a pids limit of 40 failed a box whose 510 tasks needed ~64)."""
    if spec.runtime == "runc":
        return {"runtime": "runc"}
    pids = spec.limits.pids
    return {
        "runtime": spec.runtime,
        "ulimits": [{"name": "nproc", "soft": pids, "hard": pids}],
        "pids_limit": pids * SENTRY_PIDS,
    }


def agent_name(spec: BoxSpec) -> str:
    """The agent's container name: how a box started by another process is found."""
    return f"flowerbox-{spec.run_id}"


def gateway_name(spec: BoxSpec) -> str:
    """The gateway's container name (a broker's run has none running)."""
    return f"flowerbox-gateway-{spec.run_id}"


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
    volumes |= _git_volumes(spec) | _protected_volumes(spec)
    if regular_file(spec.workspace, ".env"):  # the user's credentials stay on the host
        volumes[EMPTY] = _bind(spec.workspace / ".env", read_only=True)
    relays = [f"127.0.0.1:{wire.API_PORT}={SOCKET_DIR_IN_BOX}/{wire.API_SOCKET}"]
    if spec.net == "allowlist":
        relays.append(f"127.0.0.1:{wire.PROXY_PORT}={SOCKET_DIR_IN_BOX}/{wire.PROXY_SOCKET}")
    inside = [
        "python",
        "-m",
        wire.INSIDE_MODULE,
        *(a for r in relays for a in ("--relay", r)),
    ]
    if spec.broker:
        volumes[str(spec.secrets_dir / wire.TOKEN_FILE)] = _bind(
            Path(wire.TOKEN_IN_BOX), read_only=True
        )
        inside += ["--key-file", wire.TOKEN_IN_BOX]
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
        "name": agent_name(spec),
        "labels": {**spec.labels, ROLE_LABEL: "agent"},
        **_runtime(spec),
    }


def gateway_kwargs(spec: BoxSpec) -> dict[str, Any]:
    """docker's containers.run() kwargs for the gateway sidecar (detached)."""
    command = [
        "python",
        "-m",
        wire.GATEWAY_MODULE,
        "--socket",
        f"{SOCKET_DIR_IN_BOX}/{wire.API_SOCKET}",
        "--credentials",
        f"{SECRETS_IN_GATEWAY}/{wire.CREDENTIALS_FILE}",
        "--usage",
        str(spec.usage_file),
        "--requests",
        str(spec.requests_log),
        "--lease",
        str(spec.lease_socket),
    ]
    if spec.budget_usd is not None:
        command += ["--budget", str(spec.budget_usd)]
    if spec.net == "allowlist":
        command += ["--proxy-socket", f"{SOCKET_DIR_IN_BOX}/{wire.PROXY_SOCKET}"]
        command += ["--egress-log", str(spec.egress_log)]
        command += [arg for entry in spec.allow for arg in ("--allow", entry)]
    if spec.allow_api_fetch:
        command.append("--allow-api-fetch")
    extra: dict[str, Any] = {"extra_hosts": dict(spec.egress_hosts)} if spec.egress_hosts else {}
    if spec.lang:  # its refusals and log lines in the run's language, as the agent's flower
        extra["environment"] = {LANG_ENV: spec.lang}
    cpus = min(spec.limits.cpus, GATEWAY_CPUS, (os.cpu_count() or 1) / 2)
    return {
        **_hardening(spec),
        "nano_cpus": int(cpus * 1e9),
        "image": spec.image,
        "command": command,
        "volumes": {
            str(spec.socket_dir): _bind(Path(SOCKET_DIR_IN_BOX)),
            str(spec.secrets_dir): _bind(Path(SECRETS_IN_GATEWAY), read_only=True),
            str(spec.gateway_dir): _bind(spec.gateway_dir),
        },
        # A real API is reached over a network of its own; a loopback one (tests, a local
        # gateway of the user's) only from the host's network: the one exception to "only the
        # network it needs", documented in docs/gateway.md ("The gateway's own box").
        "network_mode": "host" if spec.upstream_on_loopback else "bridge",
        "name": gateway_name(spec),
        "labels": {**spec.labels, ROLE_LABEL: "gateway"},
        "detach": True,
        **extra,
    }
