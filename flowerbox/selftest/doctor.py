"""`flowerbox doctor`: is everything a run needs here? One line per check, a fix for each miss.

    OK    engine       a Docker engine answers at the default socket
    FAIL  image        flowerbox:dev is not here  ->  run `flowerbox build`

Checks, in order (a check that needs an earlier one says so instead of failing on its own):
engine (a Docker engine answers), gvisor (whether it offers runsc, and the platform
docker/gvisor.sh chose for it; a miss only when --runtime runsc asks for it), image (the tag
is present), credentials (found, and where:
the process environment or which .env/settings file; never a value), workspace (a folder, not
/ or $HOME, a git repository, a readable protect config), user (uid 0 is said plainly), and
in one real box, prepared as a run's: gateway (it starts and reports its upstream reachable)
and proxy (it refuses a name off the allowlist, with a 403, and logs the deny).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from docker.errors import DockerException

from flower import CREDENTIALS, Lookup, load_dotenv
from flowerbox.box.engine import connect, image_id
from flowerbox.box.gitshadow import layout
from flowerbox.box.options import BoxOptions
from flowerbox.box.prepare import not_isolable, workspace_of
from flowerbox.box.spec import protected_paths
from flowerbox.box.state import sweep_secrets
from flowerbox.errors import BoxError, ConfigError, FlowerboxError, StateError
from flowerbox.selftest.kernel import platform_of
from flowerbox.selftest.runner import selftest

ROOT_NOTE = (
    "you are root, so the box runs as uid 0 (every other restriction holds); run flowerbox "
    "as your own user, in the docker group, to avoid it"
)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        head = f"{'OK' if self.ok else 'FAIL':<5} {self.name:<12} {self.detail}"
        return head if self.ok or not self.fix else f"{head}\n{'':<19}fix: {self.fix}"


def check_engine() -> tuple[Check, Any]:
    """The engine check and, when it answers, the client (for the checks after it)."""
    where = os.environ.get("DOCKER_HOST") or "the default socket"
    try:
        client = connect()
    except BoxError:
        return (
            Check(
                "engine",
                False,
                f"no Docker engine answers at {where}",
                "start it (`systemctl start docker`, or `bash docker/engine.sh` in a checkout), "
                "or point DOCKER_HOST at one; you must be allowed to use it (the docker group)",
            ),
            None,
        )
    return Check("engine", True, f"a Docker engine answers at {where}"), client


def check_gvisor(client: Any, runtime: str) -> Check:
    """Whether the engine offers gVisor's runsc and on which platform (the engine's
    registration says; docker/gvisor.sh decided it at set-up): a miss only when asked for."""
    if client is None:
        return Check("gvisor", runtime != "runsc", "cannot look without an engine", "see engine")
    try:
        entry = (client.info().get("Runtimes") or {}).get("runsc")
    except DockerException as exc:
        return Check("gvisor", runtime != "runsc", f"the engine did not say its runtimes: {exc}")
    if not isinstance(entry, dict):
        return Check(
            "gvisor",
            runtime != "runsc",
            "the engine has no runsc (optional: --runtime runsc puts gVisor's kernel between"
            " the agent and the host's)",
            "`sudo bash docker/engine.sh --gvisor` registers it (docs/image.md)",
        )
    platform = platform_of([str(arg) for arg in entry.get("runtimeArgs") or []])
    return Check(
        "gvisor",
        True,
        f"the engine offers runsc ({entry.get('path')}), platform {platform or 'its default'}",
    )


def check_image(client: Any, image: str) -> Check:
    if client is None:
        return Check("image", False, f"{image}: cannot look without an engine", "see engine")
    try:
        found = image_id(client, image)
    except BoxError:
        return Check(
            "image",
            False,
            f"{image} is not here",
            "run `flowerbox build` (or pass --image / set FLOWERBOX_IMAGE to one you have)",
        )
    return Check("image", True, f"{image} ({found[:19]})")


def check_credentials() -> Check:
    """Which credential is set and where it came from; never its value."""
    try:  # as a run looks: never a workspace .env (the box can write it)
        origins = load_dotenv(lookup=Lookup.from_process(project=False))
    except (OSError, ValueError) as exc:
        return Check("credentials", False, f"a .env file cannot be read: {exc}", "fix or remove it")
    found = [key for key in CREDENTIALS if os.environ.get(key)]
    if not found:
        return Check(
            "credentials",
            False,
            "no ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN found",
            "run `flowerbox setup` (saves your key to the global .env, 0600), or export "
            "ANTHROPIC_API_KEY (flowerbox never reads a workspace .env)",
        )
    where = ", ".join(f"{key} from {origins.get(key, 'the process environment')}" for key in found)
    return Check("credentials", True, where)


def check_workspace(workspace: Path | None) -> tuple[Check, Path | None]:
    try:
        ws = workspace_of(workspace)
        protected = protected_paths(ws)
    except ConfigError as exc:
        return Check("workspace", False, *_at_colon(str(exc))), None
    if (git := layout(ws)) != "dir":
        return Check("workspace", False, *_at_colon(not_isolable(ws, git))), ws
    return Check("workspace", True, f"{ws} (git; {len(protected)} protected paths)"), ws


def _at_colon(message: str) -> tuple[str, str]:
    """A refusal's problem and fix: before and after its first colon (`:`, or the zh `：` of
    a message in Chinese); the whole message as both when it has none."""
    at = min((i for i in (message.find(":"), message.find("：")) if i >= 0), default=-1)
    if at < 0:
        return message, message
    return message[:at], message[at + 1 :].strip()


def check_user() -> Check:
    uid = os.getuid()
    return Check("user", True, ROOT_NOTE if uid == 0 else f"uid {uid}: the box runs as you")


def check_leftovers() -> Check:
    """Credentials a killed CLI left in flowerbox's state: removed here (and by any run)."""
    try:
        swept = sweep_secrets()
    except StateError as exc:
        return Check("state", False, *_at_colon(str(exc)))
    if swept:
        return Check("state", True, f"removed {len(swept)} credentials file(s) left by killed runs")
    return Check("state", True, "no credentials left on disk")


def check_box(options: BoxOptions, *, ready: bool) -> list[Check]:
    """gateway and proxy, from one real box prepared as a run's (real credentials)."""
    if not ready:
        why = "needs the engine, the image, credentials and a workspace (above)"
        return [Check(name, False, why, "fix the misses above") for name in ("gateway", "proxy")]
    try:
        report = selftest(
            options, probes=("gateway_health", "proxy_denied_name"), real_credentials=True
        )
    except FlowerboxError as exc:
        return [Check("gateway", False, f"the box did not start: {exc}", "see the message")]
    health, proxy = report.verdicts
    return [
        Check(
            "gateway",
            health.ok,
            health.why,
            "check your network and ANTHROPIC_BASE_URL; `flowerbox shell` shows the box",
        ),
        Check(
            "proxy",
            proxy.ok,
            proxy.why,
            "rebuild the image (`flowerbox build`) so the gateway serves the egress proxy; "
            "with --net open there is none by choice",
        ),
    ]


def doctor(options: BoxOptions) -> list[Check]:
    """Every check, in order; the box's need the ones before them to pass."""
    engine, client = check_engine()
    checks = [engine, check_gvisor(client, options.runtime)]
    checks += [check_image(client, options.image), check_credentials()]
    ws_check, ws = check_workspace(options.workspace)
    checks += [ws_check, check_user(), check_leftovers()]
    ready = all(check.ok for check in checks)
    checks += check_box(replace(options, workspace=ws), ready=ready)
    if client is not None:
        client.close()
    return checks
