"""`flowerbox run` and `flowerbox shell` on a real engine, as the unprivileged e2e user.

Fixtures from conftest.py, helpers from e2e.py: the fake API on the host's loopback requiring
the "real" key, a git workspace owned by the user, flowerbox where that user can run it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from docker import DockerClient  # noqa: TID251 - these tests inspect the engine's containers

from flower.testing import Always, FakeAPI, text
from tests.docker.e2e import FLOWERBOX, as_user, box_env

pytestmark = pytest.mark.docker

WORKFLOW = """
from flower.core.agent import AgentSpec
from flower.workflow import Step, Workflow

workflow = Workflow([Step("greet", AgentSpec("greeter", "Greet."), "say hi")])
"""


def leftovers(client: DockerClient, workspace: Path) -> list[str]:
    found = client.containers.list(
        all=True, filters={"label": f"dev.flower.box.workspace={workspace}"}
    )
    return [container.name for container in found]


def test_run_runs_a_workflow_file_from_the_workspace_in_the_box(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    real_api.script = Always(text("hi there"))
    flow = user_workspace / "flow.py"
    as_user(
        host_user,
        ["sh", "-c", f"cat > {shlex.quote(str(flow))} <<'PY'\n{WORKFLOW}PY"],
        cwd=user_workspace,
    )
    done = as_user(
        host_user,
        [FLOWERBOX, "run", "flow.py", "--timeout", "0"],
        cwd=user_workspace,
        env=box_env(real_api, host_user),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "退出码 0" in done.stdout  # the end line, in the tests' language (zh)
    assert real_api.main_requests() and real_api.saw_key(real_api.api_key or "")
    assert (user_workspace / "runs" / "manifest.json").stat().st_uid == host_user[1]
    assert not leftovers(docker_client, user_workspace)


def test_shell_without_a_terminal_runs_the_command_as_the_user(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    done = as_user(
        host_user,
        [FLOWERBOX, "shell", "--", "sh", "-c", "id -u; pwd; ls /sys/class/net"],
        cwd=user_workspace,
        env=box_env(real_api, host_user),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [str(host_user[1]), *str(user_workspace).split(), "lo"]
    assert not leftovers(docker_client, user_workspace)


def test_shell_on_a_terminal_attaches_it_through_the_docker_cli(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    inner = shlex.join(
        [FLOWERBOX, "shell", "--", "sh", "-c", "id -u; tty; cat /proc/self/status; exit 7"]
    )
    env = {**box_env(real_api, host_user), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    # script(1) gives flowerbox a pseudo-terminal, as a user's shell would.
    done = as_user(host_user, ["script", "-qec", inner, "/dev/null"], cwd=user_workspace, env=env)
    assert done.returncode == 7, done.stdout[-3000:] + done.stderr[-3000:]
    assert str(host_user[1]) in done.stdout and "/dev/pts/" in done.stdout
    assert "CapEff:\t0000000000000000" in done.stdout and "NoNewPrivs:\t1" in done.stdout
    assert not leftovers(docker_client, user_workspace)
