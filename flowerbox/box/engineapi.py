"""The Docker engine's HTTP API with the standard library: what a started box needs.

    api = EngineAPI.from_env()
    info = api.json("GET", f"/containers/{name}/json")      # NotFound when it is gone
    for chunk in api.logs(info["Id"], follow=True, tty=False): ...

A detached run's keeper and its guard (flowerbox.runs) wait on their box for as long as it
runs, one pair per run: the docker SDK (requests, urllib3, its models) cost each of them
11 MiB of the 35 it was, a hundred runs a gigabyte of the host (bench.many --cli). Starting a
box (the container options the SDK translates) stays with the SDK (flowerbox.box.engine).

The engine is where the docker SDK would look: DOCKER_HOST (`unix://PATH`, or `tcp://H:P`,
with TLS when DOCKER_TLS_VERIFY or DOCKER_CERT_PATH is set: ca.pem, cert.pem and key.pem in
DOCKER_CERT_PATH, else ~/.docker), else /var/run/docker.sock. These are what the docker SDK
speaks here too: its ssh:// needs paramiko, which flowerbox does not install.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from flower import text
from flowerbox.errors import BoxError

DEFAULT_SOCKET = "/var/run/docker.sock"
CALL_TIMEOUT_S = 60.0  # a call that answers at once (inspect, kill, remove); stop adds its grace
FRAME = struct.Struct(">BxxxL")  # a log frame's header: stream (0-2), 3 zero bytes, size


class EngineError(BoxError):
    """The engine refused a call (its status and message), or could not be reached."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class NotFound(EngineError):
    """No such container (any more)."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class EngineAPI:
    """Calls to one engine; each opens its own connection (a follow holds one for hours)."""

    def __init__(self, host: str) -> None:
        parts = urlsplit(host)
        if parts.scheme not in ("unix", "tcp"):
            problem = f"DOCKER_HOST={host}: flowerbox speaks to an engine at unix:// or tcp://"
            raise EngineError(text("box.no_engine", problem=problem))
        self._unix = parts.path if parts.scheme == "unix" else ""
        self._netloc = parts.netloc
        self._tls = _tls_context() if parts.scheme == "tcp" else None

    @classmethod
    def from_env(cls) -> EngineAPI:
        return cls(os.environ.get("DOCKER_HOST") or f"unix://{DEFAULT_SOCKET}")

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        if self._unix:
            return _UnixConnection(self._unix, timeout)
        if self._tls is not None:
            return http.client.HTTPSConnection(self._netloc, timeout=timeout, context=self._tls)
        return http.client.HTTPConnection(self._netloc, timeout=timeout)

    def _open(
        self, method: str, path: str, timeout: float | None, **params: object
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        query = urlencode({k: v for k, v in params.items() if v is not None})
        conn = self._connection(timeout)
        try:
            conn.request(method, f"{path}?{query}" if query else path)
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise EngineError(text("box.no_engine", problem=exc)) from exc
        if response.status >= 400:
            body = response.read().decode(errors="replace")
            conn.close()
            with_message = _message(body) or response.reason
            error = NotFound if response.status == 404 else EngineError
            raise error(f"{method} {path}: {response.status} {with_message}", response.status)
        return conn, response

    def json(
        self, method: str, path: str, *, timeout: float | None = CALL_TIMEOUT_S, **params: object
    ) -> Any:
        """The call's JSON answer (None for an empty one)."""
        conn, response = self._open(method, path, timeout, **params)
        try:
            body = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise EngineError(text("box.no_engine", problem=exc)) from exc
        finally:
            conn.close()
        return json.loads(body) if body.strip() else None

    def logs(self, container: str, *, tty: bool, **params: object) -> Iterator[bytes]:
        """The container's output as the engine streams it (`follow`, `stdout`, `stderr`,
        `tail`: the engine's own parameters), without the frame headers of a container that
        has no terminal. A follow waits as long as the container runs: no timeout."""
        conn, response = self._open("GET", f"/containers/{container}/logs", None, **params)
        try:
            if tty:
                while chunk := response.read1(65536):
                    yield chunk
                return
            while header := response.read(FRAME.size):
                if len(header) < FRAME.size:
                    return
                _stream, size = FRAME.unpack(header)
                payload = response.read(size)
                if payload:
                    yield payload
        finally:
            conn.close()


def _message(body: str) -> str:
    try:
        found = json.loads(body)
    except ValueError:
        return body.strip()
    return str(found.get("message", "")) if isinstance(found, dict) else ""


def _tls_context() -> ssl.SSLContext | None:
    """TLS as the docker SDK sets it up from the environment, or None for plain tcp://."""
    verify = bool(os.environ.get("DOCKER_TLS_VERIFY"))
    cert_path = os.environ.get("DOCKER_CERT_PATH")
    if not (verify or cert_path):
        return None
    folder = Path(cert_path or Path.home() / ".docker")
    context = ssl.create_default_context(cafile=str(folder / "ca.pem") if verify else None)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if (folder / "cert.pem").is_file():
        context.load_cert_chain(str(folder / "cert.pem"), str(folder / "key.pem"))
    return context
