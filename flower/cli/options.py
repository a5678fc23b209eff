"""The options several commands share, declared once (flowerbox's report takes --svg and
--png from here too), and the check of a run directory that status and report read."""

from pathlib import Path
from typing import Annotated

import typer

from flower.errors import RunDirError

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
        help="Write every event as a JSON line to this file (flowerbox logs and flower report "
        "read it) [default: RUN_DIR/events/<run id>.jsonl].",
        show_default=False,
    ),
]
RunWorkbench = Annotated[
    bool,
    typer.Option(
        "-W", help="A workbench in the run dir's workbench/ (for `run`: if the workflow has none)."
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
SvgOut = Annotated[Path | None, typer.Option("--svg", help="Also write the picture as SVG here.")]
PngOut = Annotated[
    Path | None,
    typer.Option("--png", help="Also write it as PNG here (needs a headless Chromium)."),
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


def existing_run_dir(run_dir: Path) -> Path:
    """`run_dir` if it is a folder (status and report read one; they never create it)."""
    if not run_dir.is_dir():
        raise RunDirError(
            run_dir,
            f"no run directory at {run_dir}: pass the run_dir of a flower run "
            "(default ./runs, or the --run-dir you gave it)",
        )
    return run_dir
