"""Where flower refuses to work: system folders, your home folder itself, a folder whose
name is not UTF-8. Exit 2 at once, one sentence, nothing created, nothing spent."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from flower.testing import FakeAPI
from tests.cli.conftest import FLOWER, flower
from tests.conftest import unprivileged

# What flower says in English (issue 36: what a person reads follows --lang; zh is the suite's
# default, and tests/cli/test_lang_cli.py reads the zh refusals).
pytestmark = pytest.mark.english


def said(stderr: str) -> str:
    return " ".join(stderr.replace("│", " ").split())


@pytest.mark.parametrize("command", [["x"], ["once", "x"], ["resume"], ["run", "flow.py"]])
def test_the_home_folder_itself_is_refused(
    fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path, command: list[str]
) -> None:
    home = tmp_path / "user"
    home.mkdir()
    env = {**cli_env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    done = flower(*command, env=env, cwd=home)
    assert done.returncode == 2
    assert f"refusing to work in {home}, your home folder" in said(done.stderr)
    assert "-w <project folder>" in said(done.stderr)
    assert list(home.iterdir()) == [] and fake_api.requests == []
    below = home / "project"  # a project below the home is the common case
    below.mkdir()
    assert "refusing" not in flower("", env=env, cwd=below).stderr


@pytest.mark.parametrize("folder", ["/", "/usr", "/etc/ssl", "/tmp"])
def test_system_folders_are_refused(
    fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path, folder: str
) -> None:
    done = flower("x", "-w", folder, env=cli_env, cwd=tmp_path)
    assert done.returncode == 2
    assert f"refusing to work in {folder}, a system folder" in said(done.stderr)
    assert fake_api.requests == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["x", "--timeout", "0"], ["once", "x"]])
def test_a_name_that_is_not_utf8_stops_at_once_with_exit_2(
    fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path, command: list[str]
) -> None:
    """It was retried with backoff (412 s) and ended in a watchfiles traceback, exit 1."""
    bad = tmp_path / os.fsdecode(b"caf\xe9")
    bad.mkdir()
    done = flower(*command, env=cli_env, cwd=bad, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "caf\\xe9, a folder whose name is not valid UTF-8" in said(done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 2
    assert list(bad.iterdir()) == [] and fake_api.requests == []


WORKFLOW_WITH_A_WORKBENCH = """
from pathlib import Path
from flower import Step, Workbench, Workflow, worker

def build():
    Workbench(Path.cwd())  # a workflow may make folders as it is built
    return Workflow([Step("hi", worker(), "say hi")])
"""


@pytest.mark.parametrize("command", [["x", "--timeout", "0"], ["once", "x"], ["run", "../flow.py"]])
def test_no_credentials_is_said_before_anything_is_created(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, command: list[str]
) -> None:
    """The docs promise it; `flower run` made the workflow's workbench first."""
    (workspace.parent / "flow.py").write_text(WORKFLOW_WITH_A_WORKBENCH)
    env = {k: v for k, v in cli_env.items() if k != "ANTHROPIC_API_KEY"}
    done = flower(*command, env=env, cwd=workspace)
    assert done.returncode == 2
    assert "No credentials" in done.stderr
    assert list(workspace.iterdir()) == [] and sorted(workspace.parent.iterdir()) == sorted(
        [workspace, workspace.parent / "flow.py"]
    )


def flower_without_privilege(
    *args: str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """`flower ARGS...` for which file permissions hold, even when the tests run as root."""
    return subprocess.run(
        unprivileged([*FLOWER, *args]),
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_a_workspace_flower_cannot_write_is_exit_2_in_one_sentence(
    fake_api: FakeAPI, cli_env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    """A permanent local fault: the go path printed a 62-line traceback (exit 1), and the
    workbench's message suggested `home=`, an argument of the Python API the CLI has not."""
    workspace.chmod(0o555)
    try:
        for command in (["x", "--timeout", "0"], ["once", "x"]):
            done = flower_without_privilege(*command, env=cli_env, cwd=workspace)
            assert done.returncode == 2, done.stderr
            said = " ".join(done.stderr.split())
            assert f"cannot write the run directory {workspace}/runs (Permission denied)" in said
            assert "Traceback" not in said and "(--run-dir)" in said
        elsewhere = str(tmp_path / "runs-elsewhere")
        done = flower_without_privilege(
            "x", "--timeout", "0", "--run-dir", elsewhere, env=cli_env, cwd=workspace
        )
        assert done.returncode == 2
        said = " ".join(done.stderr.split())
        assert f"cannot create workbench folder {workspace}/.flower (Permission denied)" in said
        assert "home=" not in said and "Traceback" not in said
    finally:
        workspace.chmod(0o755)
    assert fake_api.requests == []
