"""Box: a BoxSpec brought to life on a Docker engine. The one module that imports docker.

    box = Box(spec, client=connect())
    code = box.run(write=sys.stdout.buffer.write)   # gateway up, agent attached, both gone

Errors tree:
    BoxError           the engine, the image or a container failed; the message says what to do
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docker import DockerClient
from docker.errors import APIError, DockerException, ImageNotFound, NotFound

from flower import text
from flowerbox import __version__, wire
from flowerbox.box import startclock
from flowerbox.box.engineapi import EngineAPI, EngineError
from flowerbox.box.facts import box_facts
from flowerbox.box.running import Running
from flowerbox.box.source import no_checkout
from flowerbox.box.spec import BoxSpec, agent_kwargs, gateway_kwargs
from flowerbox.errors import BoxError
from flowerbox.sidecar.lease import hold

SOCKET_WAIT_S = 30.0
SOCKET_POLL_S = 0.01
GATEWAY_CHECK_S = 0.5


def connect(client: DockerClient | None = None) -> DockerClient:
    """A client that answers, or a BoxError saying how to get an engine."""
    try:
        client = client or DockerClient.from_env()
        client.ping()
    except DockerException as exc:
        raise BoxError(text("box.no_engine", problem=exc)) from exc
    return client


def ensure_image(
    client: DockerClient,
    tag: str,
    *,
    context: Path | None,
    base_image: str | None = None,
    rebuild: bool = False,
) -> None:
    """Use `tag` if it is there and was built for this flowerbox; else (or with `rebuild`)
    build it from `context` (a checkout with the Dockerfile).

    An image built for another version runs other code inside: its entry modules, wire
    names or probes may not be this host's, so it is stale (its version label says which it
    was built for) and is rebuilt rather than run.

    Raises:
        BoxError: no image (or a stale one) and no Dockerfile to build it, or the build failed.
    """
    try:
        built_for: str | None = client.images.get(tag).labels.get(wire.VERSION_LABEL) or ""
    except ImageNotFound:
        built_for = None
    if built_for == __version__ and not rebuild:
        return
    if context is None or not (context / "Dockerfile").is_file():
        found = (
            text("engine.image_absent", tag=tag)
            if built_for is None
            else text(
                "engine.image_stale",
                tag=tag,
                built_for=built_for or text("engine.unknown_version"),
                version=__version__,
            )
        )
        raise BoxError(text("engine.no_dockerfile", found=found, hint=no_checkout()))
    build_id = str(uuid.uuid4())
    buildargs = {
        wire.VERSION_BUILD_ARG: __version__,
        wire.BUILD_ID_ARG: build_id,
        wire.BUILD_USER_ARG: str(os.getuid()),
    }
    if base_image:
        buildargs["BASE_IMAGE"] = base_image
    try:
        client.images.build(
            path=str(context), tag=tag, buildargs=buildargs, network_mode="host", rm=True
        )
        # the builder stage stays behind untagged (~0.9 GB): this build's alone goes
        client.images.prune(
            filters={"dangling": True, "label": f"{wire.BUILD_ID_LABEL}={build_id}"}
        )
    except (APIError, DockerException) as exc:
        raise BoxError(text("engine.build_failed", tag=tag, context=context, problem=exc)) from exc


class Box:
    """One run: the gateway sidecar, then the agent attached to this terminal."""

    def __init__(
        self,
        spec: BoxSpec,
        *,
        client: DockerClient,
        shape: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        on_started: Callable[[dict[str, Any]], object] | None = None,
    ) -> None:
        """`shape` rewrites the agent's container kwargs before it starts: only the escape
        self-test's negative control uses it (a deliberately weak container). `on_started`
        gets the agent's isolation as the engine recorded it (flowerbox.box.facts), once it runs."""
        self.spec = spec
        self.client = client
        self._shape = shape or (lambda kwargs: kwargs)
        self._on_started = on_started
        self._gateway: Any = None
        self._agent: Any = None
        # The gateway's lease (flowerbox.sidecar.lease), held while this process keeps the box;
        # a detached run's keeper inherits it (flowerbox.runs.detach).
        self.lease: socket.socket | None = None

    def run(self, write: Callable[[bytes], Any], write_err: Callable[[bytes], Any]) -> int:
        """Start both containers, stream the agent's stdout to `write` and its stderr to
        `write_err` (kept apart: flower's --json summary is alone on stdout), return its exit
        code; both containers are removed afterwards, whatever happened."""
        try:
            agent = self.start()

            def pump_stderr() -> None:
                for chunk in agent.logs(stream=True, follow=True, stdout=False, stderr=True):
                    write_err(chunk)

            errors = threading.Thread(target=pump_stderr, daemon=True)
            errors.start()
            for chunk in agent.logs(stream=True, follow=True, stdout=True, stderr=False):
                write(chunk)
            status: dict[str, Any] = agent.wait()
            errors.join(timeout=5)
            return int(status.get("StatusCode", 1))
        finally:
            self.remove()

    def start(self) -> Any:
        """The gateway and the agent started together (neither needs the other's container:
        the agent's entry waits for the gateway's socket, flowerbox.inside.entry), detached;
        returns the agent's container once the gateway listens. Nothing is removed here:
        `run`, or whoever keeps a detached run, does that (both containers are known to this
        Box by then, whichever start failed)."""
        kwargs = self._shape(agent_kwargs(self.spec))
        check_runtime(self.client, kwargs.get("runtime", "runc"))
        self._check_broker()
        gateway = Started(self._start_gateway)
        try:
            self._agent = self._start({**kwargs, "detach": True})
            gateway.wait()
        except BaseException:
            gateway.wait(raising=False)  # joined: its container is ours to remove too
            shutil.rmtree(self.spec.secrets_dir, ignore_errors=True)
            raise
        startclock.mark("containers started")
        self._gateway_listening()
        if self._on_started is not None:
            with contextlib.suppress(APIError, NotFound):  # a record, never a reason to fail
                self._agent.reload()
                self._on_started(box_facts(self._agent.attrs))
        return self._agent

    def run_attached(self, attach: Callable[[dict[str, Any]], int]) -> int:
        """Start the gateway, then let `attach` run the agent from its kwargs (the docker CLI
        with a terminal: `flowerbox shell`) and return its code; both containers are removed
        afterwards (the agent found by its name), whatever happened."""
        kwargs = agent_kwargs(self.spec)
        check_runtime(self.client, kwargs.get("runtime", "runc"))
        try:
            self._check_broker()
            self._start_gateway()
            self._gateway_listening()
            return attach(kwargs)
        finally:
            with contextlib.suppress(APIError, NotFound):
                self.client.containers.get(kwargs["name"]).remove(force=True)
            self.remove()

    def pids(self) -> list[int]:
        """The host pids of the agent's processes (flowerbox.box.running)."""
        return self._running().pids()

    def stop(self) -> None:
        """Ask the agent to stop (SIGTERM: flower records its step and exits)."""
        self._running().stop()

    def remove(self) -> None:
        """Remove both containers, their stderr kept first in the run's host-only records;
        found by name, so a container whose start failed half-way goes too."""
        if self._agent is not None or self._gateway is not None:
            with contextlib.suppress(EngineError):
                Running.existing(self.spec).remove()
        self._agent = self._gateway = None
        self.release_lease()

    def release_lease(self) -> None:
        """Let go of the gateway's lease (it forwards nothing more unless another process
        holds it too: a detached run's keeper)."""
        if self.lease is not None:
            self.lease.close()
            self.lease = None

    def _running(self) -> Running:
        """This box as the engine now has it (flowerbox.box.running: what the keepers use)."""
        running = Running(self.spec, EngineAPI.from_env())
        running.agent = None if self._agent is None else self._agent.attrs
        return running

    def _start(self, kwargs: dict[str, Any]) -> Any:
        try:
            return self.client.containers.run(**kwargs)
        except ImageNotFound as exc:
            raise BoxError(text("box.image_gone", image=self.spec.image)) from exc
        except (APIError, DockerException) as exc:
            raise BoxError(
                text("engine.start_failed", name=kwargs.get("name"), problem=exc)
            ) from exc

    def _start_gateway(self) -> None:
        """The gateway's container, started (`_gateway_listening` waits for its socket). A
        broker's run has no gateway container: the broker serves its sockets already."""
        if self.spec.broker:
            return
        try:
            self._gateway = self._start(gateway_kwargs(self.spec))
        except BaseException:
            shutil.rmtree(self.spec.secrets_dir, ignore_errors=True)
            raise

    def _check_broker(self) -> None:
        """A broker's run starts nothing while its broker does not serve the run's socket."""
        if self.spec.broker and not self.spec.api_socket.is_socket():
            raise BoxError(text("engine.no_broker", socket=self.spec.api_socket))

    def _gateway_listening(self) -> None:
        """Once the gateway's socket is there it has read the credentials file, so the file
        goes at once (a killed CLI leaves nothing to find: flowerbox.box.state)."""
        if self.spec.broker:
            self._hold_broker_lease()
            return
        try:
            self._wait_for_socket()
            startclock.mark("gateway listening")
        finally:
            shutil.rmtree(self.spec.secrets_dir, ignore_errors=True)
        try:  # bound before api.sock: there now
            self.lease = hold(self.spec.lease_socket)
        except OSError as exc:
            said = text("engine.no_lease", socket=self.spec.lease_socket, problem=exc)
            raise BoxError(said) from exc

    def _hold_broker_lease(self) -> None:
        """A broker's run: its lease is the broker's, taken over its control socket."""
        # lazy: the broker's client, for a broker's runs alone
        from flowerbox.box import state
        from flowerbox.broker.client import hold_lease

        self.lease = hold_lease(state.broker_folder(), self.spec.run_id)

    def _wait_for_socket(self) -> None:
        """Until the socket is there: a stat every SOCKET_POLL_S (it costs nothing, and the
        start waits on it), the engine asked whether the gateway died every GATEWAY_CHECK_S."""
        deadline = time.monotonic() + SOCKET_WAIT_S
        checked = time.monotonic()
        while time.monotonic() < deadline:
            if self.spec.api_socket.exists():
                return
            if time.monotonic() - checked >= GATEWAY_CHECK_S:
                checked = time.monotonic()
                self._gateway.reload()
                if self._gateway.status in ("exited", "dead"):
                    logs = self._gateway.logs(tail=20).decode(errors="replace")
                    raise BoxError(text("engine.gateway_died", logs=logs))
            time.sleep(SOCKET_POLL_S)
        seconds = f"{SOCKET_WAIT_S:.0f}"
        raise BoxError(text("engine.gateway_silent", socket=self.spec.api_socket, seconds=seconds))


class Started:
    """`start()` run in a thread of its own from now on; `wait` joins it and raises what it
    raised (a container start is mostly waiting on the engine, so two overlap well)."""

    def __init__(self, start: Callable[[], None]) -> None:
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(start,), daemon=True)
        self._thread.start()

    def _run(self, start: Callable[[], None]) -> None:
        try:
            start()
        except BaseException as exc:  # handed to the waiting thread
            self._error = exc

    def wait(self, *, raising: bool = True) -> None:
        self._thread.join()
        if self._error is not None and raising:
            raise self._error


def check_runtime(client: DockerClient, runtime: str) -> None:
    """Refuse a runtime the engine does not have before anything starts (the engine's own
    error names no fix).

    Raises:
        BoxError: which runtimes the engine has, and how to register gVisor's.
    """
    if runtime == "runc":
        return
    try:
        runtimes = client.info().get("Runtimes") or {}
    except (APIError, DockerException) as exc:
        raise BoxError(text("engine.no_runtimes", problem=exc)) from exc
    if runtime not in runtimes:
        listed = ", ".join(sorted(runtimes)) or text("engine.none_listed")
        raise BoxError(text("engine.no_runtime", runtime=repr(runtime), runtimes=listed))


def labelled(client: DockerClient, label: str) -> list[Any]:
    """Every container carrying `label` (`key` or `key=value`), running or not."""
    return list(client.containers.list(all=True, filters={"label": label}))


def image_id(client: DockerClient, tag: str) -> str:
    """The image's id (`sha256:...`), or a BoxError that says how to get the image."""
    try:
        return str(client.images.get(tag).id)
    except ImageNotFound as exc:
        raise BoxError(text("box.image_missing", image=tag)) from exc
    except (APIError, DockerException) as exc:
        raise BoxError(text("engine.image_lookup", tag=tag, problem=exc)) from exc


def repo_digest(client: DockerClient, image: str) -> str | None:
    """`image` by the registry digest the engine recorded when it pushed or pulled it
    (`name@sha256:...`: what a node then runs cannot change under the tag), or None when
    it has none: not here, or built here and never pushed."""
    name = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    try:
        digests = client.images.get(image).attrs.get("RepoDigests") or []
    except (ImageNotFound, APIError, DockerException):
        return None
    return next((d for d in digests if d.split("@", 1)[0] == name), None)
