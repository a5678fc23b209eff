"""`flower report [RUN_DIR]`: a picture of the run, as one self-contained HTML page.

    flower report                      runs/report.html (the workspace here, its ./runs)
    flower report runs -o out.html --svg run.svg --png run.png     CI artifacts too

The timeline (flower.core.timeline) is drawn by flower.cli.picture; `--png` has a headless
Chromium take a picture of the SVG (flower.cli.browser). Outputs are written atomically (a
temp file renamed over the name, so a link planted at that name is replaced, never followed).
`write_report` is the library half, which flowerbox's `report RUN` calls too.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from flower.cli.exits import exit_codes
from flower.cli.options import PngOut, SvgOut, existing_run_dir
from flower.core import lang
from flower.core.rundir import RunDir
from flower.errors import UsageError

if TYPE_CHECKING:
    from flower.core.timeline import Timeline

REPORT_NAME = "report.html"


def report(
    run_dir: Annotated[
        Path, typer.Argument(help="The run directory (manifest.json, events/...).")
    ] = Path("runs"),
    workspace: Annotated[
        Path,
        typer.Option("--workspace", "-w", help="The run's workspace: its processes are drawn."),
    ] = Path("."),
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="The HTML page [default: RUN_DIR/report.html].", show_default=False
        ),
    ] = None,
    svg_out: SvgOut = None,
    png_out: PngOut = None,
) -> None:
    """Draw the run: steps, rounds, attempts, faults, handoffs, waits, cost and context."""
    # lazy: the timeline's reader is worth loading to draw one, not to list this command
    from flower.core.timeline import read_timeline
    from flower.core.window import default_window

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    with exit_codes():
        existing_run_dir(run_dir)
        timeline = read_timeline(
            run_dir, workspace=workspace.expanduser().resolve(), window=default_window()
        )
        if not timeline.bars:
            raise UsageError(lang.text("cli.report_no_steps", manifest=RunDir(run_dir).manifest))
        html = out or run_dir / REPORT_NAME
        for path in write_report(timeline, html=html, svg_path=svg_out, png_path=png_out):
            console.print(lang.text("say.wrote", path=path))


def write_report(
    timeline: Timeline,
    *,
    html: Path | None,
    svg_path: Path | None = None,
    png_path: Path | None = None,
) -> list[Path]:
    """Write the page, the SVG and the PNG asked for; the paths written.

    Raises:
        UsageError: a path cannot be written, or --png has no browser to draw with.
    """
    # lazy: the drawing code (and the browser's) is loaded by what draws, not by --help
    from flower.cli.browser import screenshot
    from flower.cli.picture import framed, page, size, svg

    written = []
    for path, text in ((html, page(timeline)), (svg_path, svg(timeline))):
        if path is not None:
            _write(path, text.encode())
            written.append(path)
    if png_path is not None:
        width, height = size(timeline)
        with tempfile.TemporaryDirectory(prefix="flower-report-") as folder:
            drawing = Path(folder) / "report.html"
            drawing.write_text(framed(timeline), encoding="utf-8")
            shot = Path(folder) / "report.png"
            screenshot(drawing, shot, width=width, height=height)
            _write(png_path, shot.read_bytes())
        written.append(png_path)
    return written


def report_command(run_dir: Path, workspace: Path) -> str:
    """The command that draws this run, for the end of a run's summary."""
    command = ["flower", "report", _shown(run_dir)]
    if workspace.resolve() != Path.cwd().resolve():
        command += ["-w", _shown(workspace)]
    return shlex.join(command)


def _shown(path: Path) -> str:
    """`path` relative to the current folder when it lies below it."""
    relative = os.path.relpath(path.resolve(), Path.cwd().resolve())
    return str(path) if relative.startswith("..") else relative


def _write(path: Path, data: bytes) -> None:
    """`data` into a temp file beside `path`, then renamed over it."""
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(temp, 0o644)
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise UsageError(
            lang.text("cli.cannot_write", path=path, problem=exc.strerror or exc)
        ) from exc
