"""compose.yaml carries the same hardening as the box flowerbox starts itself."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "compose.yaml"


def services() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return dict(data["services"])


@pytest.mark.parametrize("name", ["gateway", "flower", "broker"])
def test_every_service_is_hardened(name: str) -> None:
    service = services()[name]
    assert service["read_only"] is True and service["init"] is True
    assert service["cap_drop"] == ["ALL"] and service["security_opt"] == ["no-new-privileges"]
    assert service["pids_limit"] > 0 and service["mem_limit"] == service["memswap_limit"]
    assert "noexec" in service["tmpfs"][0]
    assert service["user"].startswith("${UID")
    assert "privileged" not in service and "cap_add" not in service
    assert not any("docker.sock" in volume for volume in service.get("volumes", []))


def test_only_the_gateway_sees_the_credentials_and_the_agent_has_no_network() -> None:
    gateway, flower = services()["gateway"], services()["flower"]
    assert gateway["secrets"] == ["flowerbox_credentials"] and "secrets" not in flower
    assert services()["broker"]["secrets"] == ["flowerbox_credentials"]
    assert flower["network_mode"] == "none"
    assert flower["environment"]["ANTHROPIC_API_KEY"] == "sk-flowerbox-placeholder"
    assert any(v.endswith(".git/hooks:ro") for v in flower["volumes"])


def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.skip("docker-compose is not installed (.ci/run installs it for this check)")
    home, ws = tmp_path / "home", tmp_path / "ws"
    (home / ".config" / "flower").mkdir(parents=True)
    (home / ".config" / "flower" / ".env").write_text("ANTHROPIC_API_KEY=x\n")
    ws.mkdir()
    env = {"PATH": "/usr/bin:/bin", "PWD": str(ws), "UID": "1000", "GID": "1000"}
    env["HOME"] = str(home)
    done = subprocess.run(
        [compose, "-f", str(COMPOSE), "--project-directory", str(ws), "config"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ws,
    )
    assert done.returncode == 0, done.stderr
    # The credentials default to what `flower setup` writes, outside the mounted workspace.
    secret = yaml.safe_load(done.stdout)["secrets"]["flowerbox_credentials"]["file"]
    assert secret == str(home / ".config" / "flower" / ".env")


def test_the_broker_is_opt_in_engine_free_and_where_flowerbox_looks_for_it() -> None:
    """A profile (`run flower` never starts it), no engine (a broker in a container must not
    control it), its credentials a file, and its two host folders at the same paths inside:
    flowerbox on the host finds its control socket, and it binds in the runs' socket folders."""
    broker = services()["broker"]
    assert broker["profiles"] == ["broker"]
    assert broker["command"] == ["flowerbox", "broker", "--no-engine"]
    assert broker["environment"]["FLOWER_ENV"] == "/run/secrets/flowerbox_credentials"
    assert not {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"} & set(broker["environment"])
    assert "network_mode" not in broker  # it reaches the API; compose.override for loopback
    state = broker["environment"]["XDG_STATE_HOME"] + "/flowerbox"
    assert f"{state}:{state}" in broker["volumes"]
    assert "/tmp/flowerbox-${UID:-1000}:/tmp/flowerbox-${UID:-1000}" in broker["volumes"]


def test_the_agent_alone_takes_flowerbox_runtime() -> None:
    """FLOWERBOX_RUNTIME=runsc puts compose's agent under gVisor; the gateway stays on runc."""
    assert services()["flower"]["runtime"] == "${FLOWERBOX_RUNTIME:-runc}"
    assert "runtime" not in services()["gateway"] and "runtime" not in services()["broker"]
