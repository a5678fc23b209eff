"""Bad input on a real engine: no image and nothing to build it from, a workspace path in
non-ASCII with a space, a gateway that dies. Clear messages, exit 2, nothing left running.
(What needs no engine — no engine at all, `/` or $HOME, no credentials — is in
tests/flowerbox/test_cli.py.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from docker import DockerClient  # noqa: TID251 - these tests inspect the engine's containers

import flowerbox.box.engine
from flower.testing import Always, FakeAPI, text
from flowerbox.box.engine import Box, ensure_image, labelled
from flowerbox.box.options import BoxOptions
from flowerbox.box.prepare import prepare
from flowerbox.box.spec import gateway_kwargs
from flowerbox.errors import BoxError
from tests.docker.e2e import FLOWERBOX, REAL, as_user, box_env

pytestmark = pytest.mark.docker

ABSENT = "flowerbox:absent"


@pytest.mark.english
def test_no_image_and_no_dockerfile_says_how_to_get_one(docker_client: DockerClient) -> None:
    with pytest.raises(
        BoxError, match="no Dockerfile to build it from: run `flowerbox build PATH`"
    ):
        ensure_image(docker_client, ABSENT, context=None)


def test_an_installed_flowerbox_without_the_image_exits_2(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path
) -> None:
    # The e2e user's flowerbox is installed from a wheel: no checkout, no Dockerfile beside it.
    if os.geteuid() != 0:
        pytest.skip(
            "the flowerbox here is this checkout's, whose Dockerfile builds a missing image: "
            "the installed case needs docker/e2e-user.sh's install, made as root (CI does)"
        )
    done = as_user(
        host_user,
        [FLOWERBOX, "once", "hi", "--image", ABSENT],
        cwd=user_workspace,
        env=box_env(real_api, host_user),
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"这里没有镜像 {ABSENT}" in done.stderr and "--image" in done.stderr
    assert not real_api.requests


def test_a_non_ascii_workspace_with_a_space_works_end_to_end(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    ws = user_workspace.parent / "工作区 ü"
    ws.mkdir()
    os.chown(ws, *host_user[1:])
    real_api.script = Always(text("hi from the box"))
    done = as_user(
        host_user,
        [FLOWERBOX, "once", "say hi"],
        cwd=ws,
        env={**box_env(real_api, host_user), "LANG": "C.UTF-8"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "hi from the box" in done.stdout
    assert real_api.saw_key(REAL)
    assert (ws / "runs" / "sessions.db").stat().st_uid == host_user[1]
    assert not docker_client.containers.list(
        all=True, filters={"label": f"dev.flower.box.workspace={ws}"}
    )


def test_a_gateway_that_dies_is_named_and_nothing_is_left_running(
    docker_client: DockerClient,
    flowerbox_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-never-used")
    ws = tmp_path / "ws"
    ws.mkdir()
    prepared = prepare(
        ["once", "hi"], BoxOptions(workspace=ws, image=flowerbox_image, isolate=False)
    )

    def dying(spec: Any) -> dict[str, Any]:
        return {**gateway_kwargs(spec), "command": ["false"]}

    monkeypatch.setattr(flowerbox.box.engine, "gateway_kwargs", dying)
    run_id = prepared.spec.run_id
    try:
        with pytest.raises(BoxError, match="网关在开始监听之前就退出了"):
            Box(prepared.spec, client=docker_client).run(write=print, write_err=print)
    finally:
        prepared.cleanup()
    assert not labelled(docker_client, f"dev.flower.box.run={run_id}")


@pytest.mark.parametrize("failing", ["agent", "gateway"])
def test_either_container_failing_to_start_leaves_nothing_behind(
    failing: str,
    docker_client: DockerClient,
    flowerbox_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The two containers start together (issue 31): whichever fails, the run is refused with
    a BoxError, the other container is removed too, and the credentials file is gone."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-never-used")
    ws = tmp_path / "ws"
    ws.mkdir()
    prepared = prepare(
        ["once", "hi"], BoxOptions(workspace=ws, image=flowerbox_image, isolate=False)
    )
    prepared.write_secrets()
    assert any(prepared.spec.secrets_dir.iterdir())

    def absent(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {**kwargs, "image": ABSENT}

    if failing == "gateway":
        monkeypatch.setattr(
            flowerbox.box.engine, "gateway_kwargs", lambda spec: absent(gateway_kwargs(spec))
        )
    box = Box(prepared.spec, client=docker_client, shape=absent if failing == "agent" else None)
    try:
        with pytest.raises(BoxError):
            box.run(write=print, write_err=print)
        assert not prepared.spec.secrets_dir.exists() or not any(
            prepared.spec.secrets_dir.iterdir()
        )
    finally:
        prepared.cleanup()
    assert not labelled(docker_client, f"dev.flower.box.run={prepared.spec.run_id}")
