"""BoxOptions: what the user asked of a box, as one frozen value from the CLI to prepare().

The command line declares each option once (flowerbox.cli.options) and builds this value;
`launch`, `prepare`, the self-test and doctor all take it, so an option is never passed along
as loose keyword arguments or a dict of strings. Pure: it checks nothing (prepare does).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_IMAGE = "flowerbox:dev"
DISK_BUDGET_GB = 20.0  # docs/threat-model.md: a bind mount has no quota
INODE_BUDGET = 1_000_000  # nor a count of files (docs/decisions.md, issue 37)


@dataclass(frozen=True)
class BoxOptions:
    workspace: Path | None = None  # None: the current folder
    image: str = DEFAULT_IMAGE
    base_image: str | None = None  # what `flowerbox build` builds on, when it has to
    isolate: bool = True  # workers in git worktrees (the workbench is mounted)
    budget_usd: float | None = None  # the gateway refuses calls past it
    net: str = "allowlist"  # one of spec.NETS; prepare() refuses another with a message
    allow: tuple[str, ...] = ()
    allow_presets: tuple[str, ...] = ()
    allow_api_fetch: bool = False  # request bodies may make the API fetch (sidecar.reach)
    disk_budget_gb: float | None = DISK_BUDGET_GB  # None or 0: no limit
    inode_budget: int | None = INODE_BUDGET  # None or 0: no limit
    runtime: str = "runc"  # the agent's container runtime, one of spec.RUNTIMES (runsc: gVisor)
