"""The commands that start a box: go (the default: `flowerbox "ask"`), once, run, shell,
demo, and build (the image they run).

Exit codes are flower's (0 achieved, 1 not, 3 needs a human, 130 stopped); 2 also covers what
only the box can get wrong: no engine, no image, no credentials, a bad workspace.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperCommand

from flower import LANG_ENV, text
from flower.cli import check_args, options_help
from flowerbox.box.options import DEFAULT_IMAGE, DISK_BUDGET_GB, INODE_BUDGET, BoxOptions
from flowerbox.cli import kube
from flowerbox.cli.options import (
    Allow,
    AllowApiFetch,
    AllowPresets,
    BaseImage,
    Broker,
    Budget,
    Context,
    DeliverBranch,
    Detach,
    DiskBudget,
    Image,
    InodeBudget,
    Namespace,
    Net,
    NoIsolate,
    On,
    OnOption,
    Ref,
    Repo,
    Runtime,
    RuntimeClass,
    Workspace,
    box_options,
    kube_target,
    on_kube,
)
from flowerbox.errors import ConfigError, HostGitError
from flowerbox.kube.target import BROKER

app = typer.Typer()
STDERR = Console(stderr=True, highlight=False, soft_wrap=True)
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}
SET_BY_FLOWERBOX = frozenset({"workspace", "run_dir", "isolate", "events", "budget"})
"""flower's parameters flowerbox gives it itself (its own -w and --budget, the box's paths)."""


def flower_options(command: str) -> str:
    """The epilog of a box command: the flower options it passes on, and their help."""
    listed = options_help(command, leave_out=SET_BY_FLOWERBOX)
    return f"Any other option goes to `flower {command}` in the box (checked first):\n\n{listed}"


class PassingOn(TyperCommand):
    """A box command whose --help ends with the flower options it passes on (flower_options
    of the flower command of its name), made when the help is shown: making them builds
    flower's whole command line, which every other start of flowerbox would pay."""

    def format_help(self, ctx: Any, formatter: Any) -> None:  # typer's vendored click types
        self.epilog = flower_options(str(self.name))
        super().format_help(ctx, formatter)


def flower_args(command: str, args: list[str]) -> list[str]:
    """`flower COMMAND ARGS...` as flower would parse it, checked on the host before any
    container starts (a typo used to surface inside a started box); the argv to pass on."""
    check_args(command, args, fixed=SET_BY_FLOWERBOX)
    return [command, *args]


@app.command(context_settings=PASS_THROUGH, cls=PassingOn)
def go(
    ctx: typer.Context,
    ask: Annotated[str, typer.Argument(help="What you want done, in one line.")] = "",
    workspace: Workspace = None,
    image: Image = DEFAULT_IMAGE,
    base_image: BaseImage = None,
    no_isolate: NoIsolate = False,
    budget_usd: Budget = None,
    detach: Detach = False,
    allow: Allow = None,
    allow_presets: AllowPresets = None,
    allow_api_fetch: AllowApiFetch = False,
    net: Net = "allowlist",
    runtime: Runtime = "runc",
    disk_budget_gb: DiskBudget = DISK_BUDGET_GB,
    inode_budget: InodeBudget = INODE_BUDGET,
    on: OnOption = On.LOCAL,
    repo: Repo = None,
    ref: Ref = "main",
    namespace: Namespace = "flowerbox",
    context: Context = None,
    runtime_class: RuntimeClass = None,
    broker: Broker = BROKER,
    deliver_branch: DeliverBranch = False,
) -> None:
    """flower "ask" in the box; any other option goes to flower (--timeout 0, --json...).

    As with flower, where stdin is not a terminal (a script, CI) the agents' questions are
    not waited for, unless you pass --timeout SECONDS (then `flowerbox answer` answers them)
    or $FLOWER_ANSWER_COMMAND says how answers come.

    With --on kube the box is a Job on the cluster, its workspace cloned from --repo, and
    this prints its run id (`flowerbox ps --on kube` lists the runs).
    """
    command = flower_args("go", [ask, *ctx.args])
    if on_kube(
        ctx, shared={"image", "budget_usd", "allow", "allow_presets", "allow_api_fetch", "runtime"}
    ):
        kube.go(kube_target(ctx.params), command, box_options(ctx.params))
        return
    raise typer.Exit(start_box(command, box_options(ctx.params), detach=detach))


@app.command(context_settings=PASS_THROUGH, cls=PassingOn)
def once(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    workspace: Workspace = None,
    image: Image = DEFAULT_IMAGE,
    base_image: BaseImage = None,
    budget_usd: Budget = None,
    detach: Detach = False,
    allow: Allow = None,
    allow_presets: AllowPresets = None,
    allow_api_fetch: AllowApiFetch = False,
    net: Net = "allowlist",
    runtime: Runtime = "runc",
    disk_budget_gb: DiskBudget = DISK_BUDGET_GB,
    inode_budget: InodeBudget = INODE_BUDGET,
) -> None:
    """flower once "prompt" in the box (one step, for CI jobs)."""
    command = flower_args("once", [prompt, *ctx.args])
    options = box_options(ctx.params, isolate=False)
    raise typer.Exit(start_box(command, options, detach=detach))


@app.command(context_settings=PASS_THROUGH, cls=PassingOn)
def run(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="A Python file in the workspace (`workflow`).")],
    workspace: Workspace = None,
    image: Image = DEFAULT_IMAGE,
    base_image: BaseImage = None,
    budget_usd: Budget = None,
    detach: Detach = False,
    allow: Allow = None,
    allow_presets: AllowPresets = None,
    allow_api_fetch: AllowApiFetch = False,
    net: Net = "allowlist",
    runtime: Runtime = "runc",
    disk_budget_gb: DiskBudget = DISK_BUDGET_GB,
    inode_budget: InodeBudget = INODE_BUDGET,
) -> None:
    """flower run FILE.py in the box; any other option goes to flower (--timeout 0, -W...).

    Off a terminal its questions are not waited for unless you pass --timeout SECONDS, as
    with `flowerbox "ask"`.
    """
    # lazy: resolving the workspace needs the box's preparation, only `run` does here
    from flowerbox.box.prepare import workspace_of

    path = _inside_workspace(file, workspace_of(workspace))
    command = flower_args("run", [str(path), *ctx.args])
    options = box_options(ctx.params, isolate=False)
    raise typer.Exit(start_box(command, options, detach=detach))


@app.command(context_settings=PASS_THROUGH)
def shell(
    ctx: typer.Context,
    workspace: Workspace = None,
    image: Image = DEFAULT_IMAGE,
    base_image: BaseImage = None,
    budget_usd: Budget = None,
    allow: Allow = None,
    allow_presets: AllowPresets = None,
    allow_api_fetch: AllowApiFetch = False,
    net: Net = "allowlist",
    runtime: Runtime = "runc",
    disk_budget_gb: DiskBudget = DISK_BUDGET_GB,
    inode_budget: InodeBudget = INODE_BUDGET,
) -> None:
    """A shell in the agent's container: same hardening, mounts and gateway, no network.

    `flowerbox shell -- COMMAND...` runs COMMAND instead. On a terminal the container gets it
    (through the docker CLI: `docker run -it`); without one the command runs non-interactively
    and its output is streamed, as with `once`.
    """
    options = box_options(ctx.params, isolate=False)
    raise typer.Exit(start_box(["shell"], options, raw=list(ctx.args) or ["bash"]))


@app.command()
def demo(
    image: Image = DEFAULT_IMAGE, base_image: BaseImage = None, runtime: Runtime = "runc"
) -> None:
    """The whole appliance (box, gateway, isolation) on the built-in scripted model: no key."""
    # lazy: the fake API's server is not worth importing for every other command
    from flower.testing import DEMO_ASKS, FakeAPI, starter_cast

    root = Path(tempfile.mkdtemp(prefix="flowerbox-demo-"))
    workspace = root / "workspace"
    workspace.mkdir()
    _first_commit(workspace)
    key = "sk-flowerbox-demo"  # the fake API requires it: the gateway must really inject it
    STDERR.print(text("say.box_demo_workspace", workspace=workspace))
    with FakeAPI(starter_cast(), api_key=key) as api:
        for name in ("ANTHROPIC_AUTH_TOKEN", "FLOWER_ENV"):
            os.environ.pop(name, None)
        os.environ.update(ANTHROPIC_API_KEY=key, ANTHROPIC_BASE_URL=api.url)
        options = BoxOptions(
            workspace=workspace, image=image, base_image=base_image, runtime=runtime
        )
        ask = DEMO_ASKS.get(os.environ.get(LANG_ENV, ""), DEMO_ASKS["en"])  # as --lang set it
        code = start_box(["go", ask, "--timeout", "0"], options)
    STDERR.print(demo_ending(code, workspace))
    raise typer.Exit(code)


def _first_commit(workspace: Path) -> None:
    """`git init` and an empty first commit, through flowerbox.hostgit (plumbing only: no
    hook of the user's global config runs)."""
    from flowerbox.box.state import host_git  # lazy: only the demo makes a repository

    git = host_git()

    def must(*args: str, stdin: str | None = None) -> str:
        done = git.run(*args, repo=workspace, stdin=stdin)
        if done.returncode != 0:
            said = done.stderr.strip()
            raise HostGitError(
                text("boxcli.git_failed", command=args[-1], workspace=workspace, problem=said)
            )
        return done.stdout.strip()

    must("init", "-q", "--template=", str(workspace))
    tree = must("mktree", stdin="")
    commit = must("-c", "user.name=demo", "-c", "user.email=demo@localhost", "commit-tree",
                  tree, "-m", "start")  # fmt: skip
    must("update-ref", "HEAD", commit)


# What a failed demo's exit code says (docs/getting-started.md, "Exit codes").
DEMO_FAILURES = {
    1: "a step failed or the goal was not achieved",
    2: "bad input, no Docker engine or no image",
    3: "the judge found the goal unreachable and nobody answered",
    130: "it was stopped",
}


def demo_ending(code: int, workspace: Path) -> str:
    """The demo's last line: where to look when it worked; that it failed, and why, if not."""
    if code == 0:
        return (
            f"look around: {workspace} (runs/ holds the sessions; the work is on the run's "
            "branch: git branch --list 'flower/*')"
        )
    why = DEMO_FAILURES.get(code, "the run ended abnormally")
    return (
        f"the demo failed: {why} (exit {code}); the lines above say what went wrong, and "
        f"{workspace} holds what it left (runs/ has the sessions)"
    )


@app.command()
def build(
    checkout: Annotated[
        Path | None,
        typer.Argument(
            help="A flowerbox checkout (its Dockerfile). Default: the current folder when it "
            "is one, else the checkout this flowerbox runs from (an editable install).",
            show_default=False,
        ),
    ] = None,
    image: Image = DEFAULT_IMAGE,
    base_image: BaseImage = None,
) -> None:
    """Build the image from a flowerbox checkout of this flowerbox's version (again, if it is
    there), labelled with that version: works from an installed flowerbox too."""
    # lazy: the engine's module brings the docker SDK, which only building needs here
    from flowerbox.box.engine import connect, ensure_image
    from flowerbox.box.source import build_context

    context = build_context(checkout)
    ensure_image(connect(), image, context=context, base_image=base_image, rebuild=True)
    STDERR.print(text("say.image_ready", image=image, context=context))


def start_box(
    command: list[str], options: BoxOptions, *, raw: list[str] | None = None, detach: bool = False
) -> int:
    """flowerbox.runs.launch.launch: a box for `command`, its exit code (0 once detached)."""
    # lazy: launching brings the docker SDK and the box's machinery (0.3-0.4 s), which
    # `--help`, `--version` and `ps` never use
    from flowerbox.runs.launch import launch

    return launch(command, options, raw=raw, detach=detach)


def _inside_workspace(file: Path, ws: Path) -> Path:
    """The file's realpath, which must lie in the workspace: nothing else is mounted."""
    path = file.expanduser().resolve()
    if not path.is_file():
        raise ConfigError(text("error.not_a_file", file=file))
    if not path.is_relative_to(ws):
        raise ConfigError(text("boxcli.outside_workspace", path=path, workspace=ws))
    return path
