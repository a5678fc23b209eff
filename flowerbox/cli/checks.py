"""`flowerbox doctor` and `flowerbox selftest`: is everything a run needs here, and does the
box a run here would get hold against every way out (flowerbox.selftest)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from flower import printable, text
from flowerbox.box.options import DEFAULT_IMAGE
from flowerbox.cli import kube
from flowerbox.cli.options import (
    Allow,
    AllowPresets,
    BaseImage,
    Budget,
    Context,
    Image,
    Namespace,
    Net,
    On,
    OnOption,
    Runtime,
    RuntimeClass,
    Workspace,
    box_options,
    kube_target,
    on_kube,
)
from flowerbox.errors import ConfigError

if TYPE_CHECKING:
    from flowerbox.selftest.verdicts import Verdict

app = typer.Typer()
BOX_SECTION = "box"  # the probes' section; the other is the host boundary's
STDERR = Console(stderr=True, highlight=False, soft_wrap=True)


@app.command()
def doctor(
    ctx: typer.Context,
    workspace: Workspace = None,
    image: Image = DEFAULT_IMAGE,
    allow: Allow = None,
    allow_presets: AllowPresets = None,
    net: Net = "allowlist",
    runtime: Runtime = "runc",
) -> None:
    """Check engine, image, credentials, workspace, gateway and proxy; a fix for each miss."""
    # lazy: the checks bring the docker SDK, which the other commands here (and --help) skip
    from flowerbox.selftest.doctor import doctor as run_checks
    from flowerbox.selftest.doctor import summary

    checks = run_checks(box_options(ctx.params))
    for check in checks:
        typer.echo(check.line())
    typer.echo(summary(checks))
    raise typer.Exit(1 if any(not check.ok for check in checks) else 0)


@app.command()
def selftest(
    ctx: typer.Context,
    workspace: Workspace = None,
    image: Image = DEFAULT_IMAGE,
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
    allow_presets: AllowPresets = None,
    net: Net = "allowlist",
    runtime: Runtime = "runc",
    no_isolate: Annotated[
        bool, typer.Option("--no-isolate", help="The box of a run without worktrees.")
    ] = False,
    budget_usd: Budget = None,
    on: OnOption = On.LOCAL,
    namespace: Namespace = "flowerbox",
    context: Context = None,
    runtime_class: RuntimeClass = None,
) -> None:
    """Probe the box a run here would get for every way out; exit 1 on any FAIL.

    --negative-control runs the all-weak control (every probe should FAIL), --weaken one
    variant of flowerbox.selftest.controls (exactly its probes should FAIL); stderr says what
    was expected. With --on kube the probes run as a Job with a run's Pod spec (the control
    too), and its log is judged here.
    """
    if on_kube(ctx, shared={"image", "negative_control", "as_json", "runtime"}):
        probes = kube.selftest(kube_target(ctx.params), image=image, negative=negative_control)
        _show([(BOX_SECTION, probes)], as_json=as_json)
        raise typer.Exit(_counted(probes, []))
    # lazy: the probes and their controls (http.client, ctypes) are the self-test's alone;
    # the runner brings the docker SDK, which the other commands here (and --help) skip
    from flowerbox.selftest.controls import ALL_WEAK, control_named
    from flowerbox.selftest.runner import HOST_SECTION
    from flowerbox.selftest.runner import selftest as run_probes

    control = ALL_WEAK if negative_control else None
    if weaken is not None:
        if negative_control:
            raise ConfigError(text("boxcli.weaken_and_control"))
        control = control_named(weaken).under(runtime)
        fails = ", ".join(sorted(control.fails))
        STDERR.print(
            text("say.control_named", name=control.name, breaks=control.breaks, fails=fails)
        )
    elif negative_control:
        STDERR.print(text("say.control_weak"))
    report = run_probes(box_options(ctx.params), control=control)
    _show([(BOX_SECTION, report.verdicts), (HOST_SECTION, report.host)], as_json=as_json)
    for what in report.left:
        STDERR.print(text("say.planted_left", what=what), markup=False)
    if any(verdict.why == text("verdict.silent") for verdict in report.verdicts):
        tail = printable(report.stderr[-1500:])
        STDERR.print(text("say.probes_silent", tail=tail), markup=False)
    raise typer.Exit(_counted(report.verdicts, report.host))


def _show(sections: list[tuple[str, list[Verdict]]], *, as_json: bool) -> None:
    """Each section's verdicts: a line, or a JSON object, each; the host's under a title."""
    for section, verdicts in sections:
        if verdicts and section != BOX_SECTION and not as_json:
            typer.echo(text("say.host_section", section=section))
        for verdict in verdicts:
            if as_json:
                line = {"section": section, "probe": verdict.probe, "ok": verdict.ok}
                typer.echo(json.dumps({**line, "why": verdict.why}))
            else:
                typer.echo(printable(verdict.line()))  # a verdict quotes what the box said


def _counted(probes: list[Verdict], host: list[Verdict]) -> int:
    """The count on stderr; the exit code: 1 on any FAIL."""
    every = [*probes, *host]
    failed = sum(not verdict.ok for verdict in every)
    counted = text("say.probes", count=len(probes))
    if host:
        counted += text("say.host_checks", count=len(host))
    STDERR.print(text("say.counted", counted=counted, passed=len(every) - failed, failed=failed))
    return 1 if failed else 0
