"""A box on this terminal: the agent's container started through the docker CLI (`docker run
-it`), because the docker SDK has no usable interactive attach. Only `flowerbox shell` on a
terminal comes here; everything else drives the engine through flowerbox.box.engine.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from types import FrameType
from typing import Any

from flower import text
from flowerbox.errors import BoxError

__all__ = ["docker_cli_attach", "docker_run_args"]


def docker_run_args(kwargs: dict[str, Any]) -> list[str]:
    """`docker run` flags for the containers.run() kwargs agent_kwargs() returns, so the docker
    CLI starts the same container with a terminal (the SDK has no usable interactive attach).

    Every key agent_kwargs() uses must be translated: an unknown one is a TypeError, never a
    silently dropped restriction. Bind mounts use --mount with CSV quoting, so paths with
    spaces, commas or colons stay whole.
    """
    flags: list[str] = []
    for key, value in kwargs.items():
        match key:
            case "image" | "command" | "detach":
                continue
            case "user" | "name" | "pids_limit" | "runtime":
                flags += [f"--{key.replace('_', '-')}", str(value)]
            case "ulimits":
                flags += [
                    arg
                    for limit in value
                    for arg in ("--ulimit", f"{limit['name']}={limit['soft']}:{limit['hard']}")
                ]
            case "working_dir":
                flags += ["--workdir", value]
            case "network_mode":
                flags += ["--network", value]
            case "mem_limit":
                flags += ["--memory", value]
            case "memswap_limit":
                flags += ["--memory-swap", value]
            case "nano_cpus":
                flags += ["--cpus", f"{value / 1e9:g}"]
            case "read_only" | "init":
                flags += [f"--{key.replace('_', '-')}"] if value else []
            case "cap_drop":
                flags += [arg for cap in value for arg in ("--cap-drop", cap)]
            case "security_opt":
                flags += [arg for opt in value for arg in ("--security-opt", opt)]
            case "tmpfs":
                flags += [
                    arg for path, opts in value.items() for arg in ("--tmpfs", f"{path}:{opts}")
                ]
            case "log_config":
                flags += ["--log-driver", value["type"]]
                flags += [
                    arg for k, v in value["config"].items() for arg in ("--log-opt", f"{k}={v}")
                ]
            case "labels":
                flags += [arg for k, v in value.items() for arg in ("--label", f"{k}={v}")]
            case "environment":
                flags += [arg for k, v in value.items() for arg in ("--env", f"{k}={v}")]
            case "volumes":
                for host, bind in value.items():
                    mount = ["type=bind", f"source={host}", f"target={bind['bind']}"]
                    if bind["mode"] == "ro":
                        mount.append("readonly")
                    flags += ["--mount", ",".join(_csv_field(field) for field in mount)]
            case _:
                raise TypeError(f"docker_run_args cannot translate {key}={value!r}")
    return [*flags, kwargs["image"], *kwargs["command"]]


def _csv_field(field: str) -> str:
    if any(char in field for char in ',"\n'):
        return '"' + field.replace('"', '""') + '"'
    return field


def docker_cli_attach(kwargs: dict[str, Any]) -> int:
    """Run the agent's container with this terminal attached, through the docker CLI."""
    docker = shutil.which("docker")
    if docker is None:
        raise BoxError(text("terminal.no_docker_cli"))

    def hang_up(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)  # subprocess.run kills the client; Box removes the rest

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, hang_up)
    argv = [docker, "run", "--rm", "--interactive", "--tty", *docker_run_args(kwargs)]
    return subprocess.run(argv, check=False).returncode
