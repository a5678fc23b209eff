"""`flowerbox kube ...`: runs as Jobs on a Kubernetes cluster (flowerbox.kube).

    flowerbox kube render "ask" --repo URL     every manifest of the run, as YAML (review, GitOps)
    flowerbox kube render --broker             the broker's manifests, once per namespace
    flowerbox kube apply-broker                apply them (the key's Secret is made apart)
    flowerbox kube go "ask" --repo URL         the run's token Secret, then what render prints
    flowerbox kube ps | logs RUN [-f] | stop RUN | resume RUN | deliver RUN | rm RUN
    flowerbox kube answer RUN QID "text" | send RUN "text"     (a drop Job into its inbox)

The client (the `kube` extra) is imported only by the commands that reach a cluster, so
`render` and `--help` need none; render alone needs PyYAML.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from flower import new_run_id
from flowerbox.box.options import DEFAULT_IMAGE
from flowerbox.cli.options import Image
from flowerbox.kube.pod import Manifest
from flowerbox.kube.render import broker_manifests, run_manifests
from flowerbox.kube.target import BROKER, NO_REPO, KubeTarget, flower_command, kube_spec

if TYPE_CHECKING:
    from flowerbox.kube.cluster import Cluster

app = typer.Typer(
    name="kube", help="Runs as Jobs on a Kubernetes cluster (docs/deployment.md, Kubernetes)."
)

Repo = Annotated[
    str, typer.Option("--repo", metavar="URL", help="The https git remote the run works on.")
]
Ref = Annotated[str, typer.Option("--ref", help="The branch or tag the workspace starts from.")]
Namespace = Annotated[
    str, typer.Option("--namespace", "-n", envvar="FLOWERBOX_NAMESPACE", help="The namespace.")
]
Context = Annotated[
    str | None, typer.Option("--context", help="The kubeconfig context (default: current).")
]
RuntimeClass = Annotated[
    str | None,
    typer.Option("--runtime-class", metavar="NAME", help="The Pods' runtimeClassName (gvisor...)."),
]
Broker = Annotated[str, typer.Option("--broker", help="The broker's Service name.")]
RunArg = Annotated[str, typer.Argument(help="The run id (flowerbox kube ps lists them).")]
Ask = Annotated[str, typer.Argument(help="What you want done, in one line.")]


def _cluster(context: str | None, namespace: str) -> Cluster:
    # lazy: the official client is the `kube` extra, and a large import
    from flowerbox.kube.cluster import Cluster

    return Cluster.connect(context=context, namespace=namespace)


def _print(manifests: list[Manifest]) -> None:
    # lazy: PyYAML is the `kube` extra's, and only render prints YAML
    from flowerbox.kube.document import dump

    typer.echo(dump(manifests), nl=False)


def _target(
    repo: str, ref: str, namespace: str, runtime_class: str | None, broker: str
) -> KubeTarget:
    return KubeTarget(
        repo=repo, ref=ref, namespace=namespace, runtime_class=runtime_class, broker=broker
    )


def on_cluster(target: KubeTarget, *, image: str, context: str | None, negative: bool) -> str:
    """`selftest --on kube`: start the probe Job; returns its run id."""
    # lazy: flowerbox.selftest is only for this one command of the group
    from flowerbox.kube.selftest import probe_manifests, probe_spec

    spec = probe_spec(image=image, negative=negative)
    manifests = probe_manifests(spec, target, negative=negative)
    for made in _cluster(context, target.namespace).start(spec, manifests, repo=target.repo):
        typer.echo(f"created {made}", err=True)
    typer.echo(f"the verdicts: flowerbox kube logs {spec.run_id} -f", err=True)
    return spec.run_id


@app.command()
def render(
    ask: Annotated[str | None, typer.Argument(help="What the run is to do.")] = None,
    repo: Annotated[
        str | None, typer.Option("--repo", metavar="URL", help="The https git remote.")
    ] = None,
    ref: Ref = "main",
    namespace: Namespace = "flowerbox",
    runtime_class: RuntimeClass = None,
    broker: Broker = BROKER,
    image: Image = DEFAULT_IMAGE,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="The run's id (default: a new one).")
    ] = None,
    for_broker: Annotated[
        bool, typer.Option("--broker-manifests", help="The broker's manifests instead.")
    ] = False,
) -> None:
    """Print every manifest as YAML: exactly what `kube go` (or `kube apply-broker`) applies."""
    if for_broker:
        target = _target(NO_REPO, ref, namespace, runtime_class, broker)
        _print(broker_manifests(target, image=image))
        return
    if ask is None or repo is None:
        raise typer.BadParameter('pass "ask" and --repo URL, or --broker-manifests')
    target = _target(repo, ref, namespace, runtime_class, broker)
    spec = kube_spec(run_id or new_run_id(), image=image, command=flower_command(["go", ask]))
    _print(run_manifests(spec, target))


@app.command("apply-broker")
def apply_broker(
    namespace: Namespace = "flowerbox",
    context: Context = None,
    runtime_class: RuntimeClass = None,
    broker: Broker = BROKER,
    image: Image = DEFAULT_IMAGE,
) -> None:
    """Apply the broker's manifests (what `render --broker-manifests` prints)."""
    target = _target(NO_REPO, "main", namespace, runtime_class, broker)
    for made in _cluster(context, namespace).apply(broker_manifests(target, image=image)):
        typer.echo(f"created {made}")


@app.command()
def go(
    ask: Ask,
    repo: Repo,
    ref: Ref = "main",
    namespace: Namespace = "flowerbox",
    context: Context = None,
    runtime_class: RuntimeClass = None,
    broker: Broker = BROKER,
    image: Image = DEFAULT_IMAGE,
) -> None:
    """Start a run as a Job: its token, its volume, its network policy, the Job; prints the id."""
    target = _target(repo, ref, namespace, runtime_class, broker)
    spec = kube_spec(new_run_id(), image=image, command=flower_command(["go", ask]))
    for made in _cluster(context, namespace).start(spec, run_manifests(spec, target)):
        typer.echo(f"created {made}", err=True)
    typer.echo(spec.run_id)


@app.command()
def ps(namespace: Namespace = "flowerbox", context: Context = None) -> None:
    """The runs' Jobs in the namespace: run id, state, Job."""
    for status in _cluster(context, namespace).runs():
        typer.echo(status.line())


@app.command()
def logs(
    run: RunArg,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Until the Pod ends.")] = False,
    namespace: Namespace = "flowerbox",
    context: Context = None,
) -> None:
    """The agent's output, as its Pod wrote it (the newest Job of the run)."""
    for chunk in _cluster(context, namespace).logs(run, follow=follow):
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()


@app.command()
def stop(run: RunArg, namespace: Namespace = "flowerbox", context: Context = None) -> None:
    """Delete the run's Jobs (SIGTERM to flower); its volume stays for resume."""
    for job in _cluster(context, namespace).stop(run):
        typer.echo(f"stopped {job}")


@app.command()
def resume(
    run: RunArg,
    namespace: Namespace = "flowerbox",
    context: Context = None,
    runtime_class: RuntimeClass = None,
    broker: Broker = BROKER,
) -> None:
    """A new Job on the run's volume: the same command, the same sessions."""
    target = _target(NO_REPO, "main", namespace, runtime_class, broker)
    for made in _cluster(context, namespace).resume(run, target):
        typer.echo(f"created {made}")


@app.command()
def deliver(
    run: RunArg,
    namespace: Namespace = "flowerbox",
    context: Context = None,
    broker: Broker = BROKER,
) -> None:
    """Push the ended run's branch back as flowerbox/RUN, through the broker's git relay."""
    target = _target(NO_REPO, "main", namespace, None, broker)
    for made in _cluster(context, namespace).deliver(run, target):
        typer.echo(f"created {made}")


@app.command()
def answer(
    run: RunArg,
    question: Annotated[str, typer.Argument(help="The question's id (q1...), as its log shows.")],
    text: Annotated[str, typer.Argument(help="Your answer.")],
    namespace: Namespace = "flowerbox",
    context: Context = None,
) -> None:
    """Answer a question the run waits on (a small Job drops it into its inbox)."""
    _drop(run, {"answer": question, "text": text}, namespace, context)


@app.command()
def send(
    run: RunArg,
    text: Annotated[str, typer.Argument(help="What to tell the run.")],
    namespace: Namespace = "flowerbox",
    context: Context = None,
) -> None:
    """Tell the run something unprompted (a small Job drops it into its inbox)."""
    _drop(run, {"send": text}, namespace, context)


def _drop(run: str, payload: dict[str, str], namespace: str, context: str | None) -> None:
    target = KubeTarget(repo=NO_REPO, namespace=namespace)
    made = _cluster(context, namespace).drop(run, target, payload)
    typer.echo(f"created {made}: `flowerbox kube logs {run} -f` shows the run take it")


@app.command()
def rm(run: RunArg, namespace: Namespace = "flowerbox", context: Context = None) -> None:
    """Remove an ended run: its Jobs, volume, network policy and token (no resume after)."""
    for removed in _cluster(context, namespace).remove(run):
        typer.echo(f"removed {removed}")
