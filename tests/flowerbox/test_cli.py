"""The flowerbox CLI where no engine is needed: refusals, exit codes, and the docker CLI flags
`flowerbox shell` starts the agent's container with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowerbox import __version__
from flowerbox.box import state
from flowerbox.box.options import BoxOptions
from flowerbox.box.prepare import prepare
from flowerbox.box.spec import agent_kwargs
from flowerbox.box.terminal import docker_run_args
from flowerbox.cli.app import app
from tests.conftest import unprivileged
from tests.flowerbox.conftest import routed

# What flower says in English (issue 36: what a person reads follows --lang; zh is the suite's
# default, and tests/cli/test_lang_cli.py reads the zh refusals).
pytestmark = pytest.mark.english

SECRET = "sk-ant-real-secret-cli-0123456789"
runner = CliRunner()


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A scratch HOME and cwd, with no credentials anywhere flower looks."""
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "FLOWER_", "CLAUDE_")):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.chdir(tmp_path)
    return home


@pytest.fixture
def project(home: Path) -> Path:
    ws = home.parent / "a, project= ü"  # a comma and an equals sign: --mount keeps it whole
    ws.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    (ws / "Dockerfile").write_text("FROM scratch\n")  # protected: mounted read-only
    return ws.resolve()


def test_shell_gets_the_agents_container_flag_for_flag(
    project: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    options = BoxOptions(workspace=project, isolate=False, runtime="runsc")
    prepared = prepare(["shell"], options)
    try:
        kwargs = agent_kwargs(prepared.spec)
        args = docker_run_args(kwargs)
    finally:
        prepared.cleanup()
    pairs = list(zip(args, args[1:], strict=False))
    assert ("--network", "none") in pairs and ("--user", kwargs["user"]) in pairs
    assert ("--cap-drop", "ALL") in pairs and ("--security-opt", "no-new-privileges") in pairs
    assert {"--read-only", "--init"} <= set(args)
    assert ("--pids-limit", str(kwargs["pids_limit"])) in pairs
    assert ("--runtime", "runsc") in pairs  # gVisor, and the pids limit gVisor enforces:
    nproc = prepared.spec.limits.pids
    assert ("--ulimit", f"nproc={nproc}:{nproc}") in pairs
    assert ("--memory", kwargs["mem_limit"]) in pairs
    assert ("--memory-swap", kwargs["memswap_limit"]) in pairs
    assert ("--cpus", "2") in pairs and ("--tmpfs", f"/tmp:{kwargs['tmpfs']['/tmp']}") in pairs
    assert ("--workdir", str(project)) in pairs and ("--name", kwargs["name"]) in pairs
    for key, value in kwargs["environment"].items():
        assert ("--env", f"{key}={value}") in pairs
    for key, value in kwargs["labels"].items():
        assert ("--label", f"{key}={value}") in pairs
    mounts = [value for flag, value in pairs if flag == "--mount"]
    assert len(mounts) == len(kwargs["volumes"])
    quoted = f'"source={project}","target={project}"'
    assert f"type=bind,{quoted}" in mounts
    dockerfile = f'"source={project}/Dockerfile","target={project}/Dockerfile"'
    assert f"type=bind,{dockerfile},readonly" in mounts
    assert args[-len(kwargs["command"]) - 1 :] == [kwargs["image"], *kwargs["command"]]
    assert SECRET not in " ".join(args)


def test_a_kwarg_the_translation_does_not_know_is_an_error_not_a_dropped_flag() -> None:
    with pytest.raises(TypeError, match="privileged"):
        docker_run_args({"image": "x", "command": [], "privileged": False})


@pytest.mark.parametrize("command", [["once", "hi"], ["shell"], ["go", "hi"]])
def test_the_root_and_home_folders_are_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    for folder in ("/", str(home)):
        result = runner.invoke(app, [*command, "-w", folder])
        assert result.exit_code == 2, result.output
        assert "refusing to mount" in result.stderr and "-w <project folder>" in result.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["x", "--budget", "-1"], "-1 USD is no budget"),
        (["once", "x", "--budget", "0"], "0 USD is no budget"),
        (["x", "--disk-budget", "-1"], "'--disk-budget'"),
        (["resume", "--budget", "-2"], "-2 USD is no budget"),
    ],
)
def test_a_number_flowerbox_cannot_use_is_refused(home: Path, args: list[str], said: str) -> None:
    done = runner.invoke(app, args)
    assert done.exit_code == 2
    assert said in " ".join(done.output.replace("│", " ").split())


def test_a_workspace_whose_name_is_not_utf8_is_refused_before_any_box(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    bad = home.parent / os.fsdecode(b"caf\xe9")
    bad.mkdir()
    done = runner.invoke(app, ["once", "hi", "-w", str(bad)])
    assert done.exit_code == 2
    said = " ".join(done.stderr.split())
    assert "refusing to mount" in said and "caf\\xe9 into the box, a folder whose name" in said
    assert list(bad.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["x", "--timout", "0"], "flower go would refuse this: No such option: --timout"),
        (["go", "x", "--timeout", "-5"], "flower go would refuse this: Invalid value for"),
        (["once", "x", "--model", ""], "flower once would refuse this: Invalid value for"),
        (["x", "--run-dir", "elsewhere"], "--run-dir: set by the program that runs flower go"),
        (["run", "flow.py", "--frob"], "flower run would refuse this: No such option: --frob"),
    ],
)
def test_flowers_options_are_checked_on_the_host_before_any_container(
    project: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], said: str
) -> None:
    """A typo used to start the gateway and the agent's container before flower inside
    reported it. No engine here: reaching the engine would be a different error."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("DOCKER_HOST", "unix:///tmp/nonexistent.sock")
    (project / "flow.py").write_text("")
    monkeypatch.chdir(project)
    done = runner.invoke(app, [*args, "-w", str(project)])
    assert done.exit_code == 2, done.output
    assert said in " ".join(done.stderr.split())
    assert not (project / "runs").exists()


@pytest.mark.parametrize(
    ("command", "flowers"),
    [
        ("go", ["--timeout", "--rounds", "--json", "--model", "--verbose"]),
        ("once", ["--model", "--allow", "--verbose"]),
        ("run", ["-W", "--timeout"]),
    ],
)
def test_a_box_commands_help_lists_the_flower_options_it_passes_on(
    command: str, flowers: list[str]
) -> None:
    done = runner.invoke(app, [command, "--help"], terminal_width=200)
    assert done.exit_code == 0
    passed_on = done.output.split(f"Any other option goes to `flower {command}` in the box")[1]
    assert all(option in passed_on for option in flowers), passed_on
    assert "--run-dir" not in passed_on and "--events" not in passed_on


def test_no_credentials_is_flowers_four_line_message(project: Path) -> None:
    result = runner.invoke(app, ["once", "hi", "-w", str(project)])
    assert result.exit_code == 2
    assert "No credentials" in result.stderr and "flower setup" in result.stderr
    assert "FLOWER_ENV" in result.stderr


def test_run_refuses_a_file_outside_the_workspace(
    project: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    outside = home / "flow.py"
    outside.write_text("")
    result = runner.invoke(app, ["run", str(outside), "-w", str(project)])
    assert result.exit_code == 2
    assert "outside the workspace" in result.stderr and "only the workspace is mounted" in (
        result.stderr
    )
    missing = runner.invoke(app, ["run", "nowhere.py", "-w", str(project)])
    assert missing.exit_code == 2 and "is not a file" in missing.stderr


def test_the_new_commands_are_commands_not_asks() -> None:
    assert routed(["run", "flow.py"]) == ["run", "flow.py"]
    assert routed(["shell", "--", "id"]) == ["shell", "--", "id"]
    assert routed(["run tests"]) == ["go", "run tests"]


@pytest.mark.parametrize("args", [[], ["help"], ["-h"], ["--help"]])
def test_help_in_every_spelling_is_the_help_and_exit_0(args: list[str]) -> None:
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    assert "Usage:" in done.output and "Commands" in done.output


def test_a_look_alike_is_refused_before_any_box(home: Path) -> None:
    """Off a terminal (the test runner's stdin is not one), `flowerbox atach` names the
    command it looks like; it never reaches `go`, which would start containers."""
    done = runner.invoke(app, ["atach"])
    assert done.exit_code == 2
    said = " ".join(done.output.replace("│", " ").split())
    assert "`flowerbox attach` mistyped" in said and "`flowerbox go atach`" in said


def test_no_engine_exits_2_saying_how_to_start_one_and_leaves_nothing(project: Path) -> None:
    def ours() -> set[Path]:
        return set(state.socket_root().glob("fbx-*"))  # the runs' socket folders

    before = ours()
    env = {
        **os.environ,
        "DOCKER_HOST": "unix:///tmp/nonexistent.sock",
        "ANTHROPIC_API_KEY": SECRET,
    }
    done = subprocess.run(
        [sys.executable, "-m", "flowerbox", "once", "hi", "-w", str(project)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "cannot reach a Docker engine" in done.stderr and "dockerd" in done.stderr
    assert not ours() - before


@pytest.mark.parametrize(
    ("locked", "args", "said"),
    [
        (
            "parent",
            ["x"],
            "cannot create the workbench {parent}/.flower-{name} beside the repository "
            "(Permission denied): isolated workers share it there; make {parent} writable, "
            "or pass --no-isolate",
        ),
        (
            "workspace",
            ["once", "x"],
            "cannot create {ws}/runs (Permission denied): flowerbox keeps each run's "
            "sessions and records in the workspace; make {ws} writable",
        ),
    ],
)
def test_a_folder_flowerbox_cannot_write_is_exit_2_in_one_sentence(
    project: Path, home: Path, locked: str, args: list[str], said: str
) -> None:
    """It was a 58-line traceback and exit 1 (the workbench beside the repository), or a
    message from inside the box suggesting `home=`, which the CLI has not."""
    folder = project if locked == "workspace" else project.parent
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": SECRET,
        "DOCKER_HOST": "unix:///tmp/nonexistent.sock",  # never an engine: checks come first
    }
    folder.chmod(0o555)
    try:
        done = subprocess.run(
            unprivileged([sys.executable, "-m", "flowerbox", *args, "-w", str(project)]),
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        folder.chmod(0o755)
    assert done.returncode == 2, done.stderr
    wanted = said.format(parent=project.parent, name=project.name, ws=project)
    assert wanted in " ".join(done.stderr.split()) and "Traceback" not in done.stderr


def test_version_names_the_pieces_that_matter() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "flowerbox", "version"], capture_output=True, text=True, check=True
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"flowerbox {__version__}")
    assert lines[1] == "claude-agent-sdk 0.2.189" and lines[2].startswith("claude code 2.1.")


def test_a_flowerbox_error_is_exit_2_and_a_bug_keeps_its_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One place turns what the user can fix into a message and exit 2 (FlowerboxGroup); a
    bug's own exception is not dressed up as a refusal."""
    refused = runner.invoke(app, ["stop", "no-such-run", "-w", str(tmp_path)])
    assert refused.exit_code == 2
    assert "error: no run 'no-such-run' here" in refused.output
    assert refused.exception is None or isinstance(refused.exception, SystemExit)

    def broken(workspace: Path | None, run: str | None) -> None:
        raise KeyError("a bug in flowerbox")

    monkeypatch.setattr("flowerbox.cli.runs.find", broken)
    crashed = runner.invoke(app, ["stop", "-w", str(tmp_path)])
    assert isinstance(crashed.exception, KeyError)
    assert crashed.exit_code == 1 and "error:" not in crashed.output


def test_a_bad_env_file_met_through_flower_is_exit_2_with_its_path(
    monkeypatch: pytest.MonkeyPatch, project: Path, tmp_path: Path
) -> None:
    """flower's refusals reach the flowerbox CLI through flower's functions (here a .env
    flower cannot read): the same message and exit 2, no traceback."""
    env = tmp_path / "config" / "latin1.env"
    env.parent.mkdir()
    env.write_bytes(b"ANTHROPIC_API_KEY=caf\xe9\n")  # not UTF-8: flower will not guess
    monkeypatch.setenv("FLOWER_ENV", str(env))
    done = runner.invoke(app, ["once", "hi", "-w", str(project)])
    assert done.exit_code == 2, done.output
    assert "error:" in done.output and str(env) in done.output.replace("\n", "")


def test_help_says_a_question_is_not_waited_for_off_a_terminal() -> None:
    """Issue 36: as with flower, nobody at a terminal means no waiting (tests/docker/
    test_unattended.py runs it)."""
    done = runner.invoke(app, ["go", "--help"], terminal_width=200)
    assert done.exit_code == 0, done.output
    said = " ".join(done.output.replace("│", " ").split())
    assert "where stdin is not a terminal (a script, CI) the agents' questions are not" in said
