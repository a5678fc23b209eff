"""The host side of a box, before any container: which folders, which refusals, and the
credentials file the gateway alone will see. No docker here.

The credentials are found by flower's own lookup *without the project's files* (the process
environment, $FLOWER_ENV when it lies outside the workspace, ~/.config/flower/.env, Claude
Code's settings; never a workspace `.env`, which the box can write) and handed over as a
0600 file in a private 0700 folder of flowerbox's state, mounted read-only into the gateway
only: never argv, never a container's environment, never the agent's filesystem. The file is
written only once every check has passed (`Prepared.write_secrets`) and removed as soon as the
gateway has read it.

Errors: the checks raise ValueError (a bad workspace or option; exit 2 with the message) and
RuntimeError (no credentials).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from flower import (
    ANSWER_COMMAND_ENV,
    LANG_ENV,
    Lookup,
    RunDir,
    check_credentials,
    load_dotenv,
    new_run_id,
    shown,
    text,
    workbench_location,
    workspace_refusal,
)
from flowerbox import wire
from flowerbox.box import gitshadow, state
from flowerbox.box.options import BoxOptions
from flowerbox.box.spec import NETS, RUNTIMES, BoxSpec, protected_paths
from flowerbox.box.untrusted import open_dir, real_folder, regular_file
from flowerbox.errors import ConfigError, CredentialsError, UntrustedFileError
from flowerbox.sidecar.egress import Policy, parse_host

CREDENTIAL_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
RUNS = "runs"  # the workspace's run dir: flower's own default, ./runs
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
# Extra name=address lines for the gateway's /etc/hosts, so the proxy can reach a name the
# DNS does not know (the tests map *.test names to the host's loopback this way).
EGRESS_HOSTS_VAR = "FLOWERBOX_EGRESS_HOSTS"
ROOT_HOME = "/root"  # root's home: flowerbox refuses it and all below it (flower allows below)
# Characters Docker's bind syntax (`source:target:mode`) or a terminal cannot carry in a path.
UNMOUNTABLE = frozenset(":\n\r\t\x1b")


@dataclass
class Prepared:
    """A spec whose host folders exist, and the private folders to remove afterwards."""

    spec: BoxSpec

    def write_secrets(self) -> None:
        """The credentials file for the gateway, or a broker's run token for the agent: call
        it last, just before the box starts."""
        self.spec.secrets_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.spec.broker:
            _write_private(self.spec.secrets_dir / wire.TOKEN_FILE, self.spec.run_token)
        else:
            lines = [f"{k}={os.environ[k]}\n" for k in CREDENTIAL_KEYS if os.environ.get(k)]
            _write_private(self.spec.secrets_dir / wire.CREDENTIALS_FILE, "".join(lines))

    def cleanup(self) -> None:
        """Remove the run's private folders: credentials, sockets, the box's own area."""
        for folder in (self.spec.secrets_dir, self.spec.socket_dir):
            shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(state.box_folder(self.spec.run_id), ignore_errors=True)


def sensitive_folders() -> list[tuple[Path, str, bool]]:
    """The user's folders no box may see: (folder, what it holds, whether a workspace may
    lie inside it)."""
    home = Path.home().resolve()
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config").resolve()
    folders = [
        (home, text("error.why_home"), True),
        (config, text("prepare.what_config"), False),
        (config / "flower", text("prepare.what_credentials"), False),
        (state.base().resolve(), text("prepare.what_records"), False),
    ]
    for name in (".ssh", ".gnupg", ".aws", ".docker", ".kube", ".claude", ".config"):
        folders.append((home / name, f"~/{name}", False))
    if flower_env := os.environ.get("FLOWER_ENV"):
        folders.append((Path(flower_env).expanduser().resolve().parent, "$FLOWER_ENV", False))
    return folders


def workspace_of(path: Path | None) -> Path:
    """The workspace's realpath (the SDK keys sessions by it), refusing what must never be
    mounted into a box: a system folder (flower's workspace_refusal, and /root), a folder that
    is, holds or lies in one of the user's sensitive folders (home, ~/.config, ~/.ssh, the
    credentials' folder...), or a name Docker or the CLI inside cannot take (not UTF-8).

    Raises:
        ConfigError: the message names the folder, why, and what to pass instead.
    """
    ws = (path or Path.cwd()).expanduser().resolve()
    if not ws.is_dir():
        raise ConfigError(text("box.workspace_not_folder", ws=ws))
    system = text("error.why_system") if ws.is_relative_to(ROOT_HOME) else None
    why = workspace_refusal(ws) or system
    if why is not None:
        raise ConfigError(text("box.system_folder", ws=shown(ws), why=why))
    for folder, what, inside_ok in sensitive_folders():
        if (
            ws == folder
            or folder.is_relative_to(ws)
            or (ws.is_relative_to(folder) and not inside_ok)
        ):
            raise ConfigError(text("box.sensitive_folder", ws=ws, folder=folder, what=what))
    if bad := sorted(UNMOUNTABLE & set(str(ws))):
        chars = ", ".join(repr(c) for c in bad)
        raise ConfigError(text("box.unmountable", chars=chars, ws=ws))
    return ws


def in_git(ws: Path) -> bool:
    return gitshadow.layout(ws) != "none"


def prepare(command: list[str], options: BoxOptions) -> Prepared:
    """Check everything that can be checked on the host, then lay out the folders (the
    credentials are written later, by Prepared.write_secrets).

    Raises:
        ConfigError: a refused workspace (workspace_of), one whose git flowerbox cannot
            isolate, one where runs/ (or, isolated, the workbench beside it) cannot be
            made, a planted link where a mount source must be, an unusable --net,
            --allow, --allow-preset, FLOWERBOX_EGRESS_HOSTS entry or protect list.
        CredentialsError: no credentials (flower's message, and the hint about a workspace .env).
    """
    isolate, budget_usd = options.isolate, options.budget_usd
    allowed = egress_allowlist(options.net, options.allow, options.allow_presets)
    check_runtime(options.runtime, options.net)
    egress_hosts = _egress_hosts(os.environ.get(EGRESS_HOSTS_VAR, ""))
    ws = workspace_of(options.workspace)
    git = gitshadow.layout(ws)
    if isolate and git != "dir":
        raise ConfigError(not_isolable(ws, git))
    protected = protected_paths(ws)
    _check_mount_sources(ws, protected)
    load_credentials(ws)
    run_dir = ws / RUNS
    home = RunDir(run_dir).home
    try:
        with open_dir(ws, home.relative_to(ws), create=True):
            pass  # made through folders only: no planted link redirects it
    except UntrustedFileError:
        raise
    except OSError as exc:
        raise ConfigError(
            text("prepare.run_dir", run_dir=run_dir, problem=exc.strerror, ws=ws)
        ) from exc
    workbench = workbench_location(ws, isolate=True) if isolate else None
    if workbench is not None:
        try:
            workbench.mkdir(exist_ok=True)
        except OSError as exc:
            why = text(
                "prepare.workbench", workbench=workbench, problem=exc.strerror, parent=ws.parent
            )
            raise ConfigError(why) from exc
        if not real_folder(ws.parent, workbench.name):
            raise ConfigError(text("prepare.workbench_link", workbench=workbench))
    run_id = new_run_id()
    state.sweep_secrets()  # leftovers of killed CLIs (a live gateway read its own long ago)
    socket_dir = Path(tempfile.mkdtemp(prefix="fbx-", dir=state.socket_root()))
    base_url = os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
    flower = ["flower", *command, "-w", str(ws), "--run-dir", str(run_dir)]
    if command and command[0] == "go":
        flower.append("--isolate" if isolate else "--no-isolate")
    if nobody_answers(command):
        flower += ["--timeout", "0"]  # as flower does off a terminal (launch.nobody_answers)
    if budget_usd is not None and command[:1] in (["go"], ["once"]):
        # flower stops at a step boundary once it is spent; the gateway's refusal is the wall
        # behind that, for what flower cannot see (a step already under way).
        flower += ["--budget", str(budget_usd)]
    state_dir = state.run_folder(run_id)
    spec = BoxSpec(
        image=options.image,
        workspace=ws,
        run_dir=run_dir,
        home=home,
        socket_dir=socket_dir,
        secrets_dir=state.secrets_folder(run_id),
        state_dir=state_dir,
        uid=os.getuid(),
        gid=os.getgid(),
        command=tuple(flower),
        run_id=run_id,
        workbench=workbench,
        upstream_on_loopback=urlsplit(base_url).hostname in LOOPBACK,
        budget_usd=budget_usd,
        protected=protected,
        net=options.net,
        allow=allowed,
        egress_hosts=egress_hosts,
        allow_api_fetch=options.allow_api_fetch,
        git=git,
        disk_budget_gb=options.disk_budget_gb or None,
        inode_budget=options.inode_budget or None,
        lang=os.environ.get(LANG_ENV, ""),  # the --lang of flowerbox's root, or the user's
        runtime=options.runtime,
    )
    spec.gateway_dir.mkdir(mode=0o700, exist_ok=True)
    if command[:1] in (["go"], ["once"], ["run"]):  # flower's events, for `flowerbox logs`
        events = ("--events", str(spec.events_file))
        spec = dataclasses.replace(spec, command=(*spec.command, *events))
    return Prepared(spec)


WAITS = (["go"], ["run"])  # the flower commands with questions (and a --timeout)


def nobody_answers(command: Sequence[str]) -> bool:
    """Whether a box for `command` should not wait for its questions, as flower would not:
    no --timeout given, stdin not a terminal, and no $FLOWER_ANSWER_COMMAND saying how
    answers come (flower inside always has one: the box's `flowerbox answer`)."""
    if list(command[:1]) not in WAITS or sys.stdin is None or sys.stdin.isatty():
        return False
    given = any(arg == "--timeout" or arg.startswith("--timeout=") for arg in command[2:])
    return not given and not os.environ.get(ANSWER_COMMAND_ENV)


def load_credentials(ws: Path) -> None:
    """Fill os.environ from the places flowerbox trusts (see the module docstring).

    Raises:
        ConfigError: $FLOWER_ENV names a file inside the workspace.
        CredentialsError: no credentials; the message says where they go.
    """
    if (named := os.environ.get("FLOWER_ENV")) and Path(
        named
    ).expanduser().resolve().is_relative_to(ws):
        raise ConfigError(text("prepare.flower_env_inside", named=named))
    load_dotenv(lookup=Lookup.from_process(project=False))
    if problem := check_credentials():
        if regular_file(ws, ".env"):
            problem += "\n" + text("box.workspace_env_unread", path=ws / ".env")
        raise CredentialsError(problem)


def not_isolable(ws: Path, git: str) -> str:
    return text("box.linked_worktree" if git == "file" else "box.not_git_top", ws=ws)


def _check_mount_sources(ws: Path, protected: tuple[str, ...]) -> None:
    """Docker follows links in a mount's source: refuse a link (planted by an earlier box)
    anywhere on the way to runs/, its home, or a protected path."""
    for name in (RUNS, f"{RUNS}/{RunDir.HOME}", *protected):
        parts = PurePosixPath(name).parts
        if parts[0] == ".git":
            continue  # the box gets a shadow; the user's .git is never mounted
        for depth in range(1, len(parts) + 1):
            sub = PurePosixPath(*parts[:depth])
            if not os.path.lexists(ws / sub):
                break
            if not (real_folder(ws, sub) or (depth == len(parts) and regular_file(ws, sub))):
                raise ConfigError(text("prepare.not_plain", path=ws / sub))


def egress_allowlist(net: str, allow: Sequence[str], presets: Sequence[str]) -> tuple[str, ...]:
    """The allowlist the gateway gets (presets expanded), checked before anything is made.

    Raises:
        ConfigError: an unknown --net, an unusable entry or preset, or a list with --net open.
    """
    if net not in NETS:
        raise ConfigError(text("box.net_unknown", net=repr(net), nets=", ".join(NETS)))
    if net == "open" and (any(allow) or any(presets)):
        raise ConfigError(text("prepare.open_net_filters"))
    return Policy.parse(allow, presets).entries


def check_runtime(runtime: str, net: str) -> None:
    """--runtime, checked before anything is made (whether the engine has it: Box.run).

    Raises:
        ConfigError: an unknown runtime, or runsc with --net open (gVisor is registered with
            `--network=none`: its box has the relay's loopback and nothing else).
    """
    if runtime not in RUNTIMES:
        choices = ", ".join(RUNTIMES)
        raise ConfigError(text("box.runtime_unknown", runtime=repr(runtime), runtimes=choices))
    if runtime == "runsc" and net == "open":
        raise ConfigError(text("prepare.gvisor_open"))


def _egress_hosts(value: str) -> tuple[tuple[str, str], ...]:
    """FLOWERBOX_EGRESS_HOSTS: `name=address,...` added to the gateway's /etc/hosts."""
    pairs = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, _, address = item.partition("=")
        try:
            host, ip = parse_host(name.strip()), ipaddress.ip_address(address.strip())
        except ValueError as exc:
            why = text(
                "prepare.egress_host_shape", var=EGRESS_HOSTS_VAR, item=repr(item), problem=exc
            )
            raise ConfigError(why) from exc
        if not isinstance(host, str):
            raise ConfigError(
                text("prepare.egress_host_address", var=EGRESS_HOSTS_VAR, item=repr(item))
            )
        pairs.append((host, str(ip)))
    return tuple(pairs)


def _write_private(path: Path, text: str) -> None:
    """A secret in a new file, created 0600 before a byte is written."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
