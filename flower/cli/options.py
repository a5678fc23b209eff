"""The options several commands share, declared once."""

from pathlib import Path
from typing import Annotated

import typer

Workspace = Annotated[
    Path, typer.Option("--workspace", "-w", help="The folder the work happens in.")
]
RunDirOption = Annotated[
    Path, typer.Option("--run-dir", help="Where sessions, manifest and lineage are kept.")
]
Events = Annotated[
    Path | None,
    typer.Option(
        "--events",
        help="Also write every event as a JSON line to this file (flowerbox logs reads it).",
        show_default=False,
    ),
]
Verbose = Annotated[
    bool, typer.Option("--verbose", "-v", help="Say where each credential came from.")
]
Rounds = Annotated[int, typer.Option(help="Judged rounds of work at most.", min=1)]
AnswerTimeout = Annotated[
    float, typer.Option(help="Seconds to wait for an answer; 0 = fully unattended.")
]
Model = Annotated[str | None, typer.Option(help="Model id or alias (sonnet, opus...).")]
Budget = Annotated[
    float | None, typer.Option(help="Stop spending once the run has cost this many USD.")
]
JsonOut = Annotated[
    bool, typer.Option("--json", help="Print a machine-readable summary on stdout at the end.")
]
FinishOption = Annotated[
    str | None,
    typer.Option(
        "--finish",
        metavar="branch|merge|patch",
        help="With --isolate, what becomes of the work at the end: branch (the default: it "
        "stays on the branch flower/<run id>), merge (also merged into your checkout once the "
        "goal is achieved), patch (also written to runs/patches/<run id>.patch).",
        show_default=False,
    ),
]
