"""docker/prepare.sh (`make demo`, CI) removes only what its own build made (issue 36): it
pruned by the project's label, so one user's `make demo` deleted another user's previous
flowerbox:dev. Three real builds of one tag on one engine: another user's, then two of ours."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest
from docker import DockerClient  # noqa: TID251 - the test looks at the engine's images
from docker.errors import ImageNotFound  # noqa: TID251

from tests.docker.conftest import BASE_IMAGE, REPO
from tests.docker.e2e import user_argv

pytestmark = pytest.mark.docker


def prepare(user: tuple[str, int, int], tag: str) -> str:
    """docker/prepare.sh as `user`, building `tag`; the id of the image it made."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "FLOWERBOX_IMAGE": tag}
    env["FLOWERBOX_BASE_IMAGE"] = BASE_IMAGE
    done = subprocess.run(
        user_argv(user, ["bash", str(REPO / "docker" / "prepare.sh")], env),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return image_id(tag)


def image_id(ref: str) -> str:
    return subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", ref],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def exists(client: DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
    except ImageNotFound:
        return False
    return True


@pytest.fixture
def made(docker_client: DockerClient) -> Iterator[list[str]]:
    """The tag this test builds, then the ids of the images it made: all removed at the end
    (only they: the test never touches another image)."""
    refs = [f"flowerbox:prune-test-{uuid.uuid4().hex[:8]}"]
    yield refs
    for ref in refs:
        if exists(docker_client, ref):
            docker_client.images.remove(ref)


def test_a_build_removes_its_own_leftovers_and_never_another_users_image(
    docker_client: DockerClient,
    base_image: str,
    host_user: tuple[str, int, int],
    made: list[str],
) -> None:
    if host_user[1] == 0 or subprocess.run(["id", "-u"], capture_output=True).stdout != b"0\n":
        pytest.skip("needs two users: run as root, with the e2e user (docker/e2e-user.sh)")
    me, tag = ("root", 0, 0), made[0]
    theirs = prepare(host_user, tag)  # another user's flowerbox image...
    made.append(theirs)
    first = prepare(me, tag)  # ...whose tag our build takes: theirs is now untagged
    made.append(first)
    assert first != theirs
    assert exists(docker_client, theirs), "another user's image was removed"
    labels = docker_client.images.get(first).labels
    assert labels["dev.flower.build.user"] == "0"
    ours = {"dangling": True, "label": f"dev.flower.build.id={labels['dev.flower.build.id']}"}
    assert not docker_client.images.list(filters=ours), "our builder stage was left behind"
    second = prepare(me, tag)  # and our own previous image, untagged by it, goes
    made.append(second)
    assert second != first
    assert not exists(docker_client, first), "our own displaced image was left behind"
    assert exists(docker_client, theirs), "another user's image was removed"
