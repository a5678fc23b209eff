"""Who the Docker tests run flowerbox as: root (CI) switches to the e2e user that
docker/e2e-user.sh makes; anyone else runs it as themselves, from the venv running the tests,
so a developer in the docker group runs them without root."""

from __future__ import annotations

import os
import pwd
import sys
from pathlib import Path

from tests.docker.e2e import runner, user_argv

NOBODY = pwd.getpwnam("nobody").pw_uid


def test_root_runs_flowerbox_as_the_e2e_user_from_its_install() -> None:
    user, flowerbox, prepare = runner(0)
    assert user == os.environ.get("FLOWERBOX_E2E_USER", "flowerbox-e2e")
    assert flowerbox.endswith("/bin/flowerbox") and not flowerbox.startswith(sys.prefix)
    assert "docker/e2e-user.sh" in prepare


def test_a_user_runs_flowerbox_as_themselves_from_this_venv() -> None:
    user, flowerbox, prepare = runner(NOBODY)
    assert user == "nobody"
    assert flowerbox == str(Path(sys.executable).parent / "flowerbox")
    assert prepare == "run `make install`"


def test_only_a_switch_to_another_user_goes_through_runuser() -> None:
    me = os.geteuid()
    other = NOBODY if me != NOBODY else 0
    assert user_argv(("me", me, me), ["true"], {"A": "1"}) == [
        "env",
        "-u",
        "XDG_STATE_HOME",
        "A=1",
        "true",
    ]
    assert user_argv(("x", other, other), ["true"])[:4] == ["runuser", "-u", "x", "--"]
