"""What the appliance's end-to-end tests share: the unprivileged user they run flowerbox as,
its install, the "real" key the fake API requires, and how to run a command as that user.
(The fixtures built on these are in conftest.py.)

Root (CI) runs flowerbox as the e2e user that docker/e2e-user.sh makes; anyone else (a
developer in the docker group) already is an unprivileged user, so runs it as themselves, from
the venv running the tests: no root needed to run the Docker tests.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path
from typing import Any

from flower.testing import FakeAPI
from flowerbox.box.state import SOCKET_ROOT
from tests.hermetic import XDG, sockets_of, user_home


def runner(euid: int) -> tuple[str, str, str]:
    """(user, flowerbox executable, how to prepare them) for a test process running as `euid`."""
    if euid == 0:
        venv = os.environ.get("FLOWERBOX_E2E_VENV", "/opt/flowerbox-e2e")
        user = os.environ.get("FLOWERBOX_E2E_USER", "flowerbox-e2e")
        return user, f"{venv}/bin/flowerbox", "run `bash docker/e2e-user.sh` as root (CI does)"
    me = pwd.getpwuid(euid).pw_name
    return me, str(Path(sys.executable).parent / "flowerbox"), "run `make install`"


USER, FLOWERBOX, PREPARE = runner(os.geteuid())
REAL = "sk-ant-real-" + "e2e-0123456789abcdef"  # built at runtime: never a literal in a probe


def user_argv(
    user: tuple[str, int, int], command: list[str], env: dict[str, str] | None = None
) -> list[str]:
    """`command` as `user` in its suite home (tests/hermetic.py) and its socket root there,
    with `env` added to the environment (runuser only to switch)."""
    switch = [] if user[1] == os.geteuid() else ["runuser", "-u", user[0], "--"]
    return [
        *switch,
        "env",
        # The test process's XDG folders are its own (a test's private state, the root
        # runner's): the user's are under its suite home.
        *(arg for name in XDG for arg in ("-u", name)),
        f"HOME={home_of(user)}",
        f"{SOCKET_ROOT}={sockets_of(home_of(user))}",
        *(f"{k}={v}" for k, v in (env or {}).items()),
        *command,
    ]


def as_user(
    user: tuple[str, int, int], command: list[str], *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        user_argv(user, command, env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def home_of(user: tuple[str, int, int]) -> Path:
    """The user's suite home: never its real one, so its runs are not in its own `flowerbox
    ps` and a broker it runs is not found (tests/hermetic.py)."""
    return user_home(user[0])


def box_env(api: FakeAPI, user: tuple[str, int, int]) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home_of(user)),
        "ANTHROPIC_API_KEY": REAL,
        "ANTHROPIC_BASE_URL": api.url,
        "FLOWERBOX_IMAGE": os.environ.get("FLOWERBOX_TEST_IMAGE", "flowerbox:dev"),
        "FLOWER_LANG": "zh",  # the seeds' language, which the tests assert (tests/conftest.py)
    }


def state_of(user: tuple[str, int, int]) -> Path:
    """The user's flowerbox state folder (flowerbox.box.state: no box ever mounts it)."""
    return home_of(user) / ".local" / "state" / "flowerbox"


def metas(user: tuple[str, int, int], ws: Path) -> dict[str, dict[str, Any]]:
    """run id -> meta of every run the user recorded for workspace `ws`."""
    found = {}
    for path in sorted((state_of(user) / "runs").glob("*/meta.json")):
        meta = json.loads(path.read_text())
        if meta.get("workspace") == str(ws):
            found[meta["run_id"]] = meta
    return found


def ledger(user: tuple[str, int, int], ws: Path, name: str = "usage.json") -> Path:
    """The newest run's gateway file `name` (usage.json, egress.jsonl) for workspace `ws`."""
    newest = max(metas(user, ws).values(), key=lambda meta: str(meta["started"]))
    return state_of(user) / "runs" / newest["run_id"] / "gateway" / name


def usage_of(user: tuple[str, int, int], ws: Path) -> dict[str, Any]:
    """The newest run's usage ledger (its gateway writes it to the user's state)."""
    data: dict[str, Any] = json.loads(ledger(user, ws).read_text())
    return data
