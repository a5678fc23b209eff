"""The commands around a run that is already going (the library half: flowerbox.runs.control):

    flowerbox ps [--all] [--json]        runs of this workspace (or all): status, age, cost,
                                         and the questions they wait on, with their ids
    flowerbox logs [RUN] [-f]            the run's events; -f follows until the run ends
    flowerbox logs [RUN] --requests      the API requests its gateway answered (--json too)
    flowerbox report [RUN]               the run drawn: an HTML page (--svg, --png too)
    flowerbox attach [RUN]               follow, answer questions, Ctrl+C detaches
    flowerbox stop [RUN]                 SIGTERM: flower records its step, exit 130, resumable
    flowerbox resume [RUN]               a new box continuing the same flower run and sessions
    flowerbox answer QID "text"          answer a pending question (from the host)
    flowerbox send "text"                tell the run something unprompted
    flowerbox deliver | rm RUN --on kube push a cluster run's branch back; remove its volume

`--on kube` (with --namespace, --context) does the same to the runs on a cluster: each
command's kube branch calls flowerbox.cli.kube.

Errors (no runs, an unknown id, a run already ended, an answer nobody waits for) are
FlowerboxErrors: exit 2 with a message that says what to do (flowerbox.cli.app).
"""

from __future__ import annotations

import shlex
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flower import FlowerError, printable, word
from flower import text as said
from flower.cli import PngOut, SvgOut, contract, positive_usd, table_console
from flowerbox.box.options import BoxOptions
from flowerbox.cli import kube
from flowerbox.cli.options import (
    Broker,
    Context,
    Namespace,
    On,
    OnOption,
    RuntimeClass,
    Workspace,
    kube_target,
    on_kube,
)
from flowerbox.errors import ConfigError, RunError
from flowerbox.kube.target import BROKER
from flowerbox.runs import records
from flowerbox.runs.control import (
    deliver,
    drop,
    ended_error,
    find,
    follow_events,
    guarded_end,
    read_answers,
    reap,
    status_text,
    stop_run,
    summary,
    timeline,
)
from flowerbox.runs.detach import remaining_budget, resume_command
from flowerbox.runs.records import Run

app = typer.Typer()
STDERR = Console(stderr=True, highlight=False, soft_wrap=True)

RunArg = Annotated[
    str | None, typer.Argument(help="A run id, or its unique start (default: the newest run here).")
]
RunOption = Annotated[
    str | None,
    typer.Option("--run", "-r", help="A run id, or its unique start (default: the newest here)."),
]


@app.command()
def ps(
    ctx: typer.Context,
    all_runs: Annotated[bool, typer.Option("--all", "-a", help="Every workspace's runs.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the runs as JSON.")] = False,
    workspace: Workspace = None,
    on: OnOption = On.LOCAL,
    namespace: Namespace = "flowerbox",
    context: Context = None,
) -> None:
    """List the runs (newest last) and the questions they wait on."""
    if on_kube(ctx):
        target = kube_target(ctx.params)
        console = table_console()
        for run_id, waiting in kube.ps(target).items():
            if isinstance(waiting, str):
                STDERR.print(
                    said("say.questions_unknown", run=run_id, waiting=waiting), markup=False
                )
                continue
            how = f'flowerbox answer {{id}} "..." --run {run_id} --on kube'
            _questions(console, run_id, waiting, how)
        return
    where = (workspace or Path.cwd()).expanduser().resolve()
    found = records.all_runs() if all_runs else records.runs_of(where)
    rows = [summary(run) for run in found]
    if as_json:
        contract.emit(contract.document("flowerbox ps", runs=rows))
        return
    if not rows:
        STDERR.print(said("say.no_runs", where=where))
        return
    console = table_console()
    table = Table(box=None, pad_edge=False)
    columns = ["RUN", "STATUS", "AGE", "COST", "QUESTIONS", "COMMAND"]
    for column in columns:  # never cut a run id: it is what the other commands take
        table.add_column(column, no_wrap=column != "COMMAND")
    if all_runs:
        table.add_column("WORKSPACE", overflow="fold")
    for row in rows:
        cost = "" if row["cost_usd"] is None else f"${row['cost_usd']:.4f}"
        asks = " ".join(ask["id"] for ask in row["pending_asks"])
        age = records.age_text(row["age_s"])
        command = _short(row["command"], width=48 if console.is_terminal else None)
        cells = [row["run_id"], row["status"], age, cost, asks, command]
        if all_runs:
            cells.append(str(row["workspace"]))
        table.add_row(*(escape(cell) for cell in cells))
    console.print(table)
    # lazy: the box's spec (its TOML reader, its dataclasses) is for a run's start; an
    # empty `ps`, and `--help`, never need it (issue 31)
    from flowerbox.box.spec import answer_command

    for row in rows:
        _questions(console, row["run_id"], row["pending_asks"], answer_command(row["run_id"]))


def _questions(console: Console, run_id: str, asks: list[dict[str, Any]], answer: str) -> None:
    """A run's pending questions, each with the command that answers it (`{id}` in `answer`
    becomes the question's id, quoted: the box chose it, and the command is for pasting).
    Whoever read them, every string goes through the sanitizer here too."""
    for ask in asks:
        offered = ask.get("options")
        options = f"  [{' / '.join(map(str, offered))}]" if isinstance(offered, list) else ""
        line = f"{run_id} {ask['id']}: {ask.get('question')}{options}"
        console.print(printable(line), markup=False)
        ask_id = shlex.quote(printable(str(ask["id"]), one_line=True))
        how = answer.replace("{id}", ask_id)
        console.print("  " + said("say.answer_with", command=how), markup=False)


def _short(command: list[str], width: int | None) -> str:
    """The command as one line, cut to `width` on a terminal (never in a log)."""
    text = " ".join(part if part and " " not in part else repr(part) for part in command)
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


@app.command()
def logs(
    ctx: typer.Context,
    run: RunArg = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep following until the run ends.")
    ] = False,
    requests: Annotated[
        bool,
        typer.Option(
            "--requests", help="The API requests the run's gateway answered, one per line."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="With --requests: print them as JSON.")
    ] = False,
    workspace: Workspace = None,
    on: OnOption = On.LOCAL,
    namespace: Namespace = "flowerbox",
    context: Context = None,
) -> None:
    """Show a run's events (flower's own rendering); -f follows a live run to its end.

    With --on kube: the agent's output as its Pod wrote it (the run's newest Job).
    """
    if on_kube(ctx, shared={"follow"}):
        kube.logs(kube_target(ctx.params), kube.required(run), follow=follow)
        return
    found = find(workspace, run)
    if requests or as_json:
        if follow or not requests:
            raise ConfigError(said("boxcli.requests_flags"))
        _show_requests(records.requests(found), as_json=as_json)
        return
    # lazy: flower's event rendering (and asyncio with it) is for the commands that follow
    from flower.cli import Render
    from flowerbox.box.spec import answer_command

    console = Console(highlight=False, soft_wrap=True)
    render = Render(console, answer_hint=answer_command(found.run_id))
    try:
        final = follow_events(found, render, follow=follow)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None  # only the following ends; the run goes on
    _report_end(final)


def _show_requests(rows: list[dict[str, Any]], *, as_json: bool) -> None:
    """The gateway's request log, a line per request as the gateway wrote it to stderr (or
    JSON), and its total."""
    if as_json:
        contract.emit(contract.document("flowerbox logs", requests=rows))
        return
    if not rows:
        STDERR.print(said("say.no_requests"))
        return
    spent = 0.0
    for row in rows:
        tokens = row["tokens"] if isinstance(row.get("tokens"), dict) else {}
        cost = row.get("cost_usd")
        cost = cost if isinstance(cost, int | float) else None
        spent += cost or 0.0
        fields = [
            str(row.get("time", ""))[11:23],
            str(row.get("method", "")),
            str(row.get("path", "")),
            str(row.get("status", "")),
            str(row.get("model", "")),
            *(f"{short}={tokens[name]}" for name, short in _TOKENS.items() if name in tokens),
            "" if cost is None else f"${cost:.4f}",
            f"{row.get('ms', '')}ms",
            str(row.get("note", "")),
        ]
        typer.echo(" ".join(field for field in fields if field))
    STDERR.print(said("say.requests_spent", count=len(rows), spent=f"{spent:.4f}"))


_TOKENS = {
    "input_tokens": "in",
    "output_tokens": "out",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_write",
}


@app.command()
def report(
    run: RunArg = None,
    workspace: Workspace = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="The HTML page [default: report.html in the run's host-only records].",
            show_default=False,
        ),
    ] = None,
    svg_out: SvgOut = None,
    png_out: PngOut = None,
) -> None:
    """Draw a run as `flower report` does: steps, rounds, faults, waits, cost, context."""
    found = find(workspace, run)
    drawn = timeline(found)
    if not drawn.bars:
        raise RunError(said("boxcli.no_steps", run=found.run_id))
    html = out or found.state_dir / "report.html"
    # lazy: the report's drawing (its timeline, picture and browser) is this command's alone
    from flower.cli import write_report

    try:
        written = write_report(drawn, html=html, svg_path=svg_out, png_path=png_out)
    except FlowerError as exc:
        raise ConfigError(str(exc)) from exc
    for path in written:
        STDERR.print(said("say.wrote", path=path))


DETACHED = (
    "detached from {run}; it keeps running: `flowerbox attach {run}` follows it again, "
    "`flowerbox stop {run}` stops it"
)


@app.command()
def attach(run: RunArg = None, workspace: Workspace = None) -> None:
    """Follow a live run; a typed line answers its question. Ctrl+C detaches.

    On a terminal a typed line answers the oldest pending question, or is sent to the run
    when none is pending. Ctrl+C leaves the run going (exit 0), as `gh run watch` or
    `kubectl logs -f` do; `flowerbox stop` stops it. Ends with the run's exit code.
    """
    found = find(workspace, run)
    if not found.running:
        raise ended_error(found, "attach to")
    done = threading.Event()
    if sys.stdin.isatty():
        threading.Thread(target=read_answers, args=(found, done), daemon=True).start()
    hint = "type your answer and press Enter" if sys.stdin.isatty() else None
    from flower.cli import Render  # lazy: as in logs
    from flowerbox.box.spec import answer_command  # lazy: as in ps

    render = Render(
        Console(highlight=False, soft_wrap=True), answer_hint=hint or answer_command(found.run_id)
    )
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        final = follow_events(found, render, follow=True)
    except KeyboardInterrupt:
        STDERR.print(DETACHED.format(run=found.run_id))
        raise typer.Exit(0) from None
    finally:
        done.set()
        signal.signal(signal.SIGINT, previous)
    code = _report_end(final)
    raise typer.Exit(2 if code is None else code)


def _report_end(run: Run) -> int | None:
    """A line on stderr for a run that has ended (and the tail of its output if it failed
    without events); its exit code."""
    if run.running:
        return None
    cost = run.cost_usd()
    spent = "" if cost is None else f" · ${cost:.4f}"
    for line in run.meta.get("notices") or []:
        STDERR.print(escape(printable(str(line), one_line=True)))
    STDERR.print(f"{run.run_id}: {status_text(run)}{spent}", style="bold")
    output = run.state_dir / records.OUTPUT
    if run.exit_code not in (0, 1, 3, 130) and output.is_file():
        with output.open("rb") as handle:  # the agent's output: its tail, cleaned
            handle.seek(max(0, output.stat().st_size - 64 * 1024))
            tail = handle.read().decode("utf-8", errors="replace").splitlines()[-20:]
        STDERR.print(escape(printable("\n".join(tail))), style="dim")
    return run.exit_code


@app.command()
def stop(
    ctx: typer.Context,
    run: RunArg = None,
    workspace: Workspace = None,
    on: OnOption = On.LOCAL,
    namespace: Namespace = "flowerbox",
    context: Context = None,
) -> None:
    """Stop a run: SIGTERM to flower, which records its step and exits 130 (resumable).

    With --on kube: the run's Jobs are deleted; its volume stays for resume.
    """
    if on_kube(ctx):
        kube.stop(kube_target(ctx.params), kube.required(run))
        return
    found = find(workspace, run)
    if found.unkept:
        STDERR.print(said("say.keeper_lost", run=found.run_id))
        final = reap(found)
    elif not found.running:
        raise ended_error(found, "stop")
    else:
        STDERR.print(said("say.stopping", run=found.run_id))
        final = stop_run(found)
    if final.running:
        STDERR.print(said("say.stopped_unrecorded", run=found.run_id))
        return
    STDERR.print(said("say.stopped_resumable", run=found.run_id, status=status_text(final)))


@app.command()
def resume(
    ctx: typer.Context,
    run: RunArg = None,
    workspace: Workspace = None,
    detach: Annotated[
        bool | None,
        typer.Option(
            "--detach/--attach",
            "-d/-a",
            help="In the background, or on this terminal (default: as the run was).",
            show_default=False,
        ),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            help="USD for the rest of the run (default: what is left of its budget).",
            callback=positive_usd,
        ),
    ] = None,
    on: OnOption = On.LOCAL,
    namespace: Namespace = "flowerbox",
    context: Context = None,
    runtime_class: RuntimeClass = None,
    broker: Broker = BROKER,
) -> None:
    """Continue a run that ended: a new box, the same settings, the same sessions.

    flower resumes each step's session from the workspace's runs/ (lineage.json); the new
    box gets a new run id, and its meta names the run it resumed. With --on kube: a new Job
    on the run's volume, with the command and image its volume recorded.
    """
    if on_kube(ctx):
        kube.resume(kube_target(ctx.params), kube.required(run))
        return
    found = find(workspace, run)
    if found.running and found.meta.get("guard_took_over"):
        found = guarded_end(found)  # its keeper died: the guard finishes its work first
    if found.running:
        raise RunError(said("boxcli.still_running", run=found.run_id))
    if found.unkept:
        found = reap(found)
    spec = found.spec()
    spec = replace(spec, budget_usd=remaining_budget(found, budget))
    command = list(found.meta.get("command") or [])
    if command[:1] == ["shell"]:
        raise ConfigError(said("boxcli.shell_not_resumed"))
    options = BoxOptions(
        workspace=spec.workspace,
        image=spec.image,
        isolate=spec.workbench is not None,
        budget_usd=spec.budget_usd,
    )
    detached = bool(found.meta.get("detached")) if detach is None else detach
    # lazy: launching brings the docker SDK and the box's machinery, which only a resume
    # of this module's commands needs
    from flowerbox.runs.launch import launch

    code = launch(resume_command(command), options, detach=detached, resume_of=spec)
    raise typer.Exit(code)


@app.command()
def answer(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="The question's id (q1...), as ps shows.")],
    text: Annotated[str, typer.Argument(help="Your answer.")],
    run: RunOption = None,
    workspace: Workspace = None,
    on: OnOption = On.LOCAL,
    namespace: Namespace = "flowerbox",
    context: Context = None,
) -> None:
    """Answer a question a run waits on (on kube: a small Job drops it into its inbox)."""
    if on_kube(ctx, shared={"run"}):
        payload = {"answer": question, "text": text}
        kube.drop(kube_target(ctx.params), kube.required(run), payload)
        return
    found = find(workspace, run)
    if not found.running:
        raise ended_error(found, "answer")
    pending = [str(ask.get("id")) for ask in found.pending_asks()]
    if question not in pending:
        waiting = ", ".join(pending) or said("cli.none")
        raise RunError(
            said("boxcli.no_answer", run=found.run_id, question=repr(question), pending=waiting)
        )
    delivered = deliver(found, drop(found, {"answer": question, "text": text}))
    if delivered == "rejected":
        raise RunError(said("boxcli.answer_refused", run=found.run_id, question=question))
    STDERR.print(f"{found.run_id} {question}: {word('delivered', delivered)}")


@app.command()
def send(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="What to tell the run.")],
    run: RunOption = None,
    workspace: Workspace = None,
    on: OnOption = On.LOCAL,
    namespace: Namespace = "flowerbox",
    context: Context = None,
) -> None:
    """Tell a run something unprompted; a stopped run reads it when resumed (on kube: a
    small Job drops it into its inbox while it runs)."""
    if on_kube(ctx, shared={"run"}):
        kube.drop(kube_target(ctx.params), kube.required(run), {"send": text})
        return
    found = find(workspace, run)
    if not found.running and found.status != "stopped":
        raise ended_error(found, "send to")
    path = drop(found, {"send": text})
    if not found.running:
        STDERR.print(said("say.sent_to_stopped", run=found.run_id))
        return
    STDERR.print(f"{found.run_id}: {word('delivered', deliver(found, path))}")


ClusterRun = Annotated[
    str, typer.Argument(help="The run id (`flowerbox ps --on kube` lists them).")
]
AnyRun = Annotated[
    str, typer.Argument(help="The run id (`flowerbox ps` lists them; with --on kube, a cluster's).")
]


def _cluster_only(ctx: typer.Context, what: str) -> None:
    """deliver and rm have nothing to do on this machine: say where the thing is instead."""
    if not on_kube(ctx):
        raise ConfigError(said("boxcli.cluster_only", command=ctx.command.name, what=what))


@app.command("deliver")
def deliver_run(
    ctx: typer.Context,
    run: AnyRun,
    workspace: Workspace = None,
    on: OnOption = On.LOCAL,
    namespace: Namespace = "flowerbox",
    context: Context = None,
    broker: Broker = BROKER,
) -> None:
    """Push an ended cluster run's branch back as flowerbox/RUN, through the broker's relay;
    here, bring back the commits of a run that could not bring them back when it ended."""
    if on_kube(ctx):
        kube.deliver(kube_target(ctx.params), run)
        return
    found = find(workspace, run)
    if found.running:
        raise RunError(said("boxcli.running_no_deliver", run=found.run_id))
    # lazy: bringing back needs the host git runner, which no other command here loads
    from flowerbox.runs.boundary import deliver_again

    for line in deliver_again(found.spec()):
        STDERR.print(escape(printable(line, one_line=True)))


@app.command("rm")
def remove(
    ctx: typer.Context,
    run: ClusterRun,
    on: OnOption = On.LOCAL,
    namespace: Namespace = "flowerbox",
    context: Context = None,
) -> None:
    """Remove an ended cluster run: its Jobs, volume, network policy and token (no resume)."""
    _cluster_only(ctx, said("boxcli.rm_here"))
    kube.rm(kube_target(ctx.params), run)
