"""Runs as Jobs on a Kubernetes cluster (flowerbox.kube): the `--on kube` half of the run
commands, and the `kube` group for what has no counterpart on one machine.

    flowerbox "ask" --on kube --repo URL   the run's token Secret, then what render prints
    flowerbox ps --on kube                 the runs' Jobs, and the questions they wait on
    flowerbox logs|stop|resume|deliver|rm RUN --on kube
    flowerbox answer QID "text" --on kube --run RUN   (a drop Job into its inbox; send too)
    flowerbox kube render "ask" --repo URL every manifest of the run, as YAML (review, GitOps)
    flowerbox kube render --broker-manifests    the broker's manifests, once per namespace
    flowerbox kube apply-broker            apply them (the key's Secret is made apart)

The run commands (flowerbox.cli.runs, .box, .checks) call the functions here from their
`--on kube` branch: one implementation per command, one command per thing to do. The client
(the `kube` extra) is imported only by what reaches a cluster, so `render` and `--help` need
none; render alone needs PyYAML.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flower import new_run_id, text
from flowerbox.box.options import DEFAULT_IMAGE, BoxOptions
from flowerbox.cli.options import (
    Broker,
    Context,
    DeliverBranch,
    Image,
    Namespace,
    Ref,
    Repo,
    Runtime,
    RuntimeClass,
    kube_target,
)
from flowerbox.errors import BoxError, ConfigError, RunError
from flowerbox.kube.target import BROKER, NO_REPO, KubeTarget, flower_command, kube_spec

if TYPE_CHECKING:
    from flowerbox.kube.cluster import Cluster
    from flowerbox.kube.pod import Manifest
    from flowerbox.selftest.verdicts import Verdict

PROBES_S = 600  # a node pulling the image and scheduling the Pod included
READ_S = 60  # ps waits this long for the Jobs that read the questions (the image is there)
app = typer.Typer(
    name="kube",
    help="Render a run's manifests, apply the broker's; the runs themselves are `--on kube` "
    "(docs/deployment.md, Kubernetes).",
)


def cluster(target: KubeTarget) -> Cluster:
    """The target's namespace on the kubeconfig's cluster (its --context, or the current)."""
    # lazy: the official client is the `kube` extra, and a large import
    from flowerbox.kube.cluster import Cluster

    return Cluster.connect(context=target.context, namespace=target.namespace)


def required(run: str | None) -> str:
    """A run id on a cluster: there is no "the newest run here" to default to."""
    if run is None:
        raise ConfigError(text("boxcli.kube_needs_run"))
    return run


def selftest(target: KubeTarget, *, image: str, negative: bool) -> list[Verdict]:
    """`selftest --on kube`: the probe Job, waited for; its log judged on this host
    (flowerbox.kube.selftest.verdicts); everything of it removed again."""
    # lazy: flowerbox.selftest is only for this one command
    from flowerbox.kube.selftest import MAX_LOG_BYTES, probe_manifests, probe_spec, verdicts

    spec = probe_spec(image=image, negative=negative)
    on = cluster(target)
    manifests = probe_manifests(spec, target, negative=negative)
    for made in on.start(spec, manifests, repo=target.repo):
        typer.echo(text("say.created", what=made), err=True)
    try:
        typer.echo(text("say.kube_waiting", run=spec.run_id, seconds=PROBES_S), err=True)
        on.wait(spec.run_id, timeout_s=PROBES_S)
        return verdicts(on.log(spec.run_id, limit=MAX_LOG_BYTES), spec)
    finally:
        with contextlib.suppress(RunError):  # its Job gone already: nothing to stop
            on.stop(spec.run_id)  # ended or not: then nothing of it is running to refuse rm
        on.remove(spec.run_id)


def pinned(image: str) -> str:
    """The image as the cluster is to run it: by digest when given so, or when this
    machine's engine knows its registry digest; else by its tag, with a line on stderr
    (a tag can be moved to other code after review)."""
    if "@sha256:" in image:
        return image
    # lazy: the docker SDK is only for this look-up, and an engine is optional here
    from flowerbox.box.engine import connect, repo_digest

    try:
        found = repo_digest(connect(), image)
    except BoxError:
        found = None
    if found is None:
        typer.echo(text("say.kube_by_tag", image=image), err=True)
    return found or image


def _print(manifests: list[Manifest]) -> None:
    # lazy: PyYAML is the `kube` extra's, and only render prints YAML
    from flowerbox.kube.document import dump

    typer.echo(dump(manifests), nl=False)


def go(target: KubeTarget, args: list[str], options: BoxOptions) -> None:
    """`flowerbox "ask" --on kube`: start `flower ARGS...` as a Job (its token, volume,
    network policy, Job); prints the run id. The budget and the egress allowlist (presets
    expanded, checked as locally) go on the run's token Secret, where the broker reads them;
    the rendered manifests do not depend on them."""
    if target.repo == NO_REPO:
        raise ConfigError(text("boxcli.kube_needs_repo"))
    # lazy: the box's preparation (git, the shadow .git) is a slow import most commands skip
    from flowerbox.box.prepare import egress_allowlist

    allowed = egress_allowlist("allowlist", options.allow, options.allow_presets)
    spec = kube_spec(new_run_id(), image=pinned(options.image), command=flower_command(args))
    spec = dataclasses.replace(
        spec,
        budget_usd=options.budget_usd,
        allow=allowed,
        allow_api_fetch=options.allow_api_fetch,
    )
    # lazy: the manifests' rendering is for the commands that start or print them, not for
    # every command that may run --on kube (`flowerbox ps` imports this module)
    from flowerbox.kube.render import run_manifests

    manifests = run_manifests(spec, target)
    on = cluster(target)
    for made in on.start(spec, manifests, repo=target.repo, deliver_branch=target.deliver_branch):
        typer.echo(text("say.created", what=made), err=True)
    typer.echo(spec.run_id)


def ps(target: KubeTarget) -> dict[str, list[dict[str, Any]] | str]:
    """Print the runs' Jobs in the namespace (run id, state, Job); returns the questions each
    running run waits on (or why they could not be read)."""
    on = cluster(target)
    jobs = on.runs()
    for status in jobs:
        typer.echo(status.line())
    running = sorted({job.run_id for job in jobs if job.agent and job.state == "running"})
    return on.questions(running, target, timeout_s=READ_S)


def logs(target: KubeTarget, run: str, *, follow: bool) -> None:
    """The agent's output, as its Pod wrote it (the newest Job of the run)."""
    for chunk in cluster(target).logs(run, follow=follow):
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()


def stop(target: KubeTarget, run: str) -> None:
    """Delete the run's Jobs (SIGTERM to flower); its volume stays for resume."""
    for job in cluster(target).stop(run):
        typer.echo(text("say.stopped", what=job))


def resume(target: KubeTarget, run: str) -> None:
    """A new Job on the run's volume: the same command, the same sessions."""
    for made in cluster(target).resume(run, target):
        typer.echo(text("say.created", what=made))


def deliver(target: KubeTarget, run: str) -> None:
    """Push the ended run's branch back as refs/flowerbox/RUN (or the branch flowerbox/RUN,
    as the run was made), through the broker's git relay."""
    created, ref = cluster(target).deliver(run, target)
    for made in created:
        typer.echo(text("say.created", what=made))
    typer.echo(text("say.kube_review", ref=ref, run=run), err=True)


def drop(target: KubeTarget, run: str, payload: dict[str, str]) -> None:
    """An answer or a message into the run's inbox, by a small Job on its node. An answer
    goes only to a question the run waits on, as locally (its questions read first, as ps
    reads them; when they cannot be read, the answer goes and stderr says why)."""
    on = cluster(target)
    if "answer" in payload:
        on.running(run)  # a read beside a run that is not there would wait for nothing
        waiting = on.questions([run], target, timeout_s=READ_S)[run]
        if isinstance(waiting, str):
            typer.echo(text("say.kube_answer_anyway", run=run, waiting=waiting), err=True)
        elif payload["answer"] not in (ids := [str(ask["id"]) for ask in waiting]):
            raise RunError(
                text(
                    "boxcli.kube_no_answer",
                    run=run,
                    question=repr(payload["answer"]),
                    pending=", ".join(ids) or text("cli.none"),
                ),
                run_id=run,
            )
    made = on.drop(run, target, payload)
    typer.echo(text("say.kube_dropped", what=made, run=run))


def rm(target: KubeTarget, run: str) -> None:
    """Remove an ended run: its Jobs, volume, network policy and token (no resume after)."""
    for removed in cluster(target).remove(run):
        typer.echo(text("say.removed", what=removed))


@app.command()
def render(
    ctx: typer.Context,
    ask: Annotated[str | None, typer.Argument(help="What the run is to do.")] = None,
    repo: Repo = None,
    ref: Ref = "main",
    namespace: Namespace = "flowerbox",
    runtime_class: RuntimeClass = None,
    runtime: Runtime = "runc",
    broker: Broker = BROKER,
    image: Image = DEFAULT_IMAGE,
    deliver_branch: DeliverBranch = False,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="The run's id (default: a new one).")
    ] = None,
    for_broker: Annotated[
        bool, typer.Option("--broker-manifests", help="The broker's manifests instead.")
    ] = False,
) -> None:
    """Print every manifest as YAML: exactly what `flowerbox "ask" --on kube` (or `kube
    apply-broker`) applies."""
    from flowerbox.kube.render import broker_manifests, run_manifests  # lazy: as in go

    target = kube_target(ctx.params)
    if for_broker:
        _print(broker_manifests(target, image=pinned(image)))
        return
    if ask is None or repo is None:
        raise typer.BadParameter('pass "ask" and --repo URL, or --broker-manifests')
    command = flower_command(["go", ask])
    spec = kube_spec(run_id or new_run_id(), image=pinned(image), command=command)
    _print(run_manifests(spec, target))


@app.command("apply-broker")
def apply_broker(
    ctx: typer.Context,
    namespace: Namespace = "flowerbox",
    context: Context = None,
    runtime_class: RuntimeClass = None,
    broker: Broker = BROKER,
    image: Image = DEFAULT_IMAGE,
) -> None:
    """Apply the broker's manifests (what `render --broker-manifests` prints)."""
    from flowerbox.kube.render import broker_manifests  # lazy: as in go

    target = kube_target(ctx.params)
    for made in cluster(target).apply(broker_manifests(target, image=pinned(image))):
        typer.echo(text("say.created", what=made))
