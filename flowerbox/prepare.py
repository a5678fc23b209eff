"""The host side of a box, before any container: which folders, which refusals, and the
credentials file the gateway alone will see. No docker here.

The credentials are found by flower's own lookup (process env, .env files, Claude Code's
settings) and handed over as a 0600 file in a private 0700 folder mounted read-only into the
gateway only: never argv, never a container's environment, never the agent's filesystem.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from flower import check_credentials, load_dotenv
from flowerbox.egress import Policy, parse_host
from flowerbox.runs import EVENTS
from flowerbox.spec import NETS, BoxSpec, protected_paths

CREDENTIAL_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
DEFAULT_IMAGE = "flowerbox:dev"
# Extra name=address lines for the gateway's /etc/hosts, so the proxy can reach a name the
# DNS does not know (the tests map *.test names to the host's loopback this way).
EGRESS_HOSTS_VAR = "FLOWERBOX_EGRESS_HOSTS"


@dataclass
class Prepared:
    """A spec whose host folders exist, and the private folders to remove afterwards."""

    spec: BoxSpec

    def cleanup(self) -> None:
        shutil.rmtree(self.spec.secrets_dir, ignore_errors=True)
        shutil.rmtree(self.spec.socket_dir, ignore_errors=True)


def workspace_of(path: Path | None) -> Path:
    """The workspace's realpath (the SDK keys sessions by it), refusing / and $HOME."""
    ws = (path or Path.cwd()).expanduser().resolve()
    if not ws.is_dir():
        raise ValueError(f"workspace {ws} is not a folder: pass -w <project folder>")
    if ws == Path("/") or ws == Path.home().resolve():
        raise ValueError(
            f"refusing to mount {ws} into the box: run flowerbox from a project folder "
            "(or pass -w <project folder>)"
        )
    return ws


def in_git(ws: Path) -> bool:
    return any((folder / ".git").exists() for folder in (ws, *ws.parents))


def prepare(
    command: list[str],
    *,
    workspace: Path | None,
    image: str = DEFAULT_IMAGE,
    isolate: bool = True,
    budget_usd: float | None = None,
    net: str = "allowlist",
    allow: Sequence[str] = (),
    allow_presets: Sequence[str] = (),
) -> Prepared:
    """Check everything that can be checked on the host, then lay out the folders.

    Raises:
        ValueError: a workspace that is /, $HOME, not a folder, or not in git with isolation;
            an unusable --net, --allow or --allow-preset, or FLOWERBOX_EGRESS_HOSTS entry.
        RuntimeError: no credentials (flower's four-line message says where to put them).
    """
    allowed = egress_allowlist(net, allow, allow_presets)
    egress_hosts = _egress_hosts(os.environ.get(EGRESS_HOSTS_VAR, ""))
    ws = workspace_of(workspace)
    if isolate and not in_git(ws):
        raise ValueError(
            f"{ws} is not a git repository, and flowerbox isolates workers in git worktrees: "
            "run `git init && git commit --allow-empty -m start` there, or pass --no-isolate"
        )
    load_dotenv()
    if problem := check_credentials():
        raise RuntimeError(problem)
    run_dir = ws / "runs"
    home = run_dir / "home"
    home.mkdir(parents=True, exist_ok=True)
    workbench = ws.parent / f".flower-{ws.name}" if isolate else None
    if workbench is not None:
        workbench.mkdir(exist_ok=True)
    # Short paths under /tmp: a unix socket path must fit in 108 bytes.
    socket_dir = Path(tempfile.mkdtemp(prefix="fbx-", dir="/tmp"))
    secrets_dir = Path(tempfile.mkdtemp(prefix="fbx-secrets-", dir="/tmp"))
    for private in (socket_dir, secrets_dir):
        private.chmod(0o700)
    _write_credentials(secrets_dir / "credentials.env")
    base_url = os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    flower = ["flower", *command, "-w", str(ws), "--run-dir", str(run_dir)]
    if command and command[0] == "go":
        flower.append("--isolate" if isolate else "--no-isolate")
    if budget_usd is not None and command[:1] in (["go"], ["once"]):
        # flower stops at a step boundary once it is spent; the gateway's refusal is the wall
        # behind that, for what flower cannot see (a step already under way).
        flower += ["--budget", str(budget_usd)]
    spec = BoxSpec(
        image=image,
        workspace=ws,
        run_dir=run_dir,
        home=home,
        socket_dir=socket_dir,
        secrets_dir=secrets_dir,
        uid=os.getuid(),
        gid=os.getgid(),
        command=tuple(flower),
        run_id=run_id,
        workbench=workbench,
        upstream_on_loopback=urlsplit(base_url).hostname in LOOPBACK,
        budget_usd=budget_usd,
        protected=protected_paths(ws),
        net=net,
        allow=allowed,
        egress_hosts=egress_hosts,
    )
    spec.box_dir.mkdir(parents=True, exist_ok=True)  # the egress log's folder, the user's
    if command[:1] in (["go"], ["once"], ["run"]):  # flower's events, for `flowerbox logs`
        events = spec.box_dir / EVENTS
        spec = dataclasses.replace(spec, command=(*spec.command, "--events", str(events)))
    return Prepared(spec)


def egress_allowlist(net: str, allow: Sequence[str], presets: Sequence[str]) -> tuple[str, ...]:
    """The allowlist the gateway gets (presets expanded), checked before anything is made.

    Raises:
        ValueError: an unknown --net, an unusable entry or preset, or a list with --net open.
    """
    if net not in NETS:
        raise ValueError(f"--net {net!r}: use one of {', '.join(NETS)}")
    if net == "open" and (any(allow) or any(presets)):
        raise ValueError(
            "--allow and --allow-preset filter the egress proxy, which --net open does not "
            "use: drop them, or drop --net open"
        )
    return Policy.parse(allow, presets).entries


def _egress_hosts(text: str) -> tuple[tuple[str, str], ...]:
    """FLOWERBOX_EGRESS_HOSTS: `name=address,...` added to the gateway's /etc/hosts."""
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, address = item.partition("=")
        try:
            host, ip = parse_host(name.strip()), ipaddress.ip_address(address.strip())
        except ValueError as exc:
            raise ValueError(
                f"{EGRESS_HOSTS_VAR}: {item!r} is not name=address "
                f"(e.g. mirror.internal=10.1.2.3) ({exc})"
            ) from exc
        if not isinstance(host, str):
            raise ValueError(f"{EGRESS_HOSTS_VAR}: {item!r} maps an address, not a name")
        pairs.append((host, str(ip)))
    return tuple(pairs)


def _write_credentials(path: Path) -> None:
    """The found credentials as a .env, created 0600 before a byte is written."""
    lines = [f"{key}={os.environ[key]}\n" for key in CREDENTIAL_KEYS if os.environ.get(key)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.writelines(lines)
