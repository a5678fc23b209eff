"""The options every box command shares, declared once, and the values they become.

Each command lists the ones it takes by these names (typer reads options from a function's
signature, so a command still names its parameters); `box_options` turns whatever of them a
command was given into the one frozen value the library takes (flowerbox.box.options), and
`kube_target` the cluster options into a KubeTarget. `--on` says where a command acts:
`on_kube` answers it, and refuses an option typed for the other place (a workspace on a
cluster, a repository on this machine) rather than ignoring it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import fields
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer import _click  # typer >= 0.26 vendors click; a context speaks its types

from flower import text
from flower.cli import positive_usd
from flowerbox.box.options import BoxOptions
from flowerbox.errors import ConfigError
from flowerbox.kube.target import BROKER, NO_REPO, KubeTarget

Workspace = Annotated[
    Path | None, typer.Option("--workspace", "-w", help="The project folder (default: here).")
]
Image = Annotated[str, typer.Option(envvar="FLOWERBOX_IMAGE", help="The flowerbox image to run.")]
BaseImage = Annotated[
    str | None,
    typer.Option(envvar="FLOWERBOX_BASE_IMAGE", help="Build the image on this base image."),
]
Budget = Annotated[
    float | None,
    typer.Option(
        "--budget", help="The gateway refuses calls past this many USD.", callback=positive_usd
    ),
]
DiskBudget = Annotated[
    float,
    typer.Option(
        "--disk-budget",
        envvar="FLOWERBOX_DISK_BUDGET_GB",
        metavar="GB",
        help="Stop the run (resumable) once its folders grew by this many GB; 0: no limit.",
        min=0,
    ),
]
InodeBudget = Annotated[
    int,
    typer.Option(
        "--inode-budget",
        envvar="FLOWERBOX_INODE_BUDGET",
        metavar="N",
        help="Stop the run (resumable) once it made this many files and folders; 0: no limit.",
        min=0,
    ),
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
AllowPresets = Annotated[
    list[str] | None,
    typer.Option("--allow-preset", metavar="pypi|npm|github", help="Allow a preset's domains."),
]
AllowApiFetch = Annotated[
    bool,
    typer.Option(
        "--allow-api-fetch",
        help="Let request bodies make the API fetch or call out with the key: URL and file "
        "sources, server tools (Claude Code's WebSearch), MCP servers (docs/gateway.md).",
    ),
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
Runtime = Annotated[
    str,
    typer.Option(
        "--runtime",
        envvar="FLOWERBOX_RUNTIME",
        metavar="runc|runsc",
        help="The agent's container runtime. runsc: gVisor, a user-space kernel between the "
        "agent and yours (`sudo bash docker/engine.sh --gvisor` registers it; on kube: the "
        "gvisor RuntimeClass). The gateway stays on runc.",
    ),
]
NoIsolate = Annotated[bool, typer.Option("--no-isolate", help="No git worktrees for the workers.")]


class On(StrEnum):
    """Where a command acts: this machine's engine, or a Kubernetes cluster."""

    LOCAL = "local"
    KUBE = "kube"


OnOption = Annotated[
    On,
    typer.Option(
        "--on",
        help="local: this machine's engine. kube: a Kubernetes cluster, the kubeconfig's "
        "(docs/deployment.md, Kubernetes).",
    ),
]
Repo = Annotated[
    str | None,
    typer.Option("--repo", metavar="URL", help="On kube: the https git remote a run works on."),
]
Ref = Annotated[str, typer.Option("--ref", help="On kube: the branch or tag it starts from.")]
Namespace = Annotated[
    str,
    typer.Option("--namespace", "-n", envvar="FLOWERBOX_NAMESPACE", help="On kube: the namespace."),
]
Context = Annotated[
    str | None,
    typer.Option("--context", help="On kube: the kubeconfig context (default: its current)."),
]
RuntimeClass = Annotated[
    str | None,
    typer.Option(
        "--runtime-class", metavar="NAME", help="On kube: the Pods' runtimeClassName (gvisor...)."
    ),
]
Broker = Annotated[str, typer.Option("--broker", help="On kube: the broker's Service name.")]
DeliverBranch = Annotated[
    bool,
    typer.Option(
        "--deliver-branch",
        help="On kube: deliver as the branch flowerbox/RUN, which the forge's CI may run on "
        "(default: refs/flowerbox/RUN, which no CI runs on; docs/deployment.md).",
    ),
]
KUBE_ONLY = frozenset(
    {"repo", "ref", "namespace", "context", "runtime_class", "broker", "deliver_branch"}
)
"""The cluster options' parameter names: they mean nothing on this machine."""
_FIELDS = frozenset(field.name for field in fields(BoxOptions))


def box_options(given: Mapping[str, Any], **fixed: Any) -> BoxOptions:
    """The BoxOptions of a command's parsed parameters (typer's ctx.params): each parameter
    named like a BoxOptions field is taken, lists become tuples, `no_isolate` is read as
    `isolate`; `fixed` is what the command itself decides (`once` never isolates)."""
    taken = {name: value for name, value in given.items() if name in _FIELDS}
    if "no_isolate" in given:
        taken["isolate"] = not given["no_isolate"]
    for name in ("allow", "allow_presets"):
        taken[name] = tuple(taken.get(name) or ())
    return BoxOptions(**{**taken, **fixed})


def on_kube(ctx: typer.Context, *, shared: Collection[str] = ()) -> bool:
    """Whether the command acts on a cluster (`--on kube`). An option typed on the command
    line (not one from the environment or a default) that does not go where the command
    acts is refused: a cluster option without --on kube, or with it one of this machine's
    (anything but the arguments, the cluster options and `shared`).

    Raises:
        ConfigError: which option, and where it goes.
    """
    kube = ctx.params.get("on") is On.KUBE
    for param in ctx.command.params:
        name = param.name or ""
        typed = ctx.get_parameter_source(name) is _click.core.ParameterSource.COMMANDLINE
        if not typed or param.param_type_name != "option" or name == "on" or name in shared:
            continue
        flag = param.opts[0]
        if name in KUBE_ONLY and not kube:
            raise ConfigError(text("boxcli.kube_only_flag", flag=flag))
        if name not in KUBE_ONLY and kube:
            raise ConfigError(text("boxcli.local_only_flag", flag=flag))
    return kube


RUNTIME_CLASSES = {"runsc": "gvisor"}
"""--runtime on a cluster: the RuntimeClass that names the same sandbox (GKE's and the
gVisor docs' name for runsc's); runc is a cluster's default, no RuntimeClass."""


def kube_target(given: Mapping[str, Any]) -> KubeTarget:
    """The KubeTarget of a command's parsed parameters: the cluster options it takes, the
    defaults for the others (no repository: only `go` fetches one). `--runtime runsc` is the
    gvisor RuntimeClass unless --runtime-class names one.

    Raises:
        ConfigError: an unknown --runtime.
    """
    runtime = given.get("runtime") or "runc"
    if runtime != "runc" and runtime not in RUNTIME_CLASSES:
        raise ConfigError(text("boxcli.kube_runtime", runtime=repr(runtime)))
    runtime_class = given.get("runtime_class") or RUNTIME_CLASSES.get(runtime)
    return KubeTarget(
        repo=given.get("repo") or NO_REPO,
        ref=given.get("ref") or "main",
        namespace=given.get("namespace") or "flowerbox",
        context=given.get("context"),
        runtime_class=runtime_class,
        broker=given.get("broker") or BROKER,
        deliver_branch=bool(given.get("deliver_branch")),
    )
