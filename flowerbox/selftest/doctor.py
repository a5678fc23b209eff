"""`flowerbox doctor`: is everything a run needs here? One line per check, a fix for each miss,
in the language of the command line (--lang; the check's `name` stays its identifier).

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
from rich.cells import cell_len

from flower import CREDENTIALS, Lookup, load_dotenv, text
from flowerbox.box.engine import connect, image_id
from flowerbox.box.gitshadow import layout
from flowerbox.box.options import BoxOptions
from flowerbox.box.prepare import not_isolable, workspace_of
from flowerbox.box.spec import protected_paths
from flowerbox.box.state import sweep_secrets
from flowerbox.errors import BoxError, ConfigError, FlowerboxError, StateError
from flowerbox.selftest.kernel import platform_of
from flowerbox.selftest.runner import selftest


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        """`OK    engine       ...` (its fix on a line below), padded by the cells each word
        takes on a terminal (a Chinese character takes two)."""
        head = f"{_pad(text('doctor.ok' if self.ok else 'doctor.fail'), 5)} "
        head += f"{_pad(text(f'doctor.name.{self.name}'), 12)} {self.detail}"
        if self.ok or not self.fix:
            return head
        return f"{head}\n{'':<19}{text('doctor.fix', fix=self.fix)}"


def _pad(word: str, cells: int) -> str:
    return word + " " * max(cells - cell_len(word), 0)


def summary(checks: list[Check]) -> str:
    """The line after the checks: how many, and how many to fix."""
    misses = sum(not check.ok for check in checks)
    if misses:
        return text("doctor.summary_misses", count=len(checks), misses=misses)
    return text("doctor.summary_ok", count=len(checks))


def check_engine() -> tuple[Check, Any]:
    """The engine check and, when it answers, the client (for the checks after it)."""
    where = os.environ.get("DOCKER_HOST") or text("doctor.default_socket")
    try:
        client = connect()
    except BoxError:
        missing = text("doctor.no_engine", where=where)
        return Check("engine", False, missing, text("doctor.no_engine_fix")), None
    return Check("engine", True, text("doctor.engine_ok", where=where)), client


def check_gvisor(client: Any, runtime: str) -> Check:
    """Whether the engine offers gVisor's runsc and on which platform (the engine's
    registration says; docker/gvisor.sh decided it at set-up): a miss only when asked for."""
    optional = runtime != "runsc"
    if client is None:
        return Check("gvisor", optional, text("doctor.no_look"), text("doctor.see_engine"))
    try:
        entry = (client.info().get("Runtimes") or {}).get("runsc")
    except DockerException as exc:
        return Check("gvisor", optional, text("doctor.runtimes_unsaid", problem=exc))
    if not isinstance(entry, dict):
        return Check("gvisor", optional, text("doctor.no_runsc"), text("doctor.no_runsc_fix"))
    platform = platform_of([str(arg) for arg in entry.get("runtimeArgs") or []])
    platform = platform or text("doctor.its_default")
    return Check("gvisor", True, text("doctor.runsc", path=entry.get("path"), platform=platform))


def check_image(client: Any, image: str) -> Check:
    if client is None:
        blind = text("doctor.image_no_look", image=image)
        return Check("image", False, blind, text("doctor.see_engine"))
    try:
        found = image_id(client, image)
    except BoxError:
        absent = text("doctor.image_absent", image=image)
        return Check("image", False, absent, text("doctor.image_fix"))
    return Check("image", True, f"{image} ({found[:19]})")


def check_credentials() -> Check:
    """Which credential is set and where it came from; never its value."""
    try:  # as a run looks: never a workspace .env (the box can write it)
        origins = load_dotenv(lookup=Lookup.from_process(project=False))
    except (OSError, ValueError) as exc:
        unread = text("doctor.dotenv_unreadable", problem=exc)
        return Check("credentials", False, unread, text("doctor.dotenv_fix"))
    found = [key for key in CREDENTIALS if os.environ.get(key)]
    if not found:
        missing = text("doctor.no_credentials")
        return Check("credentials", False, missing, text("doctor.no_credentials_fix"))
    process = text("doctor.process_environment")
    where = ", ".join(
        text("doctor.credential_from", key=key, origin=origins.get(key, process)) for key in found
    )
    return Check("credentials", True, where)


def check_workspace(workspace: Path | None) -> tuple[Check, Path | None]:
    try:
        ws = workspace_of(workspace)
        protected = protected_paths(ws)
    except ConfigError as exc:
        return Check("workspace", False, *_at_colon(str(exc))), None
    if (git := layout(ws)) != "dir":
        return Check("workspace", False, *_at_colon(not_isolable(ws, git))), ws
    return Check("workspace", True, text("doctor.workspace_ok", ws=ws, count=len(protected))), ws


def _at_colon(message: str) -> tuple[str, str]:
    """A refusal's problem and fix: before and after its first colon (`:`, or the zh `：` of
    a message in Chinese); the whole message as both when it has none."""
    at = min((i for i in (message.find(":"), message.find("：")) if i >= 0), default=-1)
    if at < 0:
        return message, message
    return message[:at], message[at + 1 :].strip()


def check_user() -> Check:
    uid = os.getuid()
    return Check("user", True, text("doctor.root") if uid == 0 else text("doctor.uid", uid=uid))


def check_leftovers() -> Check:
    """Credentials a killed CLI left in flowerbox's state: removed here (and by any run)."""
    try:
        swept = sweep_secrets()
    except StateError as exc:
        return Check("state", False, *_at_colon(str(exc)))
    if swept:
        return Check("state", True, text("doctor.swept", count=len(swept)))
    return Check("state", True, text("doctor.none_left"))


def check_box(options: BoxOptions, *, ready: bool) -> list[Check]:
    """gateway and proxy, from one real box prepared as a run's (real credentials)."""
    if not ready:
        why, fix = text("doctor.needs_above"), text("doctor.fix_above")
        return [Check(name, False, why, fix) for name in ("gateway", "proxy")]
    try:
        report = selftest(
            options, probes=("gateway_health", "proxy_denied_name"), real_credentials=True
        )
    except FlowerboxError as exc:
        failed = text("doctor.box_failed", problem=exc)
        return [Check("gateway", False, failed, text("doctor.see_message"))]
    health, proxy = report.verdicts
    return [
        Check("gateway", health.ok, health.why, text("doctor.gateway_fix")),
        Check("proxy", proxy.ok, proxy.why, text("doctor.proxy_fix")),
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
