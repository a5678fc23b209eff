"""The git relay in-process on 127.0.0.1, in front of a real git remote (`git http-backend`
requiring the broker's Basic credential: tests/flowerbox/gitremote.py), driven by the
system's real `git clone` and `git push` configured as a run's git is on Kubernetes
(flowerbox.kube.render: `url.<relay>.insteadOf https://` and the run's token as a Bearer
header; tests/flowerbox/gitclient.py). Every byte the relay sends a client passes a recording
tap, so a test can say the credential was in none of them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowerbox.broker.gitrelay import GitCredential, RelayRun, git_credential
from flowerbox.errors import BrokerError
from flowerbox.kube.render import deliver_manifests, run_manifests
from flowerbox.kube.target import KubeTarget, kube_spec
from flowerbox.wire import GIT_PORT
from tests.flowerbox.gitclient import BRANCH, OTHER_RUN, OTHER_TOKEN, RUN, RUN_TOKEN, Relay, commit
from tests.flowerbox.gitremote import BASIC, TOKEN, USER, git, quiet_env


def test_a_clone_goes_through_with_the_brokers_credential_only(relay: Relay) -> None:
    work = relay.clone()
    assert (work / "README").read_text() == "app\n"
    assert relay.remote.heads and all(h["authorization"] == BASIC for h in relay.remote.heads)
    assert not any(RUN_TOKEN in json.dumps(h) for h in relay.remote.heads)
    decisions = relay.log()
    assert [d["decision"] for d in decisions] == ["allow"] * len(decisions)
    assert {d["run"] for d in decisions} == {RUN}
    assert {d["service"] for d in decisions} == {"git-upload-pack"}


def test_a_push_to_the_runs_branch_lands_upstream(relay: Relay) -> None:
    work = relay.clone()
    sha = commit(relay, work)
    done = relay.git("push", "origin", f"HEAD:{BRANCH}", cwd=work)
    assert done.returncode == 0, done.stderr
    assert f"{sha} commit\t{BRANCH}" in relay.remote.branches("app")
    (push,) = [d for d in relay.log() if d.get("refs")]
    assert push["decision"] == "allow" and push["run"] == RUN
    assert push["refs"] == [{"ref": BRANCH, "old": "0" * 40, "new": sha}]
    assert push["repo"] == f"{relay.remote.host}/app.git"


@pytest.mark.parametrize(
    ("refspecs", "reason"),
    [
        (["HEAD:refs/heads/main"], "refs/heads/main 不是这个运行的引用"),
        ([f"HEAD:refs/heads/flowerbox/{OTHER_RUN}"], "不是这个运行的引用"),
        ([f"HEAD:refs/heads/flowerbox/{RUN}"], "不是这个运行的引用"),
        ([f"HEAD:refs/flowerbox/{OTHER_RUN}"], "不是这个运行的引用"),
        (["HEAD:refs/tags/v1"], "refs/tags/v1 不是这个运行的引用"),
        ([f"HEAD:{BRANCH}", "HEAD:refs/heads/main"], "一次推送了 2 个引用"),
    ],
    ids=["main", "another-runs-branch", "its-own-branch", "another-runs-ref", "a-tag", "two-refs"],
)
def test_a_push_to_any_other_ref_is_refused_and_nothing_changes(
    relay: Relay, refspecs: list[str], reason: str
) -> None:
    work = relay.clone()
    commit(relay, work)
    before = relay.remote.branches("app")
    done = relay.git("push", "--atomic", "origin", *refspecs, cwd=work)
    assert done.returncode != 0
    assert "[remote rejected]" in done.stderr and reason in done.stderr  # git shows why
    assert relay.remote.branches("app") == before
    assert relay.pushes_upstream() == 0  # refused before a byte went upstream
    refused = relay.log()[-1]
    assert refused["decision"] == "refuse" and refused["status"] == 403
    assert reason in refused["reason"] and refused["run"] == RUN


def test_a_run_lands_outside_the_branches_so_no_forge_ci_runs_it(relay: Relay) -> None:
    """Attack X1: a run's push went into the repository's branches, where the forge's CI
    runs the pushed code with the repository's secrets before anyone reviewed it. Its one
    ref is refs/flowerbox/<run-id> now: no branch or tag of the remote changed, and a
    reviewer fetches it by its refspec."""
    work = relay.clone()
    sha = commit(relay, work)
    heads = git("for-each-ref", "refs/heads", "refs/tags", cwd=relay.remote.root / "app.git",
                env=relay.remote.env)  # fmt: skip
    assert relay.git("push", "origin", f"HEAD:{BRANCH}", cwd=work).returncode == 0
    assert BRANCH.startswith("refs/flowerbox/")
    after = git("for-each-ref", "refs/heads", "refs/tags", cwd=relay.remote.root / "app.git",
                env=relay.remote.env)  # fmt: skip
    assert after == heads
    review = relay.clone()
    fetched = relay.git("fetch", "-q", "origin", "refs/flowerbox/*:refs/remotes/flowerbox/*",
                        cwd=review)  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr
    assert git("rev-parse", f"flowerbox/{RUN}", cwd=review, env=relay.env()).strip() == sha


def test_a_run_made_to_deliver_a_branch_pushes_that_branch_alone(relay: Relay) -> None:
    """--deliver-branch: the run's one ref is the branch flowerbox/<run-id> instead."""
    relay.runs[RUN_TOKEN] = RelayRun(RUN, relay.remote.url("app"), deliver_branch=True)
    work = relay.clone()
    sha = commit(relay, work)
    refused = relay.git("push", "origin", f"HEAD:{BRANCH}", cwd=work)
    assert refused.returncode != 0 and "不是这个运行的引用" in refused.stderr
    done = relay.git("push", "origin", f"HEAD:refs/heads/flowerbox/{RUN}", cwd=work)
    assert done.returncode == 0, done.stderr
    assert f"{sha} commit\trefs/heads/flowerbox/{RUN}" in relay.remote.branches("app")


def test_deleting_the_runs_branch_is_refused(relay: Relay) -> None:
    work = relay.clone()
    commit(relay, work)
    assert relay.git("push", "origin", f"HEAD:{BRANCH}", cwd=work).returncode == 0
    before = relay.remote.branches("app")
    done = relay.git("push", "origin", f":{BRANCH}", cwd=work)
    assert done.returncode != 0
    assert relay.remote.branches("app") == before and BRANCH in before
    assert relay.log()[-1]["reason"] == f"拒绝删除 {BRANCH}"


def test_push_options_are_refused(relay: Relay) -> None:
    """A forge acts on some (GitLab's merge_request.merge_when_pipeline_succeeds)."""
    work = relay.clone()
    commit(relay, work)
    before = relay.remote.branches("app")
    done = relay.git("push", "-o", "merge_request.create", "origin", f"HEAD:{BRANCH}", cwd=work)
    assert done.returncode != 0 and relay.remote.branches("app") == before
    assert relay.log()[-1]["reason"] == "推送选项被拒绝（代码托管平台可能据此行事）"


@pytest.mark.parametrize("token", [None, "not-a-live-run-token", "bad token\x7f"])
def test_a_wrong_or_absent_token_is_refused(relay: Relay, token: str | None) -> None:
    done = relay.git("ls-remote", relay.remote.url("app"), token=token)
    assert done.returncode != 0
    assert relay.remote.heads == []  # the remote was never asked
    refused = relay.log()[-1]
    assert refused["decision"] == "refuse" and refused["status"] == 401 and "run" not in refused


def test_a_revoked_runs_token_is_refused(relay: Relay) -> None:
    work = relay.clone()
    commit(relay, work)
    del relay.runs[RUN_TOKEN]  # the run ended: the broker knows its token no more
    before = relay.remote.branches("app")
    done = relay.git("push", "origin", f"HEAD:{BRANCH}", cwd=work)
    assert done.returncode != 0 and relay.remote.branches("app") == before
    assert relay.log()[-1]["status"] == 401


def test_another_repository_is_refused(relay: Relay) -> None:
    done = relay.git("ls-remote", relay.remote.url("other"))
    assert done.returncode != 0 and relay.remote.heads == []
    assert "只能访问它自己的仓库" in relay.log()[-1]["reason"]


def test_another_host_is_refused_and_never_contacted(relay: Relay) -> None:
    done = relay.git("ls-remote", "https://example.invalid/app.git")
    assert done.returncode != 0 and relay.remote.heads == []
    assert relay.log()[-1]["status"] == 403


def test_a_run_of_a_host_without_the_credential_is_refused(relay: Relay) -> None:
    """The credential goes to its own host only, whatever a run was created with."""
    relay.runs[RUN_TOKEN] = RelayRun(RUN, "https://forge.invalid/app.git")
    done = relay.git("ls-remote", "https://forge.invalid/app.git")
    assert done.returncode != 0 and relay.remote.heads == []
    assert relay.log()[-1]["reason"] == "broker 没有 forge.invalid 的 git 凭据"


def test_the_credential_is_in_no_byte_the_client_received_nor_in_the_log(relay: Relay) -> None:
    work = relay.clone()
    commit(relay, work)
    relay.git("push", "origin", f"HEAD:{BRANCH}", cwd=work)
    relay.git("push", "origin", "HEAD:refs/heads/main", cwd=work)
    relay.git("ls-remote", relay.remote.url("other"))
    relay.git("ls-remote", relay.remote.url("app"), token="wrong")
    received = bytes(relay.tap.received)
    assert b"flowerbox git relay:" in received and b"# service=git-receive-pack" in received
    secrets = [TOKEN, BASIC.removeprefix("Basic "), RUN_TOKEN]
    for secret in secrets:
        assert secret.encode() not in received
        assert secret not in relay.log_path.read_text()


def test_a_credential_the_remote_refuses_is_not_shown(relay: Relay) -> None:
    """The remote's 401 (its challenge, its body) becomes the relay's own 502 line."""
    wrong = GitCredential(relay.remote.host, "ghp_wrong_token_value_42", USER)
    relay.relay.credential = wrong  # the GitRelay keeps its origin; only the token is wrong
    done = relay.git("ls-remote", relay.remote.url("app"))
    assert done.returncode != 0
    assert b"ghp_wrong_token_value_42" not in bytes(relay.tap.received)
    assert b'realm="forge"' not in bytes(relay.tap.received)
    assert "git 远端拒绝了 broker 用于" in relay.log()[-1]["reason"]


def post(relay: Relay, body: bytes, *, headers: str = "") -> bytes:
    """A raw push request to the relay (with the run's token); everything it answered."""
    head = (
        f"POST /{relay.remote.host}/app.git/git-receive-pack HTTP/1.1\r\n"
        f"Host: relay\r\nAuthorization: Bearer {RUN_TOKEN}\r\n"
        "Content-Type: application/x-git-receive-pack-request\r\n"
    )
    head += headers or f"Content-Length: {len(body)}\r\n"
    with socket.create_connection(relay.relay.server_address, timeout=30) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while data := sock.recv(65536):
            answer += data
    return answer


def test_an_oversized_pkt_line_is_refused(relay: Relay) -> None:
    answer = post(relay, b"ffff" + b"0" * 200)
    assert answer.startswith(b"HTTP/1.1 400 ") and b"65520" in answer
    assert relay.pushes_upstream() == 0


def test_a_body_over_the_limit_is_refused_before_it_is_read(relay: Relay) -> None:
    relay.relay.body_limit = 1000
    answer = post(relay, b"0" * 2000)
    assert answer.startswith(b"HTTP/1.1 413 ") and relay.pushes_upstream() == 0


def test_a_large_refused_push_is_read_to_its_end_and_git_shows_why(relay: Relay) -> None:
    """A pack over 1 MiB comes chunked, after git's probe; the refusal waits for its end."""
    work = relay.clone()
    commit(relay, work, text=os.urandom(2_000_000).hex())
    before = relay.remote.branches("app")
    done = relay.git("push", "origin", "HEAD:refs/heads/main", cwd=work)
    assert "[remote rejected] HEAD -> main (refs/heads/main 不是这个运行的引用" in done.stderr
    assert relay.remote.branches("app") == before and relay.pushes_upstream() == 1  # the probe


def test_a_chunked_push_over_the_limit_is_cut_and_lands_nothing(relay: Relay) -> None:
    """git sends a large pack chunked: the relay cuts it where it passes the limit."""
    relay.relay.body_limit = 200_000
    work = relay.clone()
    commit(relay, work, text=os.urandom(2_000_000).hex())  # ~2 MB packed: sent chunked
    before = relay.remote.branches("app")
    done = relay.git("push", "origin", f"HEAD:{BRANCH}", cwd=work)
    assert done.returncode != 0 and relay.remote.branches("app") == before
    assert relay.log()[-1]["status"] == 413


def ask(relay: Relay, head: str) -> bytes:
    """One raw request head to the relay; everything it answered."""
    with socket.create_connection(relay.relay.server_address, timeout=30) as sock:
        sock.sendall(head.encode())
        answer = b""
        while data := sock.recv(65536):
            answer += data
    return answer


@pytest.mark.parametrize(
    ("request_line", "headers", "status"),
    [
        ("PUT /{host}/app.git/git-receive-pack", f"Authorization: Bearer {RUN_TOKEN}", 405),
        ("HEAD /{host}/app.git/info/refs?service=git-upload-pack", "", 401),
        ("GET /{host}/app.git/info/refs", f"Authorization: Bearer {RUN_TOKEN}", 404),
        ("GET /{host}/app.git/objects/info/packs", f"Authorization: Bearer {RUN_TOKEN}", 404),
        (
            "GET /{host}/app.git/info/refs?service=git-upload-pack",
            f"Authorization: Bearer {RUN_TOKEN}\r\nAuthorization: Bearer {OTHER_TOKEN}",
            401,
        ),
        (
            "GET /{host}/app.git/info/refs?service=git-upload-pack",
            f"Authorization: Basic {RUN_TOKEN}",
            401,
        ),
        (
            "GET /{host}/app.git/info/refs?service=git-upload-pack",
            "\r\n".join([f"Authorization: Bearer {RUN_TOKEN}", *["X-A: b"] * 64]),
            431,
        ),
    ],
    ids=["put", "head", "dumb-refs", "dumb-objects", "two-tokens", "basic", "many-headers"],
)
def test_what_is_not_smart_http_with_one_token_is_refused_there(
    relay: Relay, request_line: str, headers: str, status: int
) -> None:
    line = request_line.format(host=relay.remote.host)
    answer = ask(relay, f"{line} HTTP/1.1\r\nHost: relay\r\n{headers}\r\n\r\n")
    assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:200]
    assert relay.remote.heads == [] and relay.log()[-1]["status"] == status


def test_a_malformed_head_is_refused_and_logged(relay: Relay) -> None:
    answer = ask(relay, "GET /x HTTP/1.1\r\nHost: relay\r\n folded\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 ") and b"obs-fold" in answer
    assert relay.log()[-1] == relay.log()[-1] | {"decision": "refuse", "status": 400}


def job_line(container: dict[str, Any], relay: Relay, paths: dict[str, str]) -> Any:
    """Run a rendered container's shell line here, as its Pod would: its env resolved the
    way the kubelet does (`$(NAME)`, the token Secret, the broker Service's variable), the
    broker's Service replaced by the tap to the relay, the claim's paths by `paths`."""
    service = KubeTarget(repo=relay.remote.url("app")).broker_host.strip("$()")
    env = quiet_env(relay.home) | {service: "broker.invalid"}
    for entry in container["env"]:
        value = RUN_TOKEN if "valueFrom" in entry else entry["value"]
        for name, known in env.items():
            value = value.replace(f"$({name})", known)
        env[entry["name"]] = value.replace(f"http://broker.invalid:{GIT_PORT}/", relay.url)
    env.pop(service)
    env["HOME"] = str(relay.home)
    command = [paths.get(arg, arg) for arg in container["command"]]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


@dataclass
class Claim:
    """A run's claim here: its workspace fetched by the rendered init container, flower's
    branch committed on; the rendered deliver Job's container."""

    workspace: Path
    sha: str
    deliver: dict[str, Any]
    paths: dict[str, str]


def fetched(relay: Relay, tmp_path: Path) -> Claim:
    spec = kube_spec(RUN, image="flowerbox:dev", command=("flower", "go", "x"))
    target = KubeTarget(repo=relay.remote.url("app"), ref="main")
    workspace = tmp_path / "claim" / "workspace"
    paths = {str(spec.workspace): str(workspace), str(spec.home): str(tmp_path / "claim" / "h")}
    job = run_manifests(spec, target)[2]
    (fetch,) = job["spec"]["template"]["spec"]["initContainers"][-1:]
    done = job_line(fetch, relay, paths)
    assert done.returncode == 0, done.stderr
    git("checkout", "-q", "-b", f"flower/{RUN}", cwd=workspace, env=relay.env())
    sha = commit(relay, workspace)
    (deliver,) = deliver_manifests(spec, target)[0]["spec"]["template"]["spec"]["containers"]
    return Claim(workspace, sha, deliver, paths)


def test_the_jobs_rendered_fetch_and_deliver_go_through_the_relay(
    relay: Relay, tmp_path: Path
) -> None:
    """The init container's clone and the deliver Job's push, their own lines and git
    settings from flowerbox.kube.render: the run's ref lands, and only it."""
    claim = fetched(relay, tmp_path)
    before = relay.remote.branches("app")
    done = job_line(claim.deliver, relay, claim.paths)
    assert done.returncode == 0, done.stderr
    after = relay.remote.branches("app")
    assert after.replace(f"{claim.sha} commit\t{BRANCH}\n", "") == before
    assert relay.log()[-1]["refs"] == [{"ref": BRANCH, "old": "0" * 40, "new": claim.sha}]


def plant(claim: Claim, tmp_path: Path, settings: dict[str, str]) -> Path:
    """The agent's configuration in the claim's repository: `settings`, each a program
    (MARK: a script that leaves a file named after its caller in the returned folder)."""
    marks = tmp_path / "ran"
    marks.mkdir()
    script = tmp_path / "evil.sh"
    script.write_text(f'#!/bin/sh\ntouch "{marks}/$(basename "$0")-$$"\nexit 0\n')
    script.chmod(0o755)
    for hooks in (claim.workspace / ".git" / "hooks", claim.workspace / ".githooks"):
        hooks.mkdir(exist_ok=True)
        for name in ("pre-push", "reference-transaction", "post-update"):
            (hooks / name).write_text(script.read_text())
            (hooks / name).chmod(0o755)
    config = claim.workspace / ".git" / "config"
    for key, value in settings.items():
        git("config", "--file", str(config), "--add", key, value.replace("MARK", str(script)))
    return marks


def test_the_deliver_job_runs_none_of_the_agents_git_configuration(
    relay: Relay, tmp_path: Path
) -> None:
    """Attack K2: the deliver Job pushed to `origin`, so the agent's `remote.origin.url`
    and `receivepack` ran a program of its choosing; its hooks, signing program, askpass and
    submodule pushes were its to name too. Planted, none runs, and the run's ref lands."""
    claim = fetched(relay, tmp_path)
    bare = tmp_path / "local.git"
    git("init", "-q", "--bare", str(bare), env=relay.env())
    marks = plant(
        claim,
        tmp_path,
        {
            "remote.origin.url": str(bare),
            "remote.origin.receivepack": "MARK; git-receive-pack",
            "remote.origin.pushurl": str(bare),
            "core.hooksPath": ".githooks",
            "push.gpgSign": "true",
            "gpg.program": "MARK",
            "core.askPass": "MARK",
            "push.recurseSubmodules": "on-demand",
        },
    )
    done = job_line(claim.deliver, relay, claim.paths)
    assert done.returncode == 0, done.stderr
    assert list(marks.iterdir()) == []
    assert relay.log()[-1]["refs"] == [{"ref": BRANCH, "old": "0" * 40, "new": claim.sha}]
    assert git("for-each-ref", cwd=bare, env=relay.env()) == ""


@pytest.mark.parametrize(
    "settings",
    [
        {"url.LOCAL.pushInsteadOf": "https://"},
        {"url.LOCAL.insteadOf": "https://127.0.0.1"},
        {"url.ext::MARK %S.pushInsteadOf": "https://"},
    ],
    ids=["push-instead-of-a-path", "instead-of-a-path", "ext-transport"],
)
def test_a_url_the_agents_config_rewrites_runs_nothing(
    relay: Relay, tmp_path: Path, settings: dict[str, str]
) -> None:
    """A rewrite of the repository's URL to a path or `ext::` (whose receive-pack, or
    command, git would run): only http, the relay's, is a transport in the Job."""
    claim = fetched(relay, tmp_path)
    bare = tmp_path / "local.git"
    git("init", "-q", "--bare", str(bare), env=relay.env())
    planted = {k.replace("LOCAL", str(bare)): v for k, v in settings.items()}
    marks = plant(claim, tmp_path, planted | {"remote.origin.receivepack": "MARK"})
    done = job_line(claim.deliver, relay, claim.paths)
    assert list(marks.iterdir()) == []
    assert git("for-each-ref", cwd=bare, env=relay.env()) == ""
    assert done.returncode != 0 and "not allowed" in done.stderr, done.stderr  # no transport


def test_the_credential_comes_from_the_brokers_credentials_file() -> None:
    values = {"ANTHROPIC_API_KEY": "sk-x", "GIT_HOST": "GitHub.com", "GIT_TOKEN": TOKEN}
    credential = git_credential(values, "credentials.env")
    assert credential == GitCredential("github.com", TOKEN, "x-access-token")
    assert credential.base == "https://github.com" and TOKEN not in repr(credential)
    assert git_credential(values | {"GIT_USERNAME": USER}, "f") == GitCredential(
        "github.com", TOKEN, USER
    )
    assert git_credential({"ANTHROPIC_API_KEY": "sk-x"}, "f") is None  # no relay
    for host in ("", "github.com/acme", "bot@github.com"):
        with pytest.raises(BrokerError, match="GIT_HOST=github.com"):
            git_credential({"GIT_TOKEN": TOKEN, "GIT_HOST": host}, "credentials.env")
    mirror = values | {"GIT_BASE_URL": "http://git.internal:3000"}
    assert git_credential(mirror, "f").base == "http://git.internal:3000"  # type: ignore[union-attr]
    for base in ("ftp://git.internal", "https://bot:pw@git.internal", "git.internal"):
        with pytest.raises(BrokerError, match="GIT_BASE_URL 必须是不含凭据的 http"):
            git_credential(values | {"GIT_BASE_URL": base}, "credentials.env")


def test_every_line_the_relay_writes_is_scrubbed_of_the_credential() -> None:
    credential = GitCredential("github.com", TOKEN, USER)
    text = f"x {TOKEN} y {credential.authorization()}"
    assert credential.scrub(text) == "x [credential] y Basic [credential]"
