"""Fixtures for tests that need a real Docker engine and the flowerbox image.

Without an engine every test here skips with the reason and the fix; CI starts one
(.ci/run runs docker/engine.sh and docker/base-image.sh, then builds the image). No test
container gets a network of its own: `--network none`, or the host's loopback at most.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import pwd
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker import DockerClient  # noqa: TID251 - these tests drive the engine itself
from docker.errors import BuildError, DockerException, ImageNotFound  # noqa: TID251

from flower.testing import FakeAPI
from flowerbox import __version__, wire
from tests.docker.e2e import FLOWERBOX, PREPARE, REAL, USER, as_user

REPO = Path(__file__).resolve().parents[2]
# The image under test and the base it is built on (docs/image.md). FLOWERBOX_TEST_IMAGE names
# an image built elsewhere; then it is used as it is, never rebuilt.
IMAGE = os.environ.get("FLOWERBOX_TEST_IMAGE", "flowerbox:dev")
BASE_IMAGE = os.environ.get("FLOWERBOX_BASE_IMAGE", "flowerbox-base:bookworm")

NO_ENGINE = "no Docker engine answers{why}: run `bash docker/engine.sh` (CI does)"
# The engine runs but this user may not use its socket.
NOT_IN_GROUP = (
    "the Docker engine refuses you ({why}): `sudo usermod -aG docker $USER`, then log in again"
)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[DockerClient]:
    """A client of a live engine, or a skip that says how to get one."""
    why = None
    try:
        client = DockerClient.from_env(timeout=120)
        client.ping()
    except DockerException as exc:
        why = str(exc)
    if why is not None:
        # docker-py leaves the failed connection's socket to the garbage collector; collect it
        # here, quietly, rather than as a ResourceWarning in whichever test runs next.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
        if "Permission denied" in why:
            pytest.skip(NOT_IN_GROUP.format(why=why))
        pytest.skip(NO_ENGINE.format(why=f" ({why})"))
    try:
        yield client
    finally:
        client.close()


RUNTIMES = ("runc", "runsc")  # flowerbox.box.spec.RUNTIMES: the agent's, as --runtime takes it
NO_GVISOR = "the engine has no runsc: `sudo bash docker/engine.sh --gvisor` registers it (CI does)"


@pytest.fixture(params=RUNTIMES)
def box_runtime(request: pytest.FixtureRequest, docker_client: DockerClient) -> str:
    """Each runtime the agent's box can have (`--runtime`): the test runs once per runtime;
    one the engine lacks is skipped with the command that registers it."""
    runtime: str = request.param
    if runtime not in (docker_client.info().get("Runtimes") or {}):
        pytest.skip(NO_GVISOR)
    return runtime


@pytest.fixture(scope="session")
def base_image(docker_client: DockerClient) -> str:
    """The tag of the local test base image (docker/base-image.sh)."""
    try:
        docker_client.images.get(BASE_IMAGE)
    except ImageNotFound:
        pytest.skip(f"no base image {BASE_IMAGE}: run `bash docker/base-image.sh` (CI does)")
    return BASE_IMAGE


@pytest.fixture(scope="session")
def flowerbox_image(docker_client: DockerClient, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tag of the flowerbox image built from this checkout.

    It is (re)built through the engine's layer cache, so it always matches the tree: seconds
    when nothing changed (CI built it just before), about a minute on a fresh engine. A build
    that fails is a test failure, not a skip: the Dockerfile is under test here. Once per run
    of the suite: xdist's workers take turns at a lock, and the first one's build serves all.
    """
    if "FLOWERBOX_TEST_IMAGE" in os.environ:
        try:
            docker_client.images.get(IMAGE)
        except ImageNotFound:
            pytest.skip(f"FLOWERBOX_TEST_IMAGE={IMAGE} names no image here")
        return IMAGE
    try:
        docker_client.images.get(BASE_IMAGE)
    except ImageNotFound:
        pytest.skip(f"no base image {BASE_IMAGE}: run `bash docker/base-image.sh` (CI does)")
    with once_per_run(tmp_path_factory, "flowerbox-image") as done:
        if not done:
            build_image(docker_client)
    return IMAGE


@contextlib.contextmanager
def once_per_run(factory: pytest.TempPathFactory, name: str) -> Iterator[bool]:
    """Whether `name` was done already in this run of the suite, held under a lock that every
    xdist worker of the run shares (their base temp's parent, one per run, as xdist's docs do
    it); done when the block ends without an error. Outside xdist, never done before."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield False
        return
    shared = factory.getbasetemp().parent
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        marker = shared / f"{name}.done"
        yield marker.exists()
        marker.touch()


def build_image(docker_client: DockerClient) -> None:
    try:
        docker_client.images.build(
            path=str(REPO),
            tag=IMAGE,
            buildargs={"BASE_IMAGE": BASE_IMAGE, wire.VERSION_BUILD_ARG: __version__},
            # Only the lock's `pip download` step goes out, to PyPI, and only on a cold cache.
            network_mode="host",
            rm=True,
            forcerm=True,
            timeout=900,
        )
    except BuildError as exc:
        tail = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in exc.build_log)
        pytest.fail(f"building {IMAGE} failed: {exc}\n{tail[-4000:]}")


# --- the appliance's end-to-end user (docker/e2e-user.sh) --------------------------------


@pytest.fixture(scope="session")
def host_user() -> tuple[str, int, int]:
    """The unprivileged user in the docker group these tests run flowerbox as (users and CI
    runners usually are not root), with an install of flowerbox it can execute: the e2e user
    under root, else whoever runs the tests (e2e.runner)."""
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        pytest.skip(f"no user {USER}: {PREPARE}")
    if not os.access(FLOWERBOX, os.X_OK):
        pytest.skip(f"no flowerbox at {FLOWERBOX}: {PREPARE}")
    return USER, entry.pw_uid, entry.pw_gid


@pytest.fixture
def user_workspace(host_user: tuple[str, int, int]) -> Iterator[Path]:
    """A git workspace owned by the test user, with a space in its path."""
    name, uid, gid = host_user
    root = Path(tempfile.mkdtemp(prefix="fbx-e2e-", dir="/tmp"))
    ws = root / "my project"
    ws.mkdir()
    for path in (root, ws):
        os.chown(path, uid, gid)
    as_user(host_user, ["git", "init", "-q"], cwd=ws)
    as_user(
        host_user,
        [
            "git",
            "-c",
            "user.name=e2e",
            "-c",
            "user.email=e2e@localhost",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "start",
        ],
        cwd=ws,
    )
    yield ws
    subprocess.run(["rm", "-rf", str(root)], check=False)


@pytest.fixture
def real_api(fake_api: FakeAPI) -> FakeAPI:
    """The fake API, requiring the real key: a request carrying anything else gets a 401."""
    fake_api.api_key = REAL
    return fake_api
