"""The options every box command shares, declared once, and the BoxOptions they become.

Each command lists the ones it takes by these names (typer reads options from a function's
signature, so a command still names its parameters); `box_options` turns whatever of them a
command was given into the one frozen value the library takes (flowerbox.box.options).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any

import typer

from flower.cli import positive_usd
from flowerbox.box.options import BoxOptions

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
Net = Annotated[
    str,
    typer.Option(
        "--net",
        metavar="allowlist|open",
        help="allowlist: only what --allow lists, through the proxy. open: the agent's "
        "container gets a network of its own (nothing filtered or logged).",
    ),
]
NoIsolate = Annotated[bool, typer.Option("--no-isolate", help="No git worktrees for the workers.")]

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
