"""The suite is hermetic (issue 36): nested pytest runs, as a developer runs `make check &`
with a busy home and their own broker live in it, neither read nor change that home, find
no broker and hear Ctrl+C; and the tripwires of tests/hermetic.py fail a run that does.

The developer's home here is a folder of this test's (HOME for the nested runs): a busy
tree, a key in ~/.config/flower/.env, a run record, and a live `flowerbox broker
--no-engine` (compose's service) serving from its state folder. Every path in it has its
access time set back, so a read or a listing by any process shows.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowerbox.box import state
from tests.hermetic import REAL_HOME_ENV, XDG

REPO = Path(__file__).resolve().parents[1]
FLOWERBOX = str(Path(sys.executable).parent / "flowerbox")
# Real tests of the suite that once depended on the developer's machine: Ctrl+C reaching a
# child (which a background `make check &` ignores), and the e2e user's home.
REAL_TESTS = [
    "tests/cli/test_status.py::test_follow_redraws_when_the_manifest_changes_and_ctrl_c_exits_zero",
    "tests/setup/test_docker_runner.py::test_flowerbox_runs_in_a_suite_home_never_the_users_own",
]
# What a careless test does: a flowerbox subprocess given its own environment without the
# test's private XDG_STATE_HOME (as the e2e helpers once did), and Path.home().
PROBE = f"""
import os, subprocess, sys
from pathlib import Path

FOUND = (
    "from flowerbox.box import state; from flowerbox.broker import client; "
    "print(client.running(state.broker_folder()))"
)


def test_no_broker_is_found_and_no_run_of_the_developer_is_listed():
    env = {{k: v for k, v in os.environ.items() if not k.startswith("XDG_")}}
    found = subprocess.run([sys.executable, "-c", FOUND], env=env, capture_output=True, text=True)
    assert found.stdout.strip() == "False", found.stdout + found.stderr
    listed = subprocess.run(
        [{FLOWERBOX!r}, "ps", "--all"], env=env, capture_output=True, text=True
    )
    assert listed.returncode == 0 and "{{run}}" not in listed.stdout, listed.stdout + listed.stderr


def test_the_home_is_the_suites():
    home = Path.home()
    (home / "scratch").write_text("a test's file")
    assert os.environ["HOME"] != os.environ["DEVELOPER"], home
    from flowerbox.box import state  # the runs' sockets: not where the developer's broker binds
    assert state.socket_root() == home / "run" / "flowerbox", state.socket_root()
"""
TRIPS = """
import os, subprocess
from pathlib import Path


def test_reading_the_developers_home():
    (Path(os.environ["DEVELOPER"]) / ".bashrc").read_text()


def test_listing_the_developers_home_in_a_subprocess():
    subprocess.run(["find", os.environ["DEVELOPER"]], capture_output=True, check=True)


def test_a_relative_link_target_is_text_not_a_place(tmp_path):
    os.chdir(os.environ["DEVELOPER"])  # "objects" would name a file there, were it a path
    os.symlink("objects", tmp_path / "objects")


def test_a_link_made_in_the_developers_home():
    os.symlink("/nowhere", Path(os.environ["DEVELOPER"]) / "planted")
"""
RUN_ID = "20261201-120000-abc123"


class Home:
    """The developer's home: planted, its access times set back, and what is in it seen."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for n in range(200):
            (root / "projects" / f"p{n % 10}").mkdir(parents=True, exist_ok=True)
            (root / "projects" / f"p{n % 10}" / f"f{n}.txt").write_text(f"work {n}\n")
        (root / ".ssh").mkdir(mode=0o700)
        (root / ".ssh" / "id_ed25519").write_text("not a real key\n")
        (root / ".config" / "flower").mkdir(parents=True)
        (root / ".config" / "flower" / ".env").write_text("ANTHROPIC_API_KEY=sk-ant-dev-own\n")
        (root / ".bashrc").write_text("# the developer's\n")
        run = root / ".local" / "state" / "flowerbox" / "runs" / RUN_ID
        run.mkdir(parents=True)
        (run / "meta.json").write_text(f'{{"run_id": "{RUN_ID}"}}\n')
        self.broker = root / ".local" / "state" / "flowerbox" / "broker"

    def listing(self) -> list[Path]:
        """Every path but the home folder itself (the suite plants its canary there) and the
        broker's own folder, which the broker writes. (Listing moves folders' atimes.)"""
        return [
            p
            for p in sorted(self.root.rglob("*"))
            if not p.is_relative_to(self.broker) and not p.name.startswith(".fbx-suite-canary")
        ]

    def set_back(self) -> None:
        """Every access time set a minute before its modification: relatime then records
        the next read or listing."""
        self.paths = self.listing()
        for path in self.paths:
            mtime = path.lstat().st_mtime_ns
            os.utime(path, ns=(mtime - 60 * 10**9, mtime), follow_symlinks=False)

    def seen(self) -> dict[str, tuple[int, int]]:
        """path -> (atime, mtime) of what set_back saw, read without reading any of it."""
        return {str(p): (p.lstat().st_atime_ns, p.lstat().st_mtime_ns) for p in self.paths}


@pytest.fixture
def developer() -> Iterator[Home]:
    """A developer's home with their broker live in it (compose's, with no engine). A short
    path: the broker's sockets are in it."""
    home = Home(Path(tempfile.mkdtemp(prefix="fbx-dev-")))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home.root),
        "ANTHROPIC_API_KEY": "sk-ant-dev-own",
    }
    broker = subprocess.Popen(
        [FLOWERBOX, "broker", "--no-engine"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert broker.stdout is not None
        line = broker.stdout.readline()  # "serving on ..." once it listens
        assert "serving on" in line, line + broker.stdout.read()
        assert (home.broker / "control.sock").is_socket()
        yield home
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.communicate(timeout=30)
        shutil.rmtree(home.root, ignore_errors=True)


def nested(
    home: Home, *args: str, background: bool = True, locale: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """pytest ARGS in a subprocess from the checkout, as the developer runs it: HOME their
    home, their `locale` variables, no XDG folder or suite variable of this run's, and
    (`background`) SIGINT ignored, as `make check &` starts it."""
    drop = {REAL_HOME_ENV, *XDG}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYTEST_")}
    env |= {"HOME": str(home.root), "DEVELOPER": str(home.root), **(locale or {})}

    def as_a_background_job() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", "pyproject.toml", "-q", "-p", "no:cacheprovider"]
        + list(args),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=as_a_background_job if background else None,
    )


def write_probe(folder: Path, name: str, text: str) -> str:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text.replace("{run}", RUN_ID))
    return str(folder / name)


def test_the_suite_in_the_background_leaves_a_busy_home_and_a_live_broker_alone(
    developer: Home, tmp_path: Path
) -> None:
    probe = write_probe(tmp_path / "probe", "test_probe.py", PROBE)
    developer.set_back()
    before = developer.seen()
    started = time.time()
    done = nested(developer, *REAL_TESTS, probe)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert f"{len(REAL_TESTS) + 2} passed" in out, out[-4000:]
    after = developer.seen()
    assert after == before, [p for p in after if after.get(p) != before.get(p)][:20]
    assert developer.listing() == developer.paths  # nothing added or removed either
    # The broker saw no run: its ledger was not written since it started.
    assert all(p.stat().st_mtime < started for p in developer.broker.glob("ledger*")), out


def test_without_the_suites_home_the_probe_finds_the_broker(
    developer: Home, tmp_path: Path
) -> None:
    """The probe can fail: run outside the suite's conftest (no tests/hermetic.py), it finds
    the developer's broker, as the suite once did."""
    probe = write_probe(tmp_path / "probe", "test_probe.py", PROBE)
    done = nested(
        developer, f"{probe}::test_no_broker_is_found_and_no_run_of_the_developer_is_listed"
    )
    assert done.returncode == 1, done.stdout[-3000:]
    assert "assert 'True' == 'False'" in done.stdout, done.stdout[-3000:]
    assert state.base() != developer.root / ".local" / "state"  # this process: the suite's


def test_the_tripwires_fail_a_test_that_reads_the_home_and_a_run_that_lists_it(
    developer: Home, tmp_path: Path
) -> None:
    trips = write_probe(tmp_path / "trips", "test_trips.py", TRIPS)
    (developer.root / ".fbx-suite-canary-999999999").mkdir()  # a killed run's: no such pid
    done = nested(developer, trips, "-p", "tests.conftest")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-4000:]
    assert "2 failed, 2 passed" in out, out[-4000:]
    assert "touched the developer's real home (the suite has its own" in out, out[-4000:]
    assert f"open {developer.root / '.bashrc'}" in out, out[-4000:]
    assert f"os.symlink {developer.root / 'planted'}" in out, out[-4000:]
    assert f"{developer.root / 'objects'}" not in out, out[-4000:]
    # the subprocess's listing, seen by the canary the suite planted in the home
    assert "the suite touched the developer's real home:" in out, out[-4000:]
    assert ".fbx-suite-canary-" in out and "was read or listed" in out, out[-4000:]
    assert not list(developer.root.glob(".fbx-suite-canary-*"))  # ours, and the killed run's


# What a test that starts a process without FLOWER_LANG sees (the gateways of
# tests/flowerbox/conftest.py, a CLI in a clean environment): the suite's locale.
LOCALE_PROBE = """
import os, subprocess, sys

SPOKEN = "from flower.core.lang import current; print(current())"


def test_a_process_without_flower_lang_speaks_the_suites_locale():
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWER_")}
    said = subprocess.run([sys.executable, "-c", SPOKEN], env=env, capture_output=True, text=True)
    assert said.stdout.strip() == "en", said.stdout + said.stderr
    assert os.environ["LANG"] == "C.UTF-8"
    assert not {"LC_ALL", "LC_MESSAGES", "LANGUAGE"} & set(os.environ)
"""


@pytest.mark.parametrize("setting", ["LC_ALL", "LC_MESSAGES", "LANG"])
def test_the_developers_locale_never_reaches_the_suite(
    developer: Home, tmp_path: Path, setting: str
) -> None:
    """A developer whose locale is Chinese (or whose git speaks German) runs the suite as
    anyone else does; without the suite's own locale the probe hears zh and fails."""
    probe = write_probe(tmp_path / "locale", "test_locale.py", LOCALE_PROBE)
    locale = {setting: "zh_CN.UTF-8", "LANGUAGE": "de"}
    done = nested(developer, probe, "-p", "tests.conftest", locale=locale)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-3000:]
    outside = nested(developer, probe, locale=locale)  # without the suite's conftest
    assert outside.returncode == 1, outside.stdout[-3000:]
    assert "assert 'zh' == 'en'" in outside.stdout, outside.stdout[-3000:]
