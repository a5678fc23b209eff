"""`flowerbox kube ...` end to end: a kubeconfig names a fake API server on loopback, and what
`kube go` sends is exactly what `kube render` printed for the same run id."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from flowerbox.cli.app import app
from tests.kube.fakeapi import FakeKube

runner = CliRunner()
REPO_URL = "https://git.example/team/app.git"


def test_go_applies_what_render_prints(kubeconfig: FakeKube) -> None:
    started = runner.invoke(app, ["kube", "go", "fix the failing test", "--repo", REPO_URL])
    assert started.exit_code == 0, started.output
    run_id = started.stdout.strip().splitlines()[-1]
    rendered = runner.invoke(
        app, ["kube", "render", "fix the failing test", "--repo", REPO_URL, "--run-id", run_id]
    )
    assert rendered.exit_code == 0, rendered.output
    token, *sent = kubeconfig.created()
    assert sent == list(yaml.safe_load_all(rendered.stdout))
    assert token["stringData"]["token"] not in rendered.stdout
    assert all(r.path.startswith("/api") for r in kubeconfig.requests)


def test_apply_broker_applies_what_render_prints(kubeconfig: FakeKube) -> None:
    applied = runner.invoke(app, ["kube", "apply-broker", "--runtime-class", "gvisor"])
    assert applied.exit_code == 0, applied.output
    rendered = runner.invoke(
        app, ["kube", "render", "--broker-manifests", "--runtime-class", "gvisor"]
    )
    assert kubeconfig.created() == list(yaml.safe_load_all(rendered.stdout))


def test_ps_stop_logs_resume_through_the_cli(kubeconfig: FakeKube) -> None:
    run_id = runner.invoke(app, ["kube", "go", "x", "--repo", REPO_URL]).stdout.split()[-1]
    listed = runner.invoke(app, ["kube", "ps"])
    assert listed.stdout.split() == [run_id, "running", f"flowerbox-{run_id}"]
    stopped = runner.invoke(app, ["kube", "stop", run_id])
    assert stopped.stdout.strip() == f"stopped flowerbox-{run_id}"
    resumed = runner.invoke(app, ["kube", "resume", run_id])
    assert resumed.stdout.strip() == f"created Job/flowerbox-{run_id}-1"
    answered = runner.invoke(app, ["kube", "answer", run_id, "q1", "yes"])
    assert answered.stdout.startswith(f"created Job/flowerbox-{run_id}-drop-"), answered.output
    sent = runner.invoke(app, ["kube", "send", run_id, "also the docs"])
    assert sent.exit_code == 0 and "kube logs" in sent.stdout
    missing = runner.invoke(app, ["kube", "logs", "20260101-000000-ffffff"])
    assert missing.exit_code == 2 and "kube ps" in missing.output


def test_a_bad_target_or_no_cluster_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = runner.invoke(app, ["kube", "render", "x", "--repo", "git@git.example:a.git"])
    assert bad.exit_code == 2 and "https://" in bad.output
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    nothing = runner.invoke(app, ["kube", "ps"])
    assert nothing.exit_code == 2 and "--context" in nothing.output
