"""The options several commands share, declared once (flowerbox's report takes --svg and
--png from here too), the checks of their values, and the check of a run directory that
status and report read.

A value flower cannot use is refused by the option itself (typer's exit 2 with the option's
name), before anything is created or spent: a negative timeout or budget, an empty model.
The workspace is checked by `workspace_folder` in the command's body, whose refusals are
flower's own sentences (exit 2 through flower.cli.exits).
"""

import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from flower.core.lang import LANG_ENV, LangError, resolve, text
from flower.core.resilience import Resilience
from flower.core.workspace import shown, workspace_refusal
from flower.errors import RunDirError, WorkspaceError


def resilience(retries: int | None, offline_wait: float | None) -> Resilience:
    """The run's Resilience: --retries and --offline-wait where given, its defaults else."""
    policy = Resilience()
    if retries is not None:
        policy = replace(policy, max_attempts=retries)
    if offline_wait is not None:
        policy = replace(policy, max_offline_wait=offline_wait)
    return policy


def workspace_folder(path: Path) -> Path:
    """The workspace's realpath; a WorkspaceError when flower must not work there: not a
    folder, a system folder, your home folder itself (a run there fills it with runs/ and
    .flower/ and lets agents loose on all of it), or a name that is not UTF-8."""
    ws = path.expanduser().resolve()
    if not ws.is_dir():
        raise WorkspaceError(ws, text("error.workspace_not_folder", path=shown(ws)))
    why = workspace_refusal(ws)
    if why is None and ws == Path.home().resolve():
        why = text("error.why_home")
    if why is not None:
        raise WorkspaceError(ws, text("error.workspace_refused", path=shown(ws), why=why))
    return ws


def positive_usd(value: float | None) -> float | None:
    """A budget: more than 0 USD, or None for no limit."""
    if value is not None and not value > 0:
        raise typer.BadParameter(text("error.budget", value=f"{value:g}"))
    return value


def model_name(value: str | None) -> str | None:
    """A model id or alias, never blank: an empty one would silently mean the default."""
    if value is not None and not value.strip():
        raise typer.BadParameter(text("error.empty_model"))
    return value


def language(value: str | None) -> str:
    """The language of this command line, resolved once (--lang, $FLOWER_LANG, the locale,
    en) and put into $FLOWER_LANG, so its runs, child processes and boxes all speak it."""
    try:
        chosen = resolve(value)
    except LangError as exc:
        raise typer.BadParameter(str(exc)) from exc
    os.environ[LANG_ENV] = chosen
    return chosen


LangOption = Annotated[
    str | None,
    typer.Option(
        "--lang",
        metavar="en|zh",
        help="The language of what flower prints and what the model is shown (default: "
        "$FLOWER_LANG, else zh under a zh_* locale, else en). Accepted anywhere on the line.",
        callback=language,
        show_default=False,
    ),
]
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
    float | None,
    typer.Option(
        help="Seconds to wait for an answer; 0 = fully unattended. Default: 1800 on a "
        "terminal (or where $FLOWER_ANSWER_COMMAND says how answers come), else 0.",
        min=0,
        show_default=False,
    ),
]
Model = Annotated[
    str | None,
    typer.Option(help="Model id or alias (sonnet, opus...).", callback=model_name),
]
Budget = Annotated[
    float | None,
    typer.Option(help="Stop spending once the run has cost this many USD.", callback=positive_usd),
]
StepBudget = Annotated[
    float | None,
    typer.Option(help="Stop the step once it has cost this many USD.", callback=positive_usd),
]
Retries = Annotated[
    int | None,
    typer.Option(
        "--retries",
        help="Attempts a step gets at most when the API or the network fails (1: none again; "
        f"default {Resilience.max_attempts}).",
        min=1,
        show_default=False,
    ),
]
OfflineWait = Annotated[
    float | None,
    typer.Option(
        "--offline-wait",
        metavar="SECONDS",
        help="How long a step waits for the API to be reachable again before it gives up "
        f"(default {Resilience.max_offline_wait:g}).",
        min=0,
        show_default=False,
    ),
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
        raise RunDirError(run_dir, text("error.no_run_dir", path=run_dir))
    return run_dir
