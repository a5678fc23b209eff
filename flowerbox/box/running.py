"""Running: a started box, found by its containers' names, kept through the engine's HTTP API.

    box = Running.existing(spec)            # the agent and the gateway, as far as they exist
    code = box.wait(log.write)              # the agent's output, then its exit code
    box.remove()                            # their stderr kept in the run's records, then gone

What a detached run's keeper and guard (flowerbox.runs), `flowerbox stop`, and an attached
run's Box (flowerbox.box.engine, once it has started the containers) do to a box. It speaks
to the engine with the standard library (flowerbox.box.engineapi): a keeper waits on its box
for the whole run, one per detached run.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flower import text
from flowerbox.box.engineapi import EngineAPI, EngineError, NotFound
from flowerbox.box.spec import BoxSpec, agent_name, gateway_name

STOP_GRACE_S = 30
STDERR_KEPT = 4 * 1024 * 1024  # the end of each container's stderr the host keeps
STDERR_LINES = 100_000


class Running:
    """The run's agent and gateway containers (None: not there)."""

    def __init__(self, spec: BoxSpec, api: EngineAPI) -> None:
        self.spec = spec
        self.api = api
        self.agent: dict[str, Any] | None = None  # the engine's inspect of each
        self.gateway: dict[str, Any] | None = None

    @classmethod
    def existing(cls, spec: BoxSpec, api: EngineAPI | None = None) -> Running:
        """The containers of the run, by name; one already gone stays None.

        Raises:
            EngineError: no engine answers.
        """
        box = cls(spec, api or EngineAPI.from_env())
        box.agent = box._inspect(agent_name(spec))
        box.gateway = box._inspect(gateway_name(spec))
        return box

    def _inspect(self, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.api.json("GET", f"/containers/{name}/json")
        except NotFound:
            return None
        return found

    def wait(self, write: Callable[[bytes], Any]) -> int | None:
        """Follow the agent's output (stdout and stderr) into `write` until it exits; its
        exit code, or None when the container is gone (removed by someone else).

        Raises:
            EngineError: the engine lost track of the agent.
        """
        agent = self.agent
        if agent is None:
            return None
        with contextlib.suppress(Exception):  # the copy is best effort; the exit code is not
            for chunk in self.api.logs(agent["Id"], tty=_tty(agent), follow=1, stdout=1, stderr=1):
                write(chunk)
        try:
            status = self.api.json("POST", f"/containers/{agent['Id']}/wait", timeout=None)
        except NotFound:
            return None
        except EngineError as exc:
            name = agent.get("Name", "").lstrip("/")
            raise EngineError(text("engine.lost_track", name=name, problem=exc)) from exc
        return int((status or {}).get("StatusCode", 1))

    def pids(self) -> list[int]:
        """The host pids of the agent's processes (the engine's `top`), each checked to be in
        the container's cgroup: a pid the engine reports from another view (gVisor's
        sandbox), or one reused since, is left out. [] when the agent is not running."""
        agent = self.agent
        if agent is None:
            return []
        try:
            top = self.api.json("GET", f"/containers/{agent['Id']}/top")
        except EngineError:
            return []
        column = top["Titles"].index("PID")
        pids = [int(row[column]) for row in top.get("Processes") or []]
        return [pid for pid in pids if _in_cgroup_of(pid, agent["Id"])]

    def stop(self) -> None:
        """Ask the agent to stop (SIGTERM: flower records its step and exits)."""
        if self.agent is not None:
            with contextlib.suppress(EngineError):
                path = f"/containers/{self.agent['Id']}/stop"
                self.api.json("POST", path, timeout=STOP_GRACE_S + 30, t=STOP_GRACE_S)

    def remove(self) -> None:
        """Remove both containers, their stderr kept first in the run's host-only records
        (the gateway's request lines, the agent's errors: both vanish with a container)."""
        for role, container in (("agent", self.agent), ("gateway", self.gateway)):
            if container is None:
                continue
            self._keep_stderr(container, self.spec.stderr_log(role))
            with contextlib.suppress(EngineError):
                self.api.json("DELETE", f"/containers/{container['Id']}", force=1)
        self.agent = self.gateway = None

    def _keep_stderr(self, container: dict[str, Any], path: Path) -> None:
        """The last STDERR_KEPT bytes of the container's stderr into `path`, when the run's
        record folder exists (a self-test's box has none); a best effort, never a failure."""
        if not path.parent.is_dir():
            return
        kept = bytearray()
        with contextlib.suppress(EngineError, OSError):
            logs = self.api.logs(
                container["Id"], tty=_tty(container), stdout=0, stderr=1, tail=STDERR_LINES
            )
            for chunk in logs:
                kept += chunk
                if len(kept) > 2 * STDERR_KEPT:
                    del kept[:-STDERR_KEPT]
        with contextlib.suppress(OSError):
            path.write_bytes(bytes(kept[-STDERR_KEPT:]))


def _tty(container: dict[str, Any]) -> bool:
    return bool((container.get("Config") or {}).get("Tty"))


def _in_cgroup_of(pid: int, container_id: str) -> bool:
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as handle:
            return container_id in handle.read()
    except OSError:
        return False


def kill_now(spec: BoxSpec, api: EngineAPI | None = None) -> None:
    """SIGKILL both containers of a run whose keeper died (flowerbox.runs.guard), by name and
    both at once: under load the engine takes a second or more to answer each call (chaosbox
    saw an agent still running 2 s after its keeper died), and the box runs unwatched until
    both are dead. The gateway's kill ends what reaches the API; the agent's needs nothing
    of it. A container already gone is no error."""
    engine = api or EngineAPI.from_env()

    def kill(name: str) -> None:
        with contextlib.suppress(EngineError):
            engine.json("POST", f"/containers/{name}/kill")

    kills = [
        threading.Thread(target=kill, args=(n,)) for n in (gateway_name(spec), agent_name(spec))
    ]
    for thread in kills:
        thread.start()
    for thread in kills:
        thread.join()
