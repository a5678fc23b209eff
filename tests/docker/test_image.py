"""The flowerbox image: what it holds, how it runs under the box's restrictions, what it leaks.

Every container here runs with `--network none`, a read-only root, no capabilities and
no-new-privileges, as a uid that has no passwd entry (conftest.HARDENED), as flowerbox runs it.
"""

from __future__ import annotations

import io
import json
import os
import re
import secrets
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from docker import DockerClient  # noqa: TID251 - these tests drive the engine itself
from docker.errors import ContainerError  # noqa: TID251

from flowerbox import __version__, wire
from flowerbox.box.engine import ensure_image
from flowerbox.errors import BoxError

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
# What every test container gets unless a test says otherwise: the box's own restrictions
# (security-checklist.md A.1), as an arbitrary non-root uid with no passwd entry.
HARDENED: dict[str, Any] = {
    "user": "4242:4242",
    "read_only": True,
    "tmpfs": {"/tmp": "rw,noexec,nosuid,nodev,size=64m"},
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges"],
    "network_mode": "none",
    "pids_limit": 256,
    "mem_limit": "1g",
}

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
SDK_PIN = "claude-agent-sdk==0.2.189"
# What the image may add over its base (docs/image.md): the bundled Claude Code CLI is ~400 MB.
MAX_ADDED_BYTES = 520 * 10**6

BUNDLED_CLAUDE = (
    "import claude_agent_sdk, pathlib; "
    'print(pathlib.Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude")'
)


def run(client: DockerClient, image: str, command: list[str], **options: Any) -> str:
    """Run `command` in a hardened container and return its stdout (stderr on failure)."""
    kwargs = {**HARDENED, **options}
    try:
        out = client.containers.run(image, command, remove=True, stderr=False, **kwargs)
    except ContainerError as exc:
        stderr = exc.stderr.decode(errors="replace") if exc.stderr else ""
        raise AssertionError(f"{command} exited {exc.exit_status}: {stderr}") from exc
    return bytes(out).decode()


def sh(client: DockerClient, image: str, script: str, **options: Any) -> str:
    return run(client, image, ["bash", "-c", script], **options)


# -- what is inside ------------------------------------------------------------------------


def test_flower_cli_runs(docker_client: DockerClient, flowerbox_image: str) -> None:
    assert run(docker_client, flowerbox_image, ["flower", "--version"]).strip() == (
        f"flower {VERSION}"
    )
    assert "Usage: flower" in run(docker_client, flowerbox_image, ["flower", "--help"])


def test_flowerbox_package_imports(docker_client: DockerClient, flowerbox_image: str) -> None:
    out = run(
        docker_client,
        flowerbox_image,
        ["python", "-c", "import flower, flowerbox, claude_agent_sdk, docker; print('ok')"],
    )
    assert out.strip() == "ok"


def test_the_plugin_ships_inside_the_package(
    docker_client: DockerClient, flowerbox_image: str
) -> None:
    """The box has no checkout: every session's plugin is the packaged copy."""
    code = "from flower.core.agent import PLUGIN_DIR as p; print(p, p.is_dir())"
    out = run(docker_client, flowerbox_image, ["python", "-c", code]).split()
    assert out[0].endswith("/site-packages/flower/plugin") and out[1] == "True"


@pytest.mark.parametrize("module", ["flowerbox.inside.relay", "flowerbox.sidecar.gateway"])
def test_sidecar_modules_run(
    docker_client: DockerClient, flowerbox_image: str, module: str
) -> None:
    """The gateway and the relay run from this same image (DESIGN.md, The appliance)."""
    if not (REPO / (module.replace(".", "/") + ".py")).is_file():
        pytest.skip(f"{module} is not in this checkout yet")
    out = run(docker_client, flowerbox_image, ["python", "-m", module, "--help"])
    assert "usage" in out.lower()


def test_bundled_claude_code_cli_runs(docker_client: DockerClient, flowerbox_image: str) -> None:
    claude = run(docker_client, flowerbox_image, ["python", "-c", BUNDLED_CLAUDE]).strip()
    expected = run(docker_client, flowerbox_image, ["cat", claude + ".version"]).strip()
    out = run(docker_client, flowerbox_image, [claude, "--version"])
    assert out.strip() == expected
    assert "(Claude Code)" in out


def test_tools_the_agent_uses(docker_client: DockerClient, flowerbox_image: str) -> None:
    out = sh(docker_client, flowerbox_image, "git --version; rg --version; tini --version")
    assert "git version" in out
    assert "ripgrep" in out
    assert "tini version" in out


def test_pins_match_the_lock(docker_client: DockerClient, flowerbox_image: str) -> None:
    """The venv holds exactly the lock's runtime set: no build backend, no pip."""
    lock = {
        m.group(1).lower().replace("_", "-"): m.group(2)
        for m in re.finditer(
            r"^([A-Za-z0-9_.-]+)==(\S+)", (REPO / "requirements.lock").read_text(), re.M
        )
    }
    assert SDK_PIN.split("==")[1] == lock["claude-agent-sdk"]
    listing = run(
        docker_client,
        flowerbox_image,
        [
            "python",
            "-c",
            "import importlib.metadata as m, json;"
            "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))",
        ],
    )
    installed = {k.lower().replace("_", "-"): v for k, v in json.loads(listing).items()}
    assert installed.pop("flowerbox") == VERSION
    for name, version in installed.items():
        assert lock.get(name) == version, f"{name}=={version} is not the lock's pin"
    for build_only in ("hatchling", "pip", "setuptools", "wheel"):
        assert build_only not in installed


def test_lock_covers_the_runtime_dependencies() -> None:
    text = (REPO / "requirements.lock").read_text()
    assert re.search(rf"^{re.escape(SDK_PIN)} \\$", text, re.M)
    pinned = {m.group(1).lower() for m in re.finditer(r"^([A-Za-z0-9_.-]+)==\S+ \\$", text, re.M)}
    for requirement in PYPROJECT["project"]["dependencies"]:
        name = re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower()
        assert name in pinned, f"{name} (pyproject.toml) has no pin in requirements.lock"
    # Every pin carries hashes, or `pip download --require-hashes` refuses the whole file.
    blocks = [b for b in re.split(r"\n(?=[^\s#])", text) if re.match(r"[A-Za-z0-9_.-]+==", b)]
    assert len(blocks) == len(pinned)
    assert all("--hash=sha256:" in block for block in blocks)


# -- how it runs -------------------------------------------------------------------------


def test_image_config(docker_client: DockerClient, flowerbox_image: str) -> None:
    config = docker_client.images.get(flowerbox_image).attrs["Config"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["PATH"].startswith("/opt/flowerbox/bin:")
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["/usr/local/bin/flowerbox-init"]  # tini, as the kernel allows
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == "flowerbox"
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.licenses"] == PYPROJECT["project"]["license"]
    for key in ("description", "source"):
        assert labels[f"org.opencontainers.image.{key}"]


def test_default_user_is_not_root(docker_client: DockerClient, flowerbox_image: str) -> None:
    out = run(docker_client, flowerbox_image, ["id", "-u"], user=None)
    assert out.strip() == "10001"


def test_hardened_run_as_a_uid_without_passwd_entry(
    docker_client: DockerClient, flowerbox_image: str
) -> None:
    """What the process gets under the box's flags, and that flower works there all the same."""
    script = (
        "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; ls /sys/class/net;"
        "touch /opt/flowerbox/x 2>/dev/null && echo WROTE-ROOT;"
        'echo "HOME=$HOME"; test -d "$HOME" && echo home-ok;'
        "HOME=/tmp/h flower --version >/dev/null && echo flower-ok"
    )
    out = sh(docker_client, flowerbox_image, script)
    lines = out.split()
    assert lines[0] == "4242"
    assert "0000000000000000" in out
    assert re.search(r"NoNewPrivs:\s+1", out)
    assert "lo" in lines and "eth0" not in lines
    assert "WROTE-ROOT" not in out
    # The entrypoint gives a uid without a passwd entry a HOME on the tmpfs.
    assert "HOME=/tmp/home" in lines and "home-ok" in lines
    assert "flower-ok" in lines


def test_entrypoint_creates_a_missing_home(
    docker_client: DockerClient, flowerbox_image: str
) -> None:
    out = sh(
        docker_client,
        flowerbox_image,
        'echo "$HOME"; test -d "$HOME" && echo made',
        environment={"HOME": "/tmp/state/home"},
    )
    assert out.split() == ["/tmp/state/home", "made"]


@pytest.mark.parametrize("docker_init", [False, True], ids=["tini-only", "with-docker-init"])
def test_stop_is_prompt(
    docker_client: DockerClient, flowerbox_image: str, docker_init: bool, box_runtime: str
) -> None:
    """The init forwards SIGTERM: `docker stop` ends a run at once, with or without --init,
    on each runtime (gVisor's kernel has no child subreaper: docker/init.sh starts no
    `tini -s` there, and no init complains)."""
    container = docker_client.containers.run(
        flowerbox_image,
        ["python", "-c", "import time; print('up', flush=True); time.sleep(600)"],
        detach=True,
        init=docker_init,
        runtime=box_runtime,
        **HARDENED,
    )
    try:
        deadline = time.monotonic() + 30
        while b"up" not in container.logs() and time.monotonic() < deadline:
            time.sleep(0.1)
        start = time.monotonic()
        container.stop(timeout=20)
        assert time.monotonic() - start < 10
        container.reload()
        assert container.attrs["State"]["ExitCode"] in (0, 143, -15)
        assert b"Tini is not running as PID 1" not in container.logs()
        assert b"[FATAL]" not in container.logs()  # tini -s where the kernel refuses it
    finally:
        container.remove(force=True)


# -- what it must not carry -----------------------------------------------------------------

SECRET_PATTERNS = [
    r"sk-ant-[A-Za-z0-9_-]{8,}",
    r"(?i)(api[_-]?key|auth[_-]?token|secret|password)\s*[=:]\s*\S{6,}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    r"AKIA[0-9A-Z]{16}",
    r"gh[pousr]_[A-Za-z0-9]{20,}",
]


def host_secret_values() -> list[str]:
    """Values of credential-like variables in this environment: none may reach the image."""
    names = re.compile(r"(?i)(API_KEY|AUTH_TOKEN|TOKEN|SECRET|PASSWORD)")
    return [v for k, v in os.environ.items() if names.search(k) and len(v) >= 8]


def test_no_secret_in_history_or_config(docker_client: DockerClient, flowerbox_image: str) -> None:
    """security-checklist.md C3 and H16: nothing secret in the layers' commands or the config."""
    image = docker_client.images.get(flowerbox_image)
    texts = [str(layer.get("CreatedBy", "")) for layer in image.history()]
    texts.append(json.dumps(image.attrs["Config"]))
    blob = "\n".join(texts)
    for pattern in SECRET_PATTERNS:
        assert not re.search(pattern, blob), f"{pattern} matches the image's history or config"
    for value in host_secret_values():
        assert value not in blob


def test_no_checkout_leftovers(docker_client: DockerClient, flowerbox_image: str) -> None:
    """Only the venv came from the build: no sources, wheels, .env, .git, runs/ or caches."""
    out = sh(
        docker_client,
        flowerbox_image,
        "ls -d /src /wheels /opt/build 2>/dev/null;"
        "find / -xdev \\( -name .env -o -name .git -o -name runs -o -name .flower"
        " -o -name .venv \\) -print 2>/dev/null | grep -v '^/proc'"
        # flowerbox's own runs package is code, not a runs/ folder of a checkout
        " | grep -vx '/opt/flowerbox/lib/python3.[0-9]*/site-packages/flowerbox/runs' || true",
    )
    assert out.strip() == ""


def test_size_over_base(docker_client: DockerClient, flowerbox_image: str, base_image: str) -> None:
    """What flowerbox adds, not Debian's packages: on debian:bookworm-slim (a user's base) the
    Dockerfile's apt layer brings python3 and git (~260 MB); the debootstrap base has them."""
    image = docker_client.images.get(flowerbox_image)
    debian = sum(
        layer["Size"] for layer in image.history() if "dpkg -s python3" in layer["CreatedBy"]
    )
    added = image.attrs["Size"] - docker_client.images.get(base_image).attrs["Size"] - debian
    assert added <= MAX_ADDED_BYTES, f"the image adds {added / 1e6:.0f} MB over {base_image}"


@pytest.mark.english
def test_an_image_built_for_another_flowerbox_is_rebuilt_not_run(
    docker_client: DockerClient, flowerbox_image: str, base_image: str
) -> None:
    """An image from before a change of layout runs other entry modules than this host asks
    for: its version label gives it away, and it is rebuilt (or, with no Dockerfile at hand,
    refused with what to do) instead of started."""
    tag = f"flowerbox-stale-test:{secrets.token_hex(4)}"
    old = f"FROM {flowerbox_image}\nLABEL {wire.VERSION_LABEL}=0.1.0\n"
    docker_client.images.build(fileobj=io.BytesIO(old.encode()), tag=tag, rm=True)
    try:
        with pytest.raises(BoxError, match=r"built for flowerbox 0\.1\.0, not .*flowerbox build"):
            ensure_image(docker_client, tag, context=None)
        ensure_image(docker_client, tag, context=REPO, base_image=base_image)
        rebuilt = docker_client.images.get(tag)
        assert rebuilt.labels[wire.VERSION_LABEL] == __version__
        ensure_image(docker_client, tag, context=REPO, base_image=base_image)
        assert docker_client.images.get(tag).id == rebuilt.id  # current: used as it is
    finally:
        docker_client.images.remove(tag, force=True)
