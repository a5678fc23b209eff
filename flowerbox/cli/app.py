"""The `flowerbox` command line: flower in a hardened container.

    flowerbox "ask" [flower options]     the go path, in the box (isolation on by default)
    flowerbox once "prompt"              one step, in the box
    flowerbox run FILE.py                your own Workflow (a file in the workspace), in the box
    flowerbox shell [-- COMMAND...]      a shell (or COMMAND) in the agent's container
    flowerbox build                      build the image from this checkout's Dockerfile
    flowerbox ... --detach               go/once/run in the background: prints the run id
    flowerbox ps | logs | attach | stop | resume | answer | send    (flowerbox.runs.control)
    flowerbox setup                      save and check your key (as `flower setup`)

Exit codes are flower's (0 achieved, 1 not, 3 needs a human, 130 stopped); 2 also covers
what only the box can get wrong: no engine, no image, no credentials, a bad workspace.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer
from rich.console import Console
from rich.markup import escape

from flower.cli.setup import setup
from flowerbox import __version__
from flowerbox.errors import BoxError, ConfigError, GitShadowError, RunError, StateError
from flowerbox.runs.control import answer, attach, logs, ps, resume, send, stop

if TYPE_CHECKING:
    from flowerbox.box.spec import BoxSpec

DISK_BUDGET_GB = 20.0  # docs/threat-model.md: a bind mount has no quota
CHECKOUT = Path(__file__).resolve().parents[1]  # where the Dockerfile is, from a checkout
STDERR = Console(stderr=True, highlight=False, soft_wrap=True)
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}
ROOT_WARNING = (
    "flowerbox runs as root, so the box runs as uid 0 (every other restriction still holds). "
    "Run flowerbox as your own user (in the docker group) to avoid it."
)

NET_OPEN_WARNING = (
    "--net open: the agent's container has a network of its own; its traffic is neither "
    "filtered nor logged (the API still goes through the gateway)."
)

app = typer.Typer(
    name="flowerbox",
    help='Run flower unattended in a hardened container: flowerbox "what you want done"',
    no_args_is_help=True,
)

Workspace = Annotated[
    Path | None, typer.Option("--workspace", "-w", help="The project folder (default: here).")
]
Image = Annotated[str, typer.Option(envvar="FLOWERBOX_IMAGE", help="The flowerbox image to run.")]
Budget = Annotated[float | None, typer.Option(help="The gateway refuses calls past this many USD.")]
DiskBudget = Annotated[
    float,
    typer.Option(
        "--disk-budget",
        envvar="FLOWERBOX_DISK_BUDGET_GB",
        metavar="GB",
        help="Stop the run (resumable) once its folders grew by this many GB; 0: no limit.",
    ),
]
BaseImage = Annotated[
    str | None,
    typer.Option(envvar="FLOWERBOX_BASE_IMAGE", help="Build the image on this base image."),
]
Detach = Annotated[
    bool,
    typer.Option(
        "--detach", "-d", help="Run in the background: print the run id and return (see ps)."
    ),
]
Allow = Annotated[
    list[str] | None,
    typer.Option(
        "--allow",
        metavar="DOMAIN",
        help="Let the agent reach DOMAIN (exact; *.x.y for its subdomains). Repeatable. "
        "Nothing else is reachable (docs/egress.md).",
    ),
]
AllowPreset = Annotated[
    list[str] | None,
    typer.Option("--allow-preset", metavar="pypi|npm|github", help="Allow a preset's domains."),
]
Net = Annotated[
    str,
    typer.Option(
        "--net",
        metavar="allowlist|open",
        help="allowlist: only what --allow lists, through the proxy. open: the agent's "
        "container gets a network of its own (nothing filtered or logged).",
    ),
]


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"flowerbox {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    """flowerbox runs flower in a container whose only way out is its gateway."""


@app.command(context_settings=PASS_THROUGH)
def go(
    ctx: typer.Context,
    ask: Annotated[str, typer.Argument(help="What you want done, in one line.")] = "",
    workspace: Workspace = None,
    image: Image = "flowerbox:dev",
    base_image: BaseImage = None,
    no_isolate: Annotated[
        bool, typer.Option("--no-isolate", help="No git worktrees for the workers.")
    ] = False,
    budget: Budget = None,
    detach: Detach = False,
    allow: Allow = None,
    allow_preset: AllowPreset = None,
    net: Net = "allowlist",
    disk_budget: DiskBudget = DISK_BUDGET_GB,
) -> None:
    """flower "ask" in the box; any other option goes to flower (--timeout 0, --json...)."""
    raise typer.Exit(_as_given(ctx, ["go", ask, *ctx.args], isolate=not no_isolate))


@app.command(context_settings=PASS_THROUGH)
def once(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    workspace: Workspace = None,
    image: Image = "flowerbox:dev",
    base_image: BaseImage = None,
    budget: Budget = None,
    detach: Detach = False,
    allow: Allow = None,
    allow_preset: AllowPreset = None,
    net: Net = "allowlist",
    disk_budget: DiskBudget = DISK_BUDGET_GB,
) -> None:
    """flower once "prompt" in the box (one step, for CI jobs)."""
    raise typer.Exit(_as_given(ctx, ["once", prompt, *ctx.args], isolate=False))


@app.command(context_settings=PASS_THROUGH)
def run(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="A Python file in the workspace (`workflow`).")],
    workspace: Workspace = None,
    image: Image = "flowerbox:dev",
    base_image: BaseImage = None,
    budget: Budget = None,
    detach: Detach = False,
    allow: Allow = None,
    allow_preset: AllowPreset = None,
    net: Net = "allowlist",
    disk_budget: DiskBudget = DISK_BUDGET_GB,
) -> None:
    """flower run FILE.py in the box; any other option goes to flower (--timeout 0, -W...)."""
    from flowerbox.box.prepare import workspace_of

    try:
        path = _inside_workspace(file, workspace_of(workspace))
    except ValueError as exc:
        STDERR.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    raise typer.Exit(_as_given(ctx, ["run", str(path), *ctx.args], isolate=False))


@app.command(context_settings=PASS_THROUGH)
def shell(
    ctx: typer.Context,
    workspace: Workspace = None,
    image: Image = "flowerbox:dev",
    base_image: BaseImage = None,
    allow: Allow = None,
    allow_preset: AllowPreset = None,
    net: Net = "allowlist",
    disk_budget: DiskBudget = DISK_BUDGET_GB,
) -> None:
    """A shell in the agent's container: same hardening, mounts and gateway, no network.

    `flowerbox shell -- COMMAND...` runs COMMAND instead. On a terminal the container gets it
    (through the docker CLI: `docker run -it`); without one the command runs non-interactively
    and its output is streamed, as with `once`.
    """
    raise typer.Exit(_as_given(ctx, ["shell"], isolate=False, raw=list(ctx.args) or ["bash"]))


@app.command()
def demo(image: Image = "flowerbox:dev", base_image: BaseImage = None) -> None:
    """The whole appliance (box, gateway, isolation) on the built-in scripted model: no key."""
    import tempfile

    from flower.testing import FakeAPI
    from flower.testing.demo import DEMO_ASK, starter_cast

    root = Path(tempfile.mkdtemp(prefix="flowerbox-demo-"))
    workspace = root / "workspace"
    workspace.mkdir()
    git = ["git", "-c", "user.name=demo", "-c", "user.email=demo@localhost"]
    for command in (["git", "init", "-q"], [*git, "commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(command, cwd=workspace, check=True, capture_output=True)
    key = "sk-flowerbox-demo"  # the fake API requires it: the gateway must really inject it
    STDERR.print(f"demo workspace: {workspace} (the model is scripted; no real key is used)")
    with FakeAPI(starter_cast(), api_key=key) as api:
        for name in ("ANTHROPIC_AUTH_TOKEN", "FLOWER_ENV"):
            os.environ.pop(name, None)
        os.environ.update(ANTHROPIC_API_KEY=key, ANTHROPIC_BASE_URL=api.url)
        code = _in_box(
            ["go", DEMO_ASK, "--timeout", "0"],
            workspace=workspace,
            image=image,
            base_image=base_image,
            isolate=True,
            budget=None,
        )
    STDERR.print(
        f"look around: {workspace} (runs/ holds the sessions; the workers' worktrees "
        "are under .claude/worktrees)"
    )
    raise typer.Exit(code)


# The same command as `flower setup`: flowerbox finds credentials by flower's own lookup, so
# the file it writes is where a box's gateway gets its key from.
app.command(
    help="Save your key to the global .env (0600) that flower and flowerbox read, and check "
    "it: 0 if it works, 2 if not. Inside a box only the gateway ever holds it."
)(setup)


@app.command()
def version() -> None:
    """Print the versions that matter for a run: flowerbox, the SDK and its Claude Code CLI."""
    from importlib.metadata import version as installed

    typer.echo(f"flowerbox {__version__}")
    typer.echo(f"claude-agent-sdk {installed('claude-agent-sdk')}")
    from claude_agent_sdk._cli_version import __cli_version__

    typer.echo(f"claude code {__cli_version__}")


@app.command()
def build(image: Image = "flowerbox:dev", base_image: BaseImage = None) -> None:
    """Build the image from this checkout's Dockerfile."""
    from flowerbox.box.engine import connect, ensure_image

    try:
        client = connect()
        if base_image is None:
            ensure_image(client, image, context=CHECKOUT)
        else:
            ensure_image(client, image, context=CHECKOUT, base_image=base_image)
    except BoxError as exc:
        STDERR.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    STDERR.print(f"{image} is ready")


@app.command()
def doctor(
    workspace: Workspace = None,
    image: Image = "flowerbox:dev",
    allow: Allow = None,
    allow_preset: AllowPreset = None,
    net: Net = "allowlist",
) -> None:
    """Check engine, image, credentials, workspace, gateway and proxy; a fix for each miss."""
    from flowerbox.selftest.doctor import main as run_doctor

    network = {"net": net, "allow": allow or (), "allow_presets": allow_preset or ()}
    raise typer.Exit(run_doctor(workspace=workspace, image=image, network=network))


@app.command()
def selftest(
    workspace: Workspace = None,
    image: Image = "flowerbox:dev",
    base_image: BaseImage = None,
    negative_control: Annotated[
        bool,
        typer.Option(
            "--negative-control",
            help="The same probes in a deliberately weak container: every box probe should "
            "FAIL (four host-boundary checks judge flowerbox's own host code: they PASS).",
        ),
    ] = False,
    weaken: Annotated[
        str | None,
        typer.Option(
            "--weaken",
            metavar="VARIANT",
            help="Break exactly one property (docs/selftest.md lists the variants, and "
            "joined_network:CONTAINER): exactly its probes should FAIL.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per probe.")] = False,
    allow: Allow = None,
    allow_preset: AllowPreset = None,
    net: Net = "allowlist",
    no_isolate: Annotated[
        bool, typer.Option("--no-isolate", help="The box of a run without worktrees.")
    ] = False,
    budget: Budget = None,
) -> None:
    """Probe the box a run here would get for every way out; exit 1 on any FAIL."""
    from flowerbox.selftest.runner import main as run_selftest

    network: dict[str, Any] = {
        "net": net,
        "allow": allow or (),
        "allow_presets": allow_preset or (),
    }
    if no_isolate:
        network["isolate"] = False
    if budget is not None:
        network["budget_usd"] = budget
    raise typer.Exit(
        run_selftest(
            workspace=workspace,
            image=image,
            base_image=base_image,
            negative=negative_control,
            weaken=weaken,
            as_json=as_json,
            network=network,
        )
    )


# The commands around a run that is already going (flowerbox.runs.control).
for _command in (ps, logs, attach, stop, resume, answer, send):
    app.command()(_command)


def _as_given(
    ctx: typer.Context, command: list[str], *, isolate: bool, raw: list[str] | None = None
) -> int:
    """_in_box with the box options the command was given (its declared parameters, which
    typer has parsed into ctx.params); a command without --budget or --detach has neither."""
    given = ctx.params
    return _in_box(
        command,
        workspace=given["workspace"],
        image=given["image"],
        base_image=given["base_image"],
        isolate=isolate,
        budget=given.get("budget"),
        detach=bool(given.get("detach")),
        net=given["net"],
        allow=given["allow"],
        allow_presets=given["allow_preset"],
        disk_budget_gb=given["disk_budget"],
        raw=raw,
    )


def _in_box(
    command: list[str],
    *,
    workspace: Path | None,
    image: str,
    base_image: str | None,
    isolate: bool,
    budget: float | None,
    raw: list[str] | None = None,
    detach: bool = False,
    resume_of: BoxSpec | None = None,
    net: str = "allowlist",
    allow: list[str] | None = None,
    allow_presets: list[str] | None = None,
    disk_budget_gb: float = DISK_BUDGET_GB,
) -> int:
    """Prepare, start the gateway and the agent, stream, clean up; flower's exit code.

    `raw` replaces the flower command inside the box (`flowerbox shell`); on a terminal it
    runs attached to it through the docker CLI. `detach`: start the run, print its id, and
    leave it to its supervisor (flowerbox.runs.detach). `resume_of`: the spec of the run this one
    continues, whose settings it keeps. Every run is recorded in its host-only state_dir
    (flowerbox.runs.records).
    """
    from dataclasses import replace

    from flowerbox.box.engine import Box, connect, ensure_image, image_id
    from flowerbox.box.prepare import Prepared, prepare
    from flowerbox.box.terminal import docker_cli_attach
    from flowerbox.runs.boundary import after_run, before_run, report
    from flowerbox.runs.detach import carried, start_detached
    from flowerbox.runs.diskwatch import watch_disk
    from flowerbox.runs.records import ensure_idle, record, record_start

    try:
        prepared = prepare(
            command,
            workspace=workspace,
            image=image,
            isolate=isolate,
            budget_usd=budget,
            net=net,
            allow=allow or (),
            allow_presets=allow_presets or (),
            disk_budget_gb=disk_budget_gb,
        )
    except (ValueError, RuntimeError, StateError) as exc:
        STDERR.print(f"[bold red]error:[/] {escape(str(exc))}")
        return 2
    handed_over = False
    try:
        if os.getuid() == 0:
            STDERR.print(ROOT_WARNING, style="yellow")
        if net == "open":
            STDERR.print(NET_OPEN_WARNING, style="yellow")
        if raw is None:
            ensure_idle(prepared.spec.workspace)  # one flower run at a time in its runs/
        client = connect()
        ensure_image(client, image, context=CHECKOUT, base_image=base_image)
        spec = prepared.spec if raw is None else replace(prepared.spec, command=tuple(raw))
        spec = spec if resume_of is None else carried(spec, resume_of)
        resumed_from = None if resume_of is None else resume_of.run_id
        _tell_masked_env(spec.workspace)
        spec = before_run(spec, image_id=image_id(client, image))
        prepared = Prepared(spec)
        prepared.write_secrets()  # last: every check has passed
        if detach:
            run_id = start_detached(spec, client=client, command=command, resumed_from=resumed_from)
            handed_over = True  # the supervisor cleans up when the run ends
            typer.echo(run_id)
            STDERR.print(f"{run_id} runs in the background: flowerbox ps | logs -f | attach | stop")
            return 0
        box = Box(spec, client=client, on_started=lambda facts: record(spec, box=facts))
        record_start(spec, command=command, detached=False, resumed_from=resumed_from)
        code = 2
        try:
            if raw is not None and sys.stdin.isatty() and sys.stdout.isatty():
                code = box.run_attached(docker_cli_attach)
                return code

            def stop(signum: int, frame: FrameType | None) -> None:
                box.stop()

            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, stop)
            with watch_disk(spec, box.stop):
                code = box.run(write=_write(sys.stdout), write_err=_write(sys.stderr))
            return code
        finally:
            report(after_run(spec, code))
    except (BoxError, RunError, GitShadowError, StateError) as exc:
        STDERR.print(f"[bold red]error:[/] {escape(str(exc))}")
        return 2
    finally:
        if not handed_over:
            prepared.cleanup()


def _tell_masked_env(workspace: Path) -> None:
    """Once per workspace: its .env is hidden from the box (and never read by flowerbox)."""
    from flowerbox.box.state import tell_once
    from flowerbox.box.untrusted import regular_file

    if regular_file(workspace, ".env"):
        tell_once(
            f"masked-env {workspace}",
            lambda: STDERR.print(
                f"{workspace / '.env'} is hidden from the box (it shows an empty file there): "
                "credentials reach only the gateway, from your environment or "
                "~/.config/flower/.env",
                style="yellow",
            ),
        )


def _inside_workspace(file: Path, ws: Path) -> Path:
    """The file's realpath, which must lie in the workspace: nothing else is mounted."""
    path = file.expanduser().resolve()
    if not path.is_file():
        raise ConfigError(f"{file} is not a file: pass the path of a Python file")
    if not path.is_relative_to(ws):
        raise ConfigError(
            f"{path} is outside the workspace {ws}, and only the workspace is mounted into "
            "the box: move the file into it, or pass -w <a folder that holds it>"
        )
    return path


def _write(stream: TextIO) -> Callable[[bytes], None]:
    """The box's output onto our stream, without terminal control sequences: what the agent
    prints never retitles, clears or links the user's terminal."""
    from flowerbox.box.untrusted import StreamCleaner

    cleaner = StreamCleaner()

    def write(chunk: bytes) -> None:
        stream.buffer.write(cleaner.feed(chunk))
        stream.buffer.flush()

    return write


def route(args: list[str]) -> list[str]:
    """A first argument that names no command (the empty ask included) is the ask: go."""
    commands = {
        command.name or getattr(command.callback, "__name__", "")
        for command in app.registered_commands
    }
    if args and args[0] not in commands and not args[0].startswith("-"):
        return ["go", *args]
    return args


def main() -> None:
    """Console-script entry point."""
    sys.argv[1:] = route(sys.argv[1:])
    app()
