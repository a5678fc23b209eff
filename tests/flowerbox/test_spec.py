"""BoxSpec -> docker kwargs, and the host-side preparation: plain data, no engine needed."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowerbox.box.options import BoxOptions
from flowerbox.box.prepare import Prepared, prepare, workspace_of
from flowerbox.box.spec import BoxSpec, agent_kwargs, gateway_kwargs
from flowerbox.cli.app import app
from flowerbox.cli.options import kube_target
from flowerbox.errors import ConfigError, CredentialsError
from flowerbox.runs.boundary import before_run
from flowerbox.runs.records import spec_to_json
from flowerbox.wire import OBJECTS_IN_BOX, PLACEHOLDER_KEY, TOKEN_FILE, TOKEN_IN_BOX
from tests.flowerbox.conftest import routed

# What flower says in English (issue 36: what a person reads follows --lang; zh is the suite's
# default, and tests/cli/test_lang_cli.py reads the zh refusals).
pytestmark = pytest.mark.english

SECRET = "sk-ant-real-secret-0123456789"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "my project"  # a space in the path, on purpose
    ws.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    return ws.resolve()


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "FLOWER_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.chdir(tmp_path)


def test_both_containers_are_hardened_the_same_way(repo: Path, credentials: None) -> None:
    prepared = prepare(["go", "do it"], BoxOptions(workspace=repo))
    try:
        for kwargs in (agent_kwargs(prepared.spec), gateway_kwargs(prepared.spec)):
            assert kwargs["user"] == f"{prepared.spec.uid}:{prepared.spec.gid}"
            assert kwargs["read_only"] is True and kwargs["init"] is True
            assert kwargs["cap_drop"] == ["ALL"]
            assert kwargs["security_opt"] == ["no-new-privileges"]
            assert kwargs["pids_limit"] > 0 and kwargs["nano_cpus"] > 0
            assert kwargs["mem_limit"] == kwargs["memswap_limit"]
            assert "noexec" in kwargs["tmpfs"]["/tmp"]
            assert "privileged" not in kwargs and "cap_add" not in kwargs
            assert not any("docker.sock" in host for host in kwargs["volumes"])
    finally:
        prepared.cleanup()


def test_the_agent_has_no_network_and_paths_stay_where_they_are(
    repo: Path, credentials: None
) -> None:
    (repo / ".git" / "hooks").mkdir(exist_ok=True)
    prepared = prepare(["go", "do it", "--timeout", "0"], BoxOptions(workspace=repo))
    try:
        spec = before_run(prepared.spec, image_id="sha256:" + "0" * 64)
        agent = agent_kwargs(spec)
        assert agent["network_mode"] == "none"
        assert agent["working_dir"] == str(repo)
        volumes = agent["volumes"]
        assert volumes[str(repo)] == {"bind": str(repo), "mode": "rw"}
        assert volumes[str(spec.run_dir)]["bind"] == str(spec.run_dir)
        # The box's .git is a shadow of the user's, never the user's own git directory.
        assert spec.shadow_git is not None and spec.git_objects == repo / ".git" / "objects"
        assert volumes[str(spec.shadow_git)] == {"bind": str(repo / ".git"), "mode": "rw"}
        assert volumes[str(spec.git_objects)] == {"bind": OBJECTS_IN_BOX, "mode": "ro"}
        users_git = [h for h in volumes if h.startswith(f"{repo}/.git")]
        assert users_git == [str(spec.git_objects)]
        for name in ("hooks", "config"):
            mount = volumes[str(spec.shadow_git / name)]
            assert mount == {"bind": str(repo / ".git" / name), "mode": "ro"}
        assert spec.workbench == repo.parent / f".flower-{repo.name}"  # outside the repo
        command = agent["command"]
        relay = "127.0.0.1:8080=/run/flowerbox/api.sock"
        assert command[: command.index("--")] == [
            "python",
            "-m",
            "flowerbox.inside.entry",
            "--relay",
            relay,
            "--relay",
            "127.0.0.1:3128=/run/flowerbox/proxy.sock",  # the egress proxy
        ]
        flower = ["flower", "go", "do it", "--timeout", "0", "-w", str(repo)]
        flower += ["--run-dir", str(spec.run_dir), "--isolate"]
        flower += ["--events", str(repo / "runs" / "events" / f"{spec.run_id}.jsonl")]
        assert command[command.index("--") + 1 :] == flower
        assert agent["environment"]["ANTHROPIC_API_KEY"] == PLACEHOLDER_KEY
        assert agent["environment"]["FLOWER_HEALTH_URL"].endswith("/health")
        # flower inside has no terminal: it is told how its questions are answered (and so
        # waits for them), by the command that works on the host for this very run
        answer = f'flowerbox answer {{id}} "..." -r {spec.run_id}'
        assert agent["environment"]["FLOWER_ANSWER_COMMAND"] == answer
    finally:
        prepared.cleanup()


def test_the_secret_is_only_in_the_gateways_0600_file(repo: Path, credentials: None) -> None:
    prepared = prepare(["go", "do it"], BoxOptions(workspace=repo))
    try:
        spec = prepared.spec
        assert not spec.secrets_dir.exists()  # written last, once every check has passed
        prepared.write_secrets()
        for kwargs in (agent_kwargs(spec), gateway_kwargs(spec)):
            assert SECRET not in json.dumps(kwargs, default=str)
        creds = spec.secrets_dir / "credentials.env"
        assert creds.read_text() == f"ANTHROPIC_API_KEY={SECRET}\n"
        assert stat.S_IMODE(creds.stat().st_mode) == 0o600
        assert stat.S_IMODE(spec.secrets_dir.stat().st_mode) == 0o700
        gateway_mounts = gateway_kwargs(spec)["volumes"]
        assert gateway_mounts[str(spec.secrets_dir)]["mode"] == "ro"
        assert str(spec.secrets_dir) not in agent_kwargs(spec)["volumes"]
    finally:
        prepared.cleanup()
    assert not spec.secrets_dir.exists() and not spec.socket_dir.exists()


TOKEN = "run-token-0123456789abcdefghijklmnop"


def test_a_brokers_run_token_is_in_a_0600_file_the_box_reads_never_in_its_docker_config(
    repo: Path, credentials: None
) -> None:
    """`docker inspect` shows a container's environment and argv to anyone with the engine:
    the broker's token (it spends while the run lives) reaches the agent as a read-only file
    its entry reads, and the container's own environment keeps the worthless placeholder."""
    prepared = prepare(["go", "do it"], BoxOptions(workspace=repo))
    try:
        spec = replace(prepared.spec, broker=True, run_token=TOKEN)
        prepared = Prepared(spec)
        prepared.write_secrets()
        agent = agent_kwargs(spec)
        assert TOKEN not in json.dumps(agent, default=str)
        assert agent["environment"]["ANTHROPIC_API_KEY"] == PLACEHOLDER_KEY
        token_file = spec.secrets_dir / TOKEN_FILE
        assert token_file.read_text() == TOKEN
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert agent["volumes"][str(token_file)] == {"bind": TOKEN_IN_BOX, "mode": "ro"}
        assert agent["command"][agent["command"].index("--key-file") + 1] == TOKEN_IN_BOX
        assert not (spec.secrets_dir / "credentials.env").exists()  # the broker holds the key
        assert TOKEN not in json.dumps(spec_to_json(spec))  # nor in flowerbox's record
    finally:
        prepared.cleanup()
    assert not spec.secrets_dir.exists()


def test_a_loopback_upstream_puts_the_gateway_on_the_host_network(
    repo: Path, credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9999")
    prepared = prepare(["go", "x"], BoxOptions(workspace=repo, budget_usd=2.5))
    try:
        gateway = gateway_kwargs(prepared.spec)
        assert gateway["network_mode"] == "host"
        # It parses what the agent writes: never every core of the host (issue 16, L6).
        assert 0 < gateway["nano_cpus"] < (os.cpu_count() or 1) * 1e9
        assert gateway["nano_cpus"] <= agent_kwargs(prepared.spec)["nano_cpus"]
        assert gateway["read_only"] and gateway["cap_drop"] == ["ALL"]
        budget = gateway["command"].index("--budget")
        assert gateway["command"][budget : budget + 2] == ["--budget", "2.5"]
    finally:
        prepared.cleanup()


def test_allow_api_fetch_reaches_the_gateway_and_the_runs_record(
    repo: Path, credentials: None
) -> None:
    """Off by default; on, the gateway gets --allow-api-fetch, and the recorded spec keeps
    it, so `resume` rebuilds the same gateway (flowerbox.sidecar.reach)."""
    plain = prepare(["go", "x"], BoxOptions(workspace=repo))
    fetching = prepare(["go", "x"], BoxOptions(workspace=repo, allow_api_fetch=True))
    try:
        assert "--allow-api-fetch" not in gateway_kwargs(plain.spec)["command"]
        assert "--allow-api-fetch" in gateway_kwargs(fetching.spec)["command"]
        assert spec_to_json(fetching.spec)["allow_api_fetch"] is True
    finally:
        plain.cleanup()
        fetching.cleanup()


@pytest.mark.parametrize(
    ("command", "flower_stops"), [("go", True), ("once", True), ("run", False)]
)
def test_a_budget_also_stops_flower_where_flower_has_one(
    repo: Path, credentials: None, command: str, flower_stops: bool
) -> None:
    prepared = prepare([command, "x"], BoxOptions(workspace=repo, isolate=False, budget_usd=2.5))
    try:
        inside = list(prepared.spec.command)
        assert ("--budget" in inside) is flower_stops
        if flower_stops:
            assert inside[inside.index("--budget") + 1] == "2.5"
    finally:
        prepared.cleanup()


@pytest.mark.parametrize("where", ["/", "HOME"])
def test_root_and_home_are_refused(where: str) -> None:
    path = Path.home() if where == "HOME" else Path("/")
    with pytest.raises(ConfigError, match="refusing to mount"):
        workspace_of(path)


def test_a_non_git_workspace_gets_both_ways_out(tmp_path: Path, credentials: None) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ConfigError, match="git init.*--no-isolate"):
        prepare(["go", "x"], BoxOptions(workspace=plain))
    prepared = prepare(["go", "x"], BoxOptions(workspace=plain, isolate=False))
    try:
        assert "--no-isolate" in prepared.spec.command
        assert "--isolate" not in prepared.spec.command
    finally:
        prepared.cleanup()


def test_no_credentials_is_flowers_four_line_message(
    repo: Path, credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(CredentialsError) as caught:
        prepare(["go", "x"], BoxOptions(workspace=repo))
    assert len(str(caught.value).splitlines()) == 4


def test_a_root_user_gets_is_sandbox_and_nothing_else_changes(repo: Path) -> None:
    spec = BoxSpec(
        image="i",
        workspace=repo,
        run_dir=repo / "runs",
        home=repo / "runs" / "home",
        socket_dir=Path("/tmp/s"),
        secrets_dir=Path("/tmp/c"),
        state_dir=Path("/tmp/state"),
        uid=0,
        gid=0,
        command=("flower",),
        run_id="r",
    )
    agent = agent_kwargs(spec)
    assert agent["environment"]["IS_SANDBOX"] == "1" and agent["cap_drop"] == ["ALL"]


def test_the_ask_is_routed_to_go_even_when_empty() -> None:
    assert routed(["", "--timeout", "0"]) == ["go", "", "--timeout", "0"]
    assert routed(["fix the bug"]) == ["go", "fix the bug"]
    assert routed(["once", "x"]) == ["once", "x"] and routed(["--version"]) == ["--version"]
    assert routed(["go", "x"]) == ["go", "x"] and routed([]) == ["--help"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_box_speaks_the_language_the_host_resolved(
    repo: Path, credentials: None, monkeypatch: pytest.MonkeyPatch, lang: str
) -> None:
    """flowerbox's --lang (or the user's FLOWER_LANG) reaches flower inside the box."""
    monkeypatch.setenv("FLOWER_LANG", lang)
    prepared = prepare(["go", "x"], BoxOptions(workspace=repo))
    try:
        assert agent_kwargs(prepared.spec)["environment"]["FLOWER_LANG"] == lang
    finally:
        prepared.cleanup()


def test_the_root_lang_option_is_resolved_before_the_box_and_a_bad_one_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`flowerbox ... --lang xx` is refused by the option (exit 2) before anything starts;
    `--lang en` anywhere on the line becomes the host's FLOWER_LANG."""
    monkeypatch.chdir(tmp_path)
    bad = CliRunner().invoke(app, ["ps", "--lang", "xx"])
    assert bad.exit_code == 2 and "pass --lang en or --lang zh" in bad.output
    monkeypatch.setenv("FLOWER_LANG", "zh")
    good = CliRunner().invoke(app, ["ps", "--lang", "en"])
    assert good.exit_code == 0, good.output
    assert os.environ["FLOWER_LANG"] == "en"


def test_runsc_puts_the_agent_alone_under_gvisor_and_is_recorded(
    repo: Path, credentials: None
) -> None:
    prepared = prepare(["go", "do it"], BoxOptions(workspace=repo, runtime="runsc"))
    try:
        agent, gateway = agent_kwargs(prepared.spec), gateway_kwargs(prepared.spec)
        assert agent["runtime"] == "runsc" and agent["network_mode"] == "none"
        # gVisor's kernel enforces RLIMIT_NPROC for the box alone: the pids limit's stand-in
        limit = prepared.spec.limits.pids
        assert agent["ulimits"] == [{"name": "nproc", "soft": limit, "hard": limit}]
        assert agent["pids_limit"] == 2 * limit  # the sandbox's host threads, with headroom
        assert "runtime" not in gateway and "ulimits" not in gateway  # the key's side: runc
        assert spec_to_json(prepared.spec)["runtime"] == "runsc"  # a resumed run keeps it
    finally:
        prepared.cleanup()
    prepared = prepare(["go", "do it"], BoxOptions(workspace=repo))
    try:
        runc = agent_kwargs(prepared.spec)
        assert runc["runtime"] == "runc" and "ulimits" not in runc  # it would count your uid
    finally:
        prepared.cleanup()


@pytest.mark.parametrize(
    ("runtime", "net", "said"),
    [
        ("kata", "allowlist", "--runtime 'kata': use one of runc, runsc"),
        ("runsc", "open", "--net open gives the box a network of its own"),
    ],
)
def test_a_runtime_flowerbox_cannot_use_is_refused_before_anything_is_made(
    repo: Path, credentials: None, runtime: str, net: str, said: str
) -> None:
    with pytest.raises(ConfigError, match=said):
        prepare(["go", "do it"], BoxOptions(workspace=repo, runtime=runtime, net=net))
    assert not (repo / "runs").exists()


def test_runtime_on_a_cluster_is_the_gvisor_runtime_class() -> None:
    assert kube_target({"runtime": "runsc"}).runtime_class == "gvisor"
    assert kube_target({"runtime": "runc"}).runtime_class is None
    named = {"runtime": "runsc", "runtime_class": "gvisor-fast"}
    assert kube_target(named).runtime_class == "gvisor-fast"  # --runtime-class names its own
    with pytest.raises(ConfigError, match="use runc or runsc"):
        kube_target({"runtime": "kata"})
