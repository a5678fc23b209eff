"""Every rendered manifest against the official Kubernetes schemas of two minor versions
(kubernetes-validate bundles them; strict: an unknown field is an error), and what a run's
Job promises: one try, a deadline, a TTL, no credential in sight."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from flowerbox.box.spec import BoxSpec
from flowerbox.errors import ConfigError
from flowerbox.kube.document import dump
from flowerbox.kube.pod import Manifest
from flowerbox.kube.render import deliver_manifests, run_manifests
from flowerbox.kube.target import KubeTarget, kube_spec

VERSIONS = ("1.29.0", "1.31.0")


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_validates_against_the_official_schema(
    manifests: list[Manifest], version: str
) -> None:
    kinds = set()
    for manifest in manifests:
        kubernetes_validate.validate(manifest, version, strict=True)
        kinds.add(manifest["kind"])
    assert kinds == {
        "PersistentVolumeClaim",
        "NetworkPolicy",
        "Job",
        "Deployment",
        "Service",
        "ServiceAccount",
        "Role",
        "RoleBinding",
    }


def test_the_validator_refuses_a_wrong_field(manifests: list[Manifest]) -> None:
    """The check above can fail: a misspelt or mistyped security field is caught."""
    job = copy.deepcopy(next(m for m in manifests if m["kind"] == "Job"))
    job["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] = "yes"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, VERSIONS[0], strict=True)
    job["spec"]["template"]["spec"]["securityContext"]["runAsNonRot"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, VERSIONS[1], strict=True)


def test_the_yaml_is_the_manifests(manifests: list[Manifest]) -> None:
    text = dump(manifests)
    assert list(yaml.safe_load_all(text)) == manifests
    assert "&id" not in text and "*id" not in text  # every field where it is read


def test_a_run_is_one_try_with_a_deadline_and_a_ttl(spec: BoxSpec, target: KubeTarget) -> None:
    claim, policy, job = run_manifests(spec, target)
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] == target.deadline_s
    assert job["spec"]["ttlSecondsAfterFinished"] == target.ttl_s
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["runtimeClassName"] == "gvisor"
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert policy["spec"]["podSelector"]["matchLabels"] == {"flowerbox.dev/run-id": spec.run_id}
    assert (
        "runtimeClassName"
        not in run_manifests(spec, KubeTarget(repo=target.repo))[2]["spec"]["template"]["spec"]
    )


def test_the_workspace_and_runs_are_on_the_claim_at_fixed_paths(
    spec: BoxSpec, target: KubeTarget
) -> None:
    """resume is a new Job on the same claim: the session store finds the same paths."""
    job = run_manifests(spec, target, name="flowerbox-again")[2]
    mounts = job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    (claimed,) = [m["mountPath"] for m in mounts if m["name"] == "run"]
    for path in (spec.workspace, spec.run_dir, spec.home, spec.workbench):
        assert str(path).startswith(claimed + "/")
    assert job["metadata"]["name"] == "flowerbox-again"


def test_no_credential_is_rendered(
    manifests: list[Manifest], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-must-not-appear")
    text = dump(manifests)
    assert "sk-ant-must-not-appear" not in text
    assert all(m["kind"] != "Secret" for m in manifests)
    agent = next(m for m in manifests if m["kind"] == "Job")["spec"]["template"]["spec"]
    (key,) = [e for e in agent["containers"][0]["env"] if e["name"] == "ANTHROPIC_API_KEY"]
    assert set(key) == {"name", "valueFrom"}  # the run's token, from its own Secret


def test_the_agent_reaches_only_the_broker_and_no_dns(manifests: list[Manifest]) -> None:
    """Attack K1: the agent's Pods could ask kube-dns (in any namespace) any name, a way out
    for data (a name under a domain whose server the attacker reads). Now the policy lets
    them reach the broker's ports alone, and every Pod of a run has no resolver but its own
    loopback, the broker's address coming from the kubelet, never from a lookup."""
    run_policy = next(
        m
        for m in manifests
        if m["kind"] == "NetworkPolicy"
        and "podSelector" in m["spec"]
        and m["spec"]["podSelector"].get("matchLabels", {}).get("flowerbox.dev/run-id")
    )
    (rule,) = run_policy["spec"]["egress"]
    assert rule["to"] == [{"podSelector": {"matchLabels": {"flowerbox.dev/role": "broker"}}}]
    assert {p["port"] for p in rule["ports"]} == {8080, 3128, 8081}  # no 53
    assert run_policy["spec"]["ingress"] == []
    deny = next(m for m in manifests if m["metadata"]["name"] == "flowerbox-default-deny")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    pods = [m["spec"]["template"]["spec"] for m in manifests if m["kind"] == "Job"]
    assert len(pods) == 4  # the run's, deliver, drop, read
    for pod in pods:
        assert pod["dnsPolicy"] == "None"
        assert pod["dnsConfig"] == {"nameservers": ["127.0.0.1"], "searches": [], "options": []}
        for box in [*pod["initContainers"], *pod["containers"]]:
            values = " ".join(str(e.get("value", "")) for e in box["env"])
            assert "flowerbox-broker" not in values  # no name to look up: the kubelet's IP


@pytest.mark.parametrize(
    ("field", "value"),
    [("namespace", "Team_A"), ("broker", "-broker"), ("repo", "git@git.example:team/app.git")],
)
def test_a_target_that_cannot_be_used_is_refused(field: str, value: str) -> None:
    given = {"repo": "https://git.example/team/app.git", field: value}
    with pytest.raises(ConfigError, match="--"):
        KubeTarget(**given)


def test_a_run_id_that_cannot_name_objects_is_refused() -> None:
    with pytest.raises(ConfigError, match="运行编号 .* 不能用来命名 Kubernetes 对象"):
        kube_spec("Run_1", image="flowerbox:dev", command=("flower",))


def test_git_on_the_agents_repository_runs_nothing_planted_there(
    spec: BoxSpec, target: KubeTarget
) -> None:
    """Attack: the agent writes .git/hooks/pre-push or core.fsmonitor into the repository on
    the claim; the deliver Job's git must run neither (GIT_CONFIG_* outrank .git/config)."""
    (job,) = deliver_manifests(spec, target)
    (push,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in push["env"]}
    count = int(env["GIT_CONFIG_COUNT"])
    settings = {env[f"GIT_CONFIG_KEY_{n}"]: env[f"GIT_CONFIG_VALUE_{n}"] for n in range(count)}
    assert settings["core.hooksPath"] == "/dev/null"
    assert settings["core.fsmonitor"] == "false"
    assert settings["credential.helper"] == ""
    assert "git push" in push["command"][2]


def test_a_planted_hook_and_fsmonitor_do_not_run_in_a_real_push(
    spec: BoxSpec, target: KubeTarget, tmp_path: Path
) -> None:
    """The same attack on real git: the deliver Job's git settings, a push to a local remote
    (refused: the Job's git has http alone as a transport, since a local remote's
    receive-pack is a program its config names; tests/flowerbox/test_gitrelay.py pushes
    through the relay)."""
    (job,) = deliver_manifests(spec, target)
    (push,) = job["spec"]["template"]["spec"]["containers"]
    settings = {e["name"]: e["value"] for e in push["env"] if e["name"].startswith("GIT_CONFIG")}
    repo, remote, ran = tmp_path / "repo", tmp_path / "remote.git", tmp_path / "ran"
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@example.invalid"]
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    hook = repo / ".git" / "hooks" / "pre-push"
    hook.write_text(f"#!/bin/sh\ntouch {ran}-hook\n")
    hook.chmod(0o755)
    monitor = tmp_path / "monitor.sh"
    monitor.write_text(f"#!/bin/sh\ntouch {ran}-fsmonitor\n")
    monitor.chmod(0o755)
    subprocess.run(["git", "-C", str(repo), "config", "core.fsmonitor", str(monitor)], check=True)
    planted = subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, check=False)
    assert planted.returncode == 0 and Path(f"{ran}-fsmonitor").exists()  # the plant works
    Path(f"{ran}-fsmonitor").unlink()
    env = {**os.environ, **settings, "HOME": str(tmp_path)}
    subprocess.run(["git", "-C", str(repo), "status"], env=env, check=True, capture_output=True)
    push = ["git", "-C", str(repo), "push", "-q", str(remote), "HEAD:refs/flowerbox/x"]
    pushed = subprocess.run(push, env=env, capture_output=True, text=True, check=False)
    assert pushed.returncode != 0 and "transport 'file' not allowed" in pushed.stderr
    assert not Path(f"{ran}-hook").exists() and not Path(f"{ran}-fsmonitor").exists()


def test_the_fetch_line_clones_once_and_makes_home(
    spec: BoxSpec, target: KubeTarget, tmp_path: Path
) -> None:
    """The init container's own shell line, run here on a local remote: a clone at the ref,
    HOME made; run again (a resume), the workspace is kept as the agent left it."""
    remote, workspace, home = tmp_path / "remote", tmp_path / "ws", tmp_path / "ws" / "runs" / "h"
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@example.invalid", "-C", str(remote)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(remote)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first"], check=True)
    fetch = run_manifests(spec, target)[2]["spec"]["template"]["spec"]["initContainers"][0]
    script = fetch["command"][:3]
    line = [*script, str(workspace), target.ref, str(remote), str(home)]
    subprocess.run(line, check=True, capture_output=True)
    assert (workspace / ".git").is_dir() and home.is_dir()
    (workspace / "agent-wrote-this").write_text("kept")
    subprocess.run(line, check=True, capture_output=True)
    assert (workspace / "agent-wrote-this").read_text() == "kept"
    assert fetch["command"][3:] == [str(spec.workspace), target.ref, target.repo, str(spec.home)]


def test_the_broker_alone_may_read_the_run_tokens(manifests: list[Manifest]) -> None:
    """The broker learns each run's token from its Secret, and whether a Job holding it
    runs: its own service account, a Role that reads Secrets and Jobs in its namespace and
    nothing else, and the one Pod with an API token."""
    by_kind = {(m["kind"], m["metadata"]["name"]) for m in manifests}
    assert {("ServiceAccount", "flowerbox-broker"), ("Role", "flowerbox-broker")} <= by_kind
    (role,) = [m for m in manifests if m["kind"] == "Role"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
    ]
    (binding,) = [m for m in manifests if m["kind"] == "RoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "flowerbox-broker",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "flowerbox-broker", "namespace": "flowerbox"}
    ]
    pods = {
        m["metadata"]["name"]: m["spec"]["template"]["spec"]
        for m in manifests
        if m["kind"] in ("Deployment", "Job")
    }
    tokened = {name for name, pod in pods.items() if pod["automountServiceAccountToken"]}
    assert tokened == {"flowerbox-broker"}
    assert pods["flowerbox-broker"]["serviceAccountName"] == "flowerbox-broker"
    command = [*pods["flowerbox-broker"]["containers"][0]["command"]]
    command += pods["flowerbox-broker"]["containers"][0]["args"]
    assert command[command.index("--namespace") + 1] == "flowerbox"


def test_the_brokers_metrics_are_announced_and_reachable_from_other_namespaces_alone(
    manifests: list[Manifest],
) -> None:
    """Prometheus finds the broker by the usual annotations on its Pod, on the port its
    `--metrics` serves; the runs' own namespace (its agents) cannot reach that port."""
    (deployment,) = [m for m in manifests if m["kind"] == "Deployment"]
    template = deployment["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9180",
        "prometheus.io/path": "/metrics",
    }
    (broker,) = template["spec"]["containers"]
    args = broker["args"]
    assert args[args.index("--metrics") + 1] == "0.0.0.0:9180"
    assert {"name": "metrics", "containerPort": 9180, "protocol": "TCP"} in broker["ports"]
    policy = next(
        m
        for m in manifests
        if m["kind"] == "NetworkPolicy" and m["metadata"]["name"] == "flowerbox-broker"
    )
    by_port = {r["ports"][0]["port"]: r["from"] for r in policy["spec"]["ingress"]}
    agents = [{"podSelector": {"matchLabels": {"flowerbox.dev/role": "agent"}}}]
    assert by_port[8080] == agents and 9180 not in {
        p["port"] for p in policy["spec"]["ingress"][0]["ports"]
    }
    (others,) = by_port[9180]
    assert others == {
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["flowerbox"],
                }
            ]
        }
    }
