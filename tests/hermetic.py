"""The suite runs in a home of its own (issue 36): never the developer's.

At configure (tests/conftest.py) every pytest process (the controller and each xdist worker)
gets a fresh HOME and XDG_* folders under a temporary directory, and loses the developer's
flowerbox settings from its environment. flowerbox finds its records and its broker through
$XDG_STATE_HOME (flowerbox.box.state), so no run of the suite is listed by the developer's
`flowerbox ps`, and a broker the developer runs (on the host or compose's `broker` service,
whose control socket is in their state folder) is never found. Its runs' socket folders are
in the suite home too ($FLOWERBOX_SOCKET_ROOT), never in the developer's /tmp/flowerbox-<uid>.

Two tripwires prove it:
- `Guard`, an audit hook (sys.addaudithook), fails the test in whose process a path under
  the real home is opened, listed, made or removed (the interpreter, the venv and the
  checkout excepted: a developer's may live in their home).
- `Canary`, a folder planted in the real home by the controller, with access times set back:
  a subprocess that reads or lists it (a test hashing "the whole home") moves them, and the
  session fails at its end.

The e2e user (tests/docker/e2e.py) gets a suite home too: `user_home`.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import pwd
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowerbox.box.state import SOCKET_ROOT

REAL_HOME_ENV = "FBX_SUITE_REAL_HOME"  # the developer's home, as the controller found it
XDG = ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")
# The developer's own settings, which would reach flower, flowerbox or the CLI under test.
LEAKY_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "FLOWER_", "FLOWERBOX_")
# The suite's own locale: a process a test starts without FLOWER_LANG (a gateway, a CLI in a
# clean environment) speaks what the locale says, and git's words are English; neither may
# depend on the developer's (LC_ALL=zh_CN.UTF-8 made such a test read Chinese). A test of
# the locale sets its own.
SUITE_LOCALE = "C.UTF-8"
LOCALE_OVERRIDES = ("LC_ALL", "LC_MESSAGES", "LANGUAGE")
# What configures the suite itself (tests/, docker/*.sh), not the product: kept.
KEPT = frozenset(
    {
        "FLOWER_CHROMIUM",
        "FLOWERBOX_BASE_IMAGE",
        "FLOWERBOX_CHECKOV",
        "FLOWERBOX_DEBIAN_MIRROR",
        "FLOWERBOX_DOCKERD_WAIT",
        "FLOWERBOX_E2E_USER",
        "FLOWERBOX_E2E_VENV",
        "FLOWERBOX_KUBE_REPO",
        "FLOWERBOX_NAMESPACE",
        "FLOWERBOX_PULL_TIMEOUT",
        "FLOWERBOX_TEST_IMAGE",
    }
)
# The suite's home is like a fresh account's, plus the git identity the developer's (and CI's)
# has: tests commit, and git refuses to guess one on a host without a domain name.
GITCONFIG = "[user]\n\tname = flowerbox suite\n\temail = suite@localhost\n"

_USER_HOMES: dict[str, Path] = {}  # user name -> its suite home, in this process

# Audit events that touch a path, and which of their arguments are paths.
PATH_ARGS = {
    "open": (0,),
    "os.listdir": (0,),
    "os.scandir": (0,),
    "os.mkdir": (0,),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.rename": (0, 1),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.utime": (0,),
    "os.truncate": (0,),
    "os.link": (0, 1),
    "os.symlink": (1,),  # the link; its target is only text (relative to the link, not cwd)
    "shutil.rmtree": (0,),
    "glob.glob": (0,),
}


def fresh_home(prefix: str, where: str | None = None, *, gitconfig: str = "") -> Path:
    """A new home folder (0700) with the XDG folders in it, and `gitconfig` if any."""
    home = Path(tempfile.mkdtemp(prefix=prefix, dir=where)).resolve()
    for name in (".local/state", ".config", ".local/share", ".cache", "run"):
        (home / name).mkdir(parents=True, mode=0o700)
    if gitconfig:
        (home / ".gitconfig").write_text(gitconfig)
    return home


def packages_on_path() -> list[Path]:
    """The package folders this Python imports from: its venv's, and another venv's a path
    line names (the mutation runner's scratch venv reads the checkout's, which may live in the
    developer's home)."""
    return [Path(p) for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]


def sockets_of(home: Path) -> Path:
    """The runs' socket root in `home` (flowerbox makes it): not /tmp/flowerbox-<uid>, which
    the developer's own runs and their compose broker share. Short: a socket's path in a run's
    folder there must fit in 108 bytes."""
    return home / "run" / "flowerbox"


def home_env(home: Path) -> dict[str, str]:
    """HOME, the XDG folders of `home` (what `fresh_home` made) and its socket root."""
    return {
        SOCKET_ROOT: str(sockets_of(home)),
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_RUNTIME_DIR": str(home / "run"),
    }


def real_homes() -> list[Path]:
    """The developer's home: $HOME as the controller found it (first), and the passwd
    entry's."""
    named = os.environ.get(REAL_HOME_ENV) or os.environ.get("HOME") or ""
    found = [Path(p).resolve() for p in (named, pwd.getpwuid(os.getuid()).pw_dir) if p]
    return [p for p in dict.fromkeys(found) if p != Path("/")]


class Guard:
    """An audit hook that records every path under `forbidden` this process touches, save
    under `allowed`; `take()` hands the records over and forgets them."""

    def __init__(self, forbidden: list[Path], allowed: list[Path]) -> None:
        self.forbidden = tuple(str(p) for p in forbidden)
        self.allowed = tuple(str(p) for p in allowed)
        self.armed = False
        self.found: list[str] = []
        sys.addaudithook(self._hook)  # for the process's life: a hook cannot be removed

    def _hook(self, event: str, args: tuple[object, ...]) -> None:
        where = PATH_ARGS.get(event)
        if where is None or not self.armed:
            return
        for index in where:
            arg = args[index] if index < len(args) else None
            if isinstance(arg, int | type(None)):
                continue  # a file descriptor, or the working directory
            try:
                path = os.path.abspath(os.fsdecode(arg))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
            if self._forbids(path):
                self.found.append(f"{event} {path}")

    def _forbids(self, path: str) -> bool:
        def under(roots: tuple[str, ...]) -> bool:
            return any(path == root or path.startswith(root + os.sep) for root in roots)

        return under(self.forbidden) and not under(self.allowed)

    def take(self) -> list[str]:
        found, self.found = self.found, []
        return found

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        armed, self.armed = self.armed, False
        try:
            yield
        finally:
            self.armed = armed


class Canary:
    """A folder in `home` that the suite must neither read, list nor change: its files' and
    its own access times are set a minute before their modification (relatime then records
    the next access), and its content is hashed. Named by the planting process: one a killed
    run left (no process of that id lives) is removed by the next."""

    PREFIX = ".fbx-suite-canary-"

    def __init__(self, home: Path) -> None:
        for left in home.glob(f"{self.PREFIX}*"):
            if not _alive(left.name.removeprefix(self.PREFIX)):
                shutil.rmtree(left, ignore_errors=True)
        self.folder = home / f"{self.PREFIX}{os.getpid()}"
        (self.folder / "inner").mkdir(parents=True)
        (self.folder / "inner" / "secret.txt").write_text("the suite must not read this\n")
        (self.folder / "note.txt").write_text(
            "planted by flowerbox's test suite: removed at its end\n"
        )
        self.seen = self._look()

    def _paths(self) -> list[Path]:
        inner = self.folder / "inner"
        return [self.folder, inner, self.folder / "note.txt", inner / "secret.txt"]

    def _look(self) -> dict[str, tuple[int, str]]:
        """path -> (atime, content hash); the atime set back after the reading."""
        seen = {}
        for path in self._paths():
            if path.is_dir():
                body = b"/".join(sorted(os.fsencode(p.name) for p in path.iterdir()))
            else:
                body = path.read_bytes()
            mtime = path.stat().st_mtime_ns
            os.utime(path, ns=(mtime - 60 * 10**9, mtime))
            seen[str(path)] = (path.stat().st_atime_ns, hashlib.sha256(body).hexdigest())
        return seen

    def touched(self) -> list[str]:
        """What was read, listed or changed since planting (reading it here resets it)."""
        changed = []
        for path in self._paths():
            try:
                atime = path.stat().st_atime_ns
            except OSError:
                changed.append(f"{path} is gone")
                continue
            if atime != self.seen[str(path)][0]:
                changed.append(f"{path} was read or listed")
        now = self._look() if not changed else self.seen
        changed += [f"{p} was changed" for p in now if now[p][1] != self.seen[p][1]]
        return changed

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True  # another user's
    return True


class Hermetic:
    """The pytest plugin: the suite's home for this process, the Guard, and in the controller
    the Canary."""

    def __init__(self, config: pytest.Config) -> None:
        worker = hasattr(config, "workerinput")
        self.real = real_homes()
        os.environ.setdefault(REAL_HOME_ENV, str(self.real[0]) if self.real else "")
        for name in [n for n in os.environ if n.startswith(LEAKY_PREFIXES) and n not in KEPT]:
            del os.environ[name]
        for name in LOCALE_OVERRIDES:
            os.environ.pop(name, None)
        os.environ["LANG"] = SUITE_LOCALE
        self.canary = None if worker or not self.real else Canary(self.real[0])
        self.home = fresh_home("fbx-suite-home-", gitconfig=GITCONFIG)
        os.environ.update(home_env(self.home))
        _USER_HOMES[pwd.getpwuid(os.getuid()).pw_name] = self.home
        allowed = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)}
        allowed |= {Path(str(config.rootpath)), self.home, *packages_on_path()}
        self.guard = Guard(self.real, sorted(p.resolve() for p in allowed))
        self.guard.armed = True
        self.outside: list[str] = []
        atexit.register(shutil.rmtree, self.home, ignore_errors=True)

    def _check(self, item: pytest.Item) -> None:
        if found := self.guard.take():
            shown = "\n  ".join(found[:20])
            pytest.fail(
                f"{item.nodeid} touched the developer's real home (the suite has its own, "
                f"$HOME={self.home}; tests/hermetic.py):\n  {shown}",
                pytrace=False,
            )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.outside += self.guard.take()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        result = yield
        self._check(item)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        result = yield
        self._check(item)
        return result

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        with self.guard.paused():
            self.outside += self.guard.take()
            touched = self.canary.touched() if self.canary else []
            if self.canary:
                self.canary.remove()
        problems = [f"outside any test: {f}" for f in self.outside] + touched
        if problems:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            text = "the suite touched the developer's real home:\n  " + "\n  ".join(problems)
            if reporter is not None:
                reporter.ensure_newline()
                reporter.write_sep("=", "hermetic (tests/hermetic.py)", red=True)
                reporter.write_line(text, red=True)
            else:
                print(text, file=sys.stderr)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def user_home(name: str) -> Path:
    """A suite home for user `name` (the e2e user): for the test process's own user, its
    suite home (Hermetic); for another, a fresh one under /var/tmp (fbx-e2e-home-*) that
    user owns, made once per process and removed at its exit."""
    if name not in _USER_HOMES:
        entry = pwd.getpwnam(name)
        home = fresh_home("fbx-e2e-home-", "/var/tmp")  # as bare as its real one
        for path in [home, *home.rglob("*")]:
            os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
        _USER_HOMES[name] = home
        atexit.register(shutil.rmtree, home, ignore_errors=True)
    return _USER_HOMES[name]
