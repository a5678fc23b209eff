"""The run commands with `--on kube`, end to end: a kubeconfig names a fake API server on
loopback; what `flowerbox "ask" --on kube` sends is exactly what `kube render` printed for the
same run id, and each other command sends the requests it should, and nothing else."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from flowerbox.cli import kube
from flowerbox.cli.app import app, on_behind
from tests.kube.fakeapi import FakeKube

# What flower says in English (issue 36: what a person reads follows --lang; zh is the suite's
# default, and tests/cli/test_lang_cli.py reads the zh refusals).
pytestmark = pytest.mark.english

runner = CliRunner()
REPO_URL = "https://git.example/team/app.git"
JOBS = "/apis/batch/v1/namespaces/flowerbox/jobs"


def start(kube: FakeKube, *extra: str) -> str:
    """A run started on the fake cluster (`extra` goes to flower); its id."""
    started = runner.invoke(
        app, ["fix the failing test", "--on", "kube", "--repo", REPO_URL, *extra]
    )
    assert started.exit_code == 0, started.output
    return started.stdout.strip().splitlines()[-1]


def sent(kube: FakeKube, since: int) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in kube.requests[since:]]


def reads(kube: FakeKube, printed: Callable[[str], bytes]) -> None:
    """The fake cluster's read Jobs print their header line, then `printed(run_id)`."""

    def ran(job: dict[str, Any]) -> bytes | None:
        if "-read-" not in job["metadata"]["name"]:
            return None
        header = job["spec"]["template"]["spec"]["containers"][0]["command"][4]
        return f"{header}\n".encode() + printed(header.split()[1])

    kube.run = ran


def questions_read(kube: FakeKube, claim: str) -> list[tuple[str, str]]:
    """The requests that read a run's questions with the newest read Job (ps, answer)."""
    read = [m["metadata"]["name"] for m in kube.created() if "-read-" in m["metadata"]["name"]][-1]
    pods = "/api/v1/namespaces/flowerbox/pods"
    return [
        ("GET", JOBS),
        ("GET", claim),
        ("POST", JOBS),
        ("GET", f"{JOBS}/{read}"),
        ("GET", pods),
        ("GET", f"{pods}/{read}-fake1/log"),
        ("DELETE", f"{JOBS}/{read}"),
    ]


def test_go_on_kube_applies_what_render_prints(kubeconfig: FakeKube) -> None:
    run_id = start(kubeconfig)
    rendered = runner.invoke(
        app, ["kube", "render", "fix the failing test", "--repo", REPO_URL, "--run-id", run_id]
    )
    assert rendered.exit_code == 0, rendered.output
    token, *created = kubeconfig.created()
    assert created == list(yaml.safe_load_all(rendered.stdout))
    assert token["stringData"]["token"] not in rendered.stdout
    assert all(r.path.startswith("/api") for r in kubeconfig.requests)


def test_the_repo_budget_and_allowlist_go_on_the_runs_token_for_the_broker(
    kubeconfig: FakeKube,
) -> None:
    extra = ["--budget", "5", "--allow", "docs.example", "--allow-preset", "pypi"]
    run_id = start(kubeconfig, *extra, "--allow-api-fetch")
    token, *created = kubeconfig.created()
    notes = token["metadata"]["annotations"]
    assert notes["flowerbox.dev/repo"] == REPO_URL  # the one the broker's git relay allows
    assert notes["flowerbox.dev/budget-usd"] == "5.0"
    assert notes["flowerbox.dev/allow-api-fetch"] == "true"  # the broker's FetchRule
    allowed = json.loads(notes["flowerbox.dev/allow"])
    assert "docs.example" in allowed and "pypi.org" in allowed
    rendered = runner.invoke(
        app, ["kube", "render", "fix the failing test", "--repo", REPO_URL, "--run-id", run_id]
    )
    assert created == list(yaml.safe_load_all(rendered.stdout))  # the manifests: the same
    bad = runner.invoke(app, ["x", "--on", "kube", "--repo", REPO_URL, "--allow", "a b"])
    assert bad.exit_code == 2 and len(kubeconfig.created()) == 4


def test_flower_options_go_to_the_run_on_kube(kubeconfig: FakeKube) -> None:
    start(kubeconfig, "--timeout", "0")
    job = kubeconfig.created()[-1]
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("fix the failing test") + 1 :][:2] == ["--timeout", "0"]
    refused = runner.invoke(app, ["x", "--on", "kube", "--repo", REPO_URL, "--timout", "0"])
    assert refused.exit_code == 2 and "--timout" in refused.output
    assert len(kubeconfig.created()) == 4  # the refused run sent nothing


def test_apply_broker_applies_what_render_prints(kubeconfig: FakeKube) -> None:
    applied = runner.invoke(app, ["kube", "apply-broker", "--runtime-class", "gvisor"])
    assert applied.exit_code == 0, applied.output
    rendered = runner.invoke(
        app, ["kube", "render", "--broker-manifests", "--runtime-class", "gvisor"]
    )
    assert kubeconfig.created() == list(yaml.safe_load_all(rendered.stdout))


def test_each_run_command_on_kube_sends_its_requests(kubeconfig: FakeKube) -> None:
    run_id = start(kubeconfig)
    claims = "/api/v1/namespaces/flowerbox/persistentvolumeclaims"
    claim = f"{claims}/flowerbox-{run_id}"
    policies = "/apis/networking.k8s.io/v1/namespaces/flowerbox/networkpolicies"

    def run(*args: str) -> tuple[str, list[tuple[str, str]]]:
        since = len(kubeconfig.requests)
        done = runner.invoke(app, [*args, "--on", "kube"])
        assert done.exit_code == 0, done.output
        return done.stdout, sent(kubeconfig, since)

    reads(kubeconfig, lambda run: b"")  # no asks.json: no question
    listed, requests = run("ps")
    assert listed.split() == [run_id, "running", f"flowerbox-{run_id}"]
    assert kubeconfig.created()[-1]["metadata"]["name"].startswith(f"flowerbox-{run_id}-read-")
    assert requests == questions_read(kubeconfig, claim)
    stopped, requests = run("stop", run_id)
    assert stopped.strip() == f"stopped flowerbox-{run_id}"
    assert requests == [("GET", JOBS), ("DELETE", f"{JOBS}/flowerbox-{run_id}")]
    resumed, requests = run("resume", run_id)
    assert resumed.strip() == f"created Job/flowerbox-{run_id}-1"
    kept = [("POST", claims), ("POST", policies)]  # there already: 409, left as they are
    assert requests == [("GET", claim), ("GET", JOBS), *kept, ("POST", JOBS)]
    reads(kubeconfig, lambda run: json.dumps([QUESTION]).encode())
    answered, requests = run("answer", "q1", "yes", "--run", run_id)
    assert answered.startswith(f"created Job/flowerbox-{run_id}-drop-")
    asked = questions_read(kubeconfig, claim)  # first, as ps reads them: q1 is one
    assert requests == [*asked, ("GET", claim), ("GET", JOBS), ("POST", JOBS)]
    assert kubeconfig.created()[-1]["spec"]["template"]["spec"]["containers"][0]["command"][4] == (
        '{"answer": "q1", "text": "yes"}'
    )
    told, requests = run("send", "also the docs", "--run", run_id)
    assert "--on kube" in told and requests[-1] == ("POST", JOBS)
    assert (
        '{"send": "also the docs"}'
        in kubeconfig.created()[-1]["spec"]["template"]["spec"]["containers"][0]["command"]
    )
    for job in list(kubeconfig.objects):
        if job[0] == "jobs":
            kubeconfig.objects[job]["status"] = {"succeeded": 1}
    delivered, requests = run("deliver", run_id)
    assert delivered.strip() == f"created Job/flowerbox-{run_id}-deliver"
    assert requests == [("GET", claim), ("GET", JOBS), ("POST", JOBS)]
    kubeconfig.objects[("jobs", f"flowerbox-{run_id}-deliver")]["status"] = {"succeeded": 1}
    removed, requests = run("rm", run_id)
    assert f"removed PersistentVolumeClaim/flowerbox-{run_id}" in removed
    assert ("DELETE", claim) in requests
    assert {kind for kind, _ in kubeconfig.objects} == {"pods"}  # the cluster collects them


def pushed_ref(kube: FakeKube, run_id: str) -> str:
    """The ref the run's deliver Job pushes (the last word of its push line)."""
    rendered = kube.objects[("jobs", f"flowerbox-{run_id}-deliver")]["spec"]["template"]
    return str(rendered["spec"]["containers"][0]["command"][-1])


@pytest.mark.parametrize(
    ("extra", "ref"),
    [((), "refs/flowerbox/{}"), (("--deliver-branch",), "refs/heads/flowerbox/{}")],
    ids=["default", "deliver-branch"],
)
def test_deliver_pushes_the_one_ref_the_run_was_made_with(
    kubeconfig: FakeKube, extra: tuple[str, ...], ref: str
) -> None:
    """Attack X1: the deliver Job pushed a branch, which the forge's CI runs with the
    repository's secrets. By default it is refs/flowerbox/<run-id> (no CI runs on it); a
    branch only when the run was made so, recorded on its claim (for `deliver`) and its
    token Secret (for the broker's relay)."""
    run_id = start(kubeconfig, *extra)
    token = kubeconfig.objects[("secrets", f"flowerbox-{run_id}-token")]
    claim = kubeconfig.objects[("persistentvolumeclaims", f"flowerbox-{run_id}")]
    for made in (token, claim):
        assert made["metadata"]["annotations"]["flowerbox.dev/deliver-ref"] == ref.format(run_id)
    kubeconfig.objects[("jobs", f"flowerbox-{run_id}")]["status"] = {"succeeded": 1}
    delivered = runner.invoke(app, ["deliver", run_id, "--on", "kube"])
    assert delivered.exit_code == 0, delivered.output
    assert pushed_ref(kubeconfig, run_id) == ref.format(run_id)
    fetch = f"git fetch origin {ref.format(run_id)}:refs/remotes/flowerbox/{run_id}"
    assert fetch in delivered.stderr  # where the reviewer finds it


def test_logs_on_kube_reads_the_agents_pod(kubeconfig: FakeKube) -> None:
    run_id = start(kubeconfig)
    pod = f"flowerbox-{run_id}-x1y2z"
    kubeconfig.objects[("pods", pod)] = {
        "metadata": {"name": pod, "labels": {"flowerbox.dev/run-id": run_id}},
        "spec": {"containers": [{"name": "agent", "image": "flowerbox:dev"}]},
    }
    kubeconfig.logs[pod] = b"step 1 done\n"
    shown = runner.invoke(app, ["logs", run_id, "-f", "--on", "kube"])
    assert shown.exit_code == 0 and shown.stdout == "step 1 done\n"
    assert kubeconfig.requests[-1].query["follow"] == ["true"]
    missing = runner.invoke(app, ["logs", "20260101-000000-ffffff", "--on", "kube"])
    assert missing.exit_code == 2 and "ps --on kube" in missing.output


QUESTION = {"id": "q1", "question": "which API?", "options": ["v1", "v2"]}


def test_ps_on_kube_shows_the_questions_a_run_waits_on(kubeconfig: FakeKube) -> None:
    run_id = start(kubeconfig)
    reads(kubeconfig, lambda run: json.dumps([QUESTION]).encode())
    listed = runner.invoke(app, ["ps", "--on", "kube"])
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines()[1:] == [
        f"{run_id} q1: which API?  [v1 / v2]",
        f'  answer: flowerbox answer q1 "..." --run {run_id} --on kube',
    ]
    assert not any("-read-" in name for kind, name in kubeconfig.objects if kind == "jobs")


ANOTHER = "20260101-000000-ffffff"


@pytest.mark.parametrize(
    "printed",
    [
        lambda run: b"[" + b'{"id": "q1", "question": "x"},' * 20000 + b"{}]",  # over the bound
        lambda run: b'[{"id": "q1", "question": "which API?"',  # not JSON
        lambda run: b'{"id": "q1", "question": "which API?"}',  # not a list of questions
        lambda run: b'[{"id": 1, "question": "no string id"}, "q2"]',
        lambda run: b"\xff\xfe[]",
    ],
)
def test_ps_on_kube_shows_nothing_of_a_hostile_asks_file(
    kubeconfig: FakeKube, printed: Callable[[str], bytes]
) -> None:
    run_id = start(kubeconfig)
    reads(kubeconfig, printed)
    listed = runner.invoke(app, ["ps", "--on", "kube"])
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.split() == [run_id, "running", f"flowerbox-{run_id}"]


def test_answer_on_kube_goes_only_to_a_question_the_run_waits_on(
    kubeconfig: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = start(kubeconfig)
    reads(kubeconfig, lambda run: json.dumps([QUESTION]).encode())
    refused = runner.invoke(app, ["answer", "q9", "yes", "--run", run_id, "--on", "kube"])
    assert refused.exit_code == 2 and "(pending: q1)" in refused.output
    assert not any("-drop-" in m["metadata"]["name"] for m in kubeconfig.created())
    kubeconfig.run = lambda job: None  # its questions cannot be read: the answer goes anyway
    monkeypatch.setattr(kube, "READ_S", 0.2)
    blind = runner.invoke(app, ["answer", "q9", "yes", "--run", run_id, "--on", "kube"])
    assert blind.exit_code == 0 and "answering anyway" in blind.stderr
    assert "-drop-" in kubeconfig.created()[-1]["metadata"]["name"]
    kubeconfig.objects[("jobs", f"flowerbox-{run_id}")]["status"] = {"succeeded": 1}
    ended = runner.invoke(app, ["answer", "q1", "yes", "--run", run_id, "--on", "kube"])
    assert ended.exit_code == 2 and "is not running" in ended.output  # a drop Job runs still


def test_ps_on_kube_lists_the_runs_whose_questions_cannot_be_read(
    kubeconfig: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = start(kubeconfig)
    monkeypatch.setattr(kube, "READ_S", 0.2)  # the fake's read Jobs never end here
    listed = runner.invoke(app, ["ps", "--on", "kube"])
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.split() == [run_id, "running", f"flowerbox-{run_id}"]
    assert f"{run_id}: its questions are unknown: its read Job did not end" in listed.stderr


def test_ps_on_kube_ignores_a_log_of_another_run_or_read(kubeconfig: FakeKube) -> None:
    run_id = start(kubeconfig)
    asked = json.dumps([QUESTION]).encode()

    def forged(job: dict[str, Any]) -> bytes | None:
        if "-read-" not in job["metadata"]["name"]:
            return None
        _, run, tag = job["spec"]["template"]["spec"]["containers"][0]["command"][4].split()
        return f"flowerbox-asks {ANOTHER} {tag}\n".encode() + asked

    kubeconfig.run = forged
    listed = runner.invoke(app, ["ps", "--on", "kube"])
    assert listed.stdout.split() == [run_id, "running", f"flowerbox-{run_id}"]
    reads(kubeconfig, lambda run: b"\x1b]0;owned\x07" + asked)  # text before the JSON
    assert "q1" not in runner.invoke(app, ["ps", "--on", "kube"]).stdout
    stale = [{"id": "q1", "question": "\x1b[31mred\x1b[0m [bold]x[/bold]"}]
    reads(kubeconfig, lambda run: json.dumps(stale).encode())
    shown = runner.invoke(app, ["ps", "--on", "kube"]).stdout
    assert f"{run_id} q1: red [bold]x[/bold]" in shown and "\x1b" not in shown


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["ps", "--on", "mars"], "'local', 'kube'"),
        (["x", "--repo", REPO_URL], "--repo is for a cluster: add --on kube"),
        (["resume", "r", "--runtime-class", "kata"], "--runtime-class is for a cluster"),
        (["stop", "r", "--context", "prod"], "--context is for a cluster"),
        (["ps", "--on", "kube", "-w", "/tmp"], "--workspace is for this machine"),
        (["ps", "--on", "kube", "--all"], "--all is for this machine"),
        (["x", "--on", "kube", "--repo", REPO_URL, "--detach"], "--detach is for this machine"),
        (["x", "--on", "kube"], "--on kube needs --repo URL"),
        (["stop", "--on", "kube"], "pass the run id with --on kube"),
        (["answer", "q1", "yes", "--on", "kube"], "pass the run id with --on kube"),
        (["deliver", "r"], "no run 'r' here or in the index"),  # a run of this machine's
        (["deliver", "r", "--on", "kube", "-w", "/tmp"], "--workspace is for this machine"),
        (["rm", "r"], "flowerbox rm is for a run on a cluster (--on kube)"),
        (["selftest", "--on", "kube", "--weaken", "no_seccomp"], "--weaken is for this machine"),
        (["kube", "ps"], "No such command 'ps'"),
    ],
)
def test_options_for_the_other_place_are_refused(
    kubeconfig: FakeKube, args: list[str], said: str
) -> None:
    done = runner.invoke(app, args)
    assert done.exit_code == 2, done.output
    assert said in " ".join(done.output.split()), done.output
    assert kubeconfig.requests == []


def test_the_namespace_from_the_environment_is_no_refusal(
    kubeconfig: FakeKube, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLOWERBOX_NAMESPACE", "team-a")
    listed = runner.invoke(app, ["ps", "--on", "kube"])
    assert listed.exit_code == 0, listed.output
    assert kubeconfig.requests[-1].path == "/apis/batch/v1/namespaces/team-a/jobs"
    here = runner.invoke(app, ["ps", "-w", str(tmp_path)])
    assert here.exit_code == 0 and "no flowerbox runs" in here.output


def test_a_bad_target_or_no_cluster_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = runner.invoke(app, ["kube", "render", "x", "--repo", "git@git.example:a.git"])
    assert bad.exit_code == 2 and "https://" in bad.output
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    nothing = runner.invoke(app, ["ps", "--on", "kube"])
    assert nothing.exit_code == 2 and "--context" in nothing.output


def test_on_may_stand_before_the_command(kubeconfig: FakeKube) -> None:
    started = runner.invoke(
        app, ["--lang", "en", "--on", "kube", "fix the failing test", "--repo", REPO_URL]
    )
    assert started.exit_code == 0, started.output
    run_id = started.stdout.split()[-1]
    reads(kubeconfig, lambda run: b"")
    listed = runner.invoke(app, ["--on=kube", "ps"])
    assert listed.exit_code == 0 and listed.stdout.split()[0] == run_id
    assert on_behind(["--on", "kube", "shell", "--", "x", "--on", "y"]) == [
        "shell",
        "--on",
        "kube",
        "--",
        "x",
        "--on",
        "y",
    ]
    assert on_behind(["ps", "--on", "kube"]) == ["ps", "--on", "kube"]


@pytest.mark.parametrize(
    ("image", "noted"),
    [
        ("registry.example/flowerbox@sha256:" + "ab" * 32, False),
        ("registry.example/flowerbox-not-here:0.2.0", True),
    ],
    ids=["by-digest", "by-tag-unknown-here"],
)
def test_render_names_the_image_by_digest_or_says_it_is_by_tag(image: str, noted: bool) -> None:
    """L1: a tag can be moved to other code after the manifests were reviewed. An image
    given by digest is rendered so; one this machine's engine knows the registry digest of
    is rendered by it; any other keeps its tag, and stderr says how to pin it."""
    done = runner.invoke(app, ["kube", "render", "x", "--repo", REPO_URL, "--image", image])
    assert done.exit_code == 0, done.output
    images = {
        box["image"]
        for m in yaml.safe_load_all(done.stdout)
        if m["kind"] == "Job"
        for box in m["spec"]["template"]["spec"]["containers"]
    }
    assert images == {image}
    assert ("is named by its tag: pass --image NAME@sha256:" in done.stderr) is noted
