"""Who the Docker tests run flowerbox as: root (CI) switches to the e2e user that
docker/e2e-user.sh makes; anyone else runs it as themselves, from the venv running the tests,
so a developer in the docker group runs them without root."""

from __future__ import annotations

import os
import pwd
import sys
from pathlib import Path

from tests.docker.e2e import home_of, runner, user_argv

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
    myself = (pwd.getpwuid(me).pw_name, me, me)
    assert user_argv(myself, ["true"], {"A": "1"}) == [
        "env",
        *("-u", "XDG_STATE_HOME", "-u", "XDG_CONFIG_HOME", "-u", "XDG_DATA_HOME"),
        *("-u", "XDG_CACHE_HOME", "-u", "XDG_RUNTIME_DIR"),
        f"HOME={home_of(myself)}",
        f"FLOWERBOX_SOCKET_ROOT={home_of(myself)}/run/flowerbox",
        "A=1",
        "true",
    ]
    if me == 0:  # only root switches users (and makes the other's suite home)
        name = pwd.getpwuid(other).pw_name
        assert user_argv((name, other, other), ["true"])[:4] == ["runuser", "-u", name, "--"]


def test_flowerbox_runs_in_a_suite_home_never_the_users_own() -> None:
    """Its runs are never in the user's own `flowerbox ps`, its broker never found
    (tests/hermetic.py): the test process's user and another each get a home of the suite's,
    the other's made theirs."""
    me = os.geteuid()
    other = NOBODY if me != NOBODY else 0
    # Another user's home is made only under root (the e2e user); a user in the docker group
    # runs the Docker tests as itself (tests/docker/e2e.py), and cannot give a folder away.
    for uid in (me, other) if me == 0 else (me,):
        entry = pwd.getpwuid(uid)
        home = home_of((entry.pw_name, uid, uid))
        assert home != Path(entry.pw_dir) and home.is_dir(), home
        assert home.stat().st_uid == uid and home.stat().st_mode & 0o777 == 0o700
        argv = user_argv((entry.pw_name, uid, uid), ["true"], {"HOME": "/elsewhere"})
        assert argv.index(f"HOME={home}") < argv.index("HOME=/elsewhere")  # a test's own wins
    assert home_of((pwd.getpwuid(me).pw_name, me, me)) == Path(os.environ["HOME"])
