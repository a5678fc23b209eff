"""The `flowerbox` command line: flower in a hardened container.

    flowerbox "ask" [flower options]     the go path, in the box (isolation on by default)
    flowerbox once "prompt"              one step, in the box
    flowerbox build                      build the image from this checkout's Dockerfile

Exit codes are flower's (0 achieved, 1 not, 3 needs a human, 130 stopped); 2 also covers
what only the box can get wrong: no engine, no image, no credentials, a bad workspace.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Annotated, TextIO

import typer
from rich.console import Console

from flowerbox import __version__

CHECKOUT = Path(__file__).resolve().parents[1]  # where the Dockerfile is, from a checkout
STDERR = Console(stderr=True, highlight=False, soft_wrap=True)
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}
ROOT_WARNING = (
    "flowerbox runs as root, so the box runs as uid 0 (every other restriction still holds). "
    "Run flowerbox as your own user (in the docker group) to avoid it."
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
BaseImage = Annotated[
    str | None,
    typer.Option(envvar="FLOWERBOX_BASE_IMAGE", help="Build the image on this base image."),
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
    budget: Annotated[
        float | None, typer.Option(help="The gateway refuses calls past this many USD.")
    ] = None,
) -> None:
    """flower "ask" in the box; any other option goes to flower (--timeout 0, --json...)."""
    raise typer.Exit(
        _in_box(
            ["go", ask, *ctx.args],
            workspace=workspace,
            image=image,
            base_image=base_image,
            isolate=not no_isolate,
            budget=budget,
        )
    )


@app.command(context_settings=PASS_THROUGH)
def once(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    workspace: Workspace = None,
    image: Image = "flowerbox:dev",
    base_image: BaseImage = None,
    budget: Annotated[
        float | None, typer.Option(help="The gateway refuses calls past this many USD.")
    ] = None,
) -> None:
    """flower once "prompt" in the box (one step, for CI jobs)."""
    raise typer.Exit(
        _in_box(
            ["once", prompt, *ctx.args],
            workspace=workspace,
            image=image,
            base_image=base_image,
            isolate=False,
            budget=budget,
        )
    )


@app.command()
def demo(image: Image = "flowerbox:dev", base_image: BaseImage = None) -> None:
    """The whole appliance (box, gateway, isolation) on the built-in scripted model: no key."""
    import subprocess
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


@app.command()
def build(image: Image = "flowerbox:dev", base_image: BaseImage = None) -> None:
    """Build the image from this checkout's Dockerfile."""
    from flowerbox.box import BoxError, connect, ensure_image

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


def _in_box(
    command: list[str],
    *,
    workspace: Path | None,
    image: str,
    base_image: str | None,
    isolate: bool,
    budget: float | None,
) -> int:
    """Prepare, start the gateway and the agent, stream, clean up; flower's exit code."""
    from flowerbox.box import Box, BoxError, connect, ensure_image
    from flowerbox.prepare import prepare

    try:
        prepared = prepare(
            command, workspace=workspace, image=image, isolate=isolate, budget_usd=budget
        )
    except (ValueError, RuntimeError) as exc:
        STDERR.print(f"[bold red]error:[/] {exc}")
        return 2
    try:
        if os.getuid() == 0:
            STDERR.print(ROOT_WARNING, style="yellow")
        client = connect()
        ensure_image(client, image, context=CHECKOUT, base_image=base_image)
        box = Box(prepared.spec, client=client)

        def stop(signum: int, frame: FrameType | None) -> None:
            box.stop()

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, stop)
        return box.run(write=_write(sys.stdout), write_err=_write(sys.stderr))
    except BoxError as exc:
        STDERR.print(f"[bold red]error:[/] {exc}")
        return 2
    finally:
        prepared.cleanup()


def _write(stream: TextIO) -> Callable[[bytes], None]:
    def write(chunk: bytes) -> None:
        stream.buffer.write(chunk)
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
