"""Talking to a running broker over its control socket: one JSON object each way.

if running(folder):
    token = register(folder, run_id, socket_dir=..., gateway_dir=..., budget_usd=..., allow=...)
    ...
    revoke(folder, run_id)
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from flower import text
from flowerbox.broker.control import CONTROL_LIMIT, CONTROL_SOCKET, Registration
from flowerbox.errors import BrokerError

__all__ = ["call", "hold_lease", "register", "revoke", "running"]

TIMEOUT = 30.0


def running(folder: Path) -> bool:
    """Whether a broker answers on `folder`'s control socket (a stale socket file is no
    broker: nothing accepts on it)."""
    path = folder / CONTROL_SOCKET
    if not path.is_socket():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(TIMEOUT)
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def call(folder: Path, asked: dict[str, Any]) -> dict[str, Any]:
    """The broker's answer to `asked`.

    Raises:
        BrokerError: no broker answers, or it refused (its reason in the message).
    """
    path = folder / CONTROL_SOCKET
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(TIMEOUT)
            sock.connect(str(path))
            sock.sendall(json.dumps(asked).encode() + b"\n")
            with sock.makefile("rb") as answer:
                line = answer.readline(CONTROL_LIMIT)
        data = json.loads(line)
    except (OSError, ValueError) as exc:
        raise BrokerError(text("broker.no_answer", path=path, problem=exc)) from exc
    if not isinstance(data, dict):
        raise BrokerError(text("broker.not_object", path=path))
    if "error" in data:
        raise BrokerError(text("broker.refused", op=asked.get("op"), error=data["error"]))
    return data


def hold_lease(folder: Path, run_id: str) -> socket.socket:
    """The run's lease at the broker (flowerbox.sidecar.lease): a connection to keep open for
    as long as the run may forward; once it ends (its holder gone), the broker forwards
    nothing more of the run's.

    Raises:
        BrokerError: no broker answers, or it refused (a run it does not serve, or one held).
    """
    path = folder / CONTROL_SOCKET
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(TIMEOUT)
        sock.connect(str(path))
        sock.sendall(json.dumps({"op": "lease", "run_id": run_id}).encode() + b"\n")
        line = b""
        while not line.endswith(b"\n") and len(line) < CONTROL_LIMIT:
            got = sock.recv(1)  # byte by byte: nothing after the answer is read away
            if not got:
                break
            line += got
        data = json.loads(line)
    except (OSError, ValueError) as exc:
        sock.close()
        raise BrokerError(text("broker.no_answer", path=path, problem=exc)) from exc
    if not isinstance(data, dict) or data.get("held") is not True:
        sock.close()
        error = data.get("error") if isinstance(data, dict) else data
        raise BrokerError(text("broker.refused", op="lease", error=error))
    sock.settimeout(None)
    return sock


def register(folder: Path, asked: Registration) -> str:
    """Register a run; its token."""
    return str(call(folder, asked.to_json())["token"])


def revoke(folder: Path, run_id: str) -> bool:
    """End a run at the broker; whether the broker served it."""
    return bool(call(folder, {"op": "revoke", "run_id": run_id}).get("revoked"))
