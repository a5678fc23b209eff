"""The one way flowerbox runs git on the host (issue 37, G1 and G3).

    git = HostGit(hooks=empty_hooks(state_folder))
    done = git.run("update-ref", "refs/heads/x", sha, workspace=ws)   # -C ws, checked config
    done = git.run("index-pack", str(pack), repo=bare)                # -C bare, a repo of ours

Every git process flowerbox starts on the host goes through `HostGit.run`, because the user's
own configuration may hand the agent a way to run code there: husky's `core.hooksPath=.husky/_`
or a `.githooks` convention in the repository's config, a relative `core.hooksPath` in
`~/.gitconfig` (relative to the working tree), an `[include] path = ../.gitconfig` naming a
tracked file the agent can rewrite. Whatever those say, a call here:

- runs no hook (`core.hooksPath` is an empty folder of flowerbox's own), no fsmonitor, no
  `core.alternateRefsCommand`, editor, pager, askpass, ssh command or credential helper
  (`-c` settings, read after every config file and include, so they win; the helper list is
  reset by its empty value), no trace2 writer (its environment variables, which beat
  config), and in the user's repository no lazy fetch of a missing object from a promisor
  remote (GIT_NO_LAZY_FETCH: `remote.<name>.promisor` needs no extension, and the remote's
  `uploadpack` is a command);
- runs only the subcommands flowerbox needs (ALLOWED; `clone` only bare, `worktree` only
  `list`): none of them checks files out, merges, or prints a patch, so no filter, textconv,
  merge or diff driver a `.gitattributes` names is ever consulted (`diff` gets `--no-ext-diff
  --no-textconv` all the same), and the global and system attribute files are off;
- reaches only the transports the caller names (`GIT_ALLOW_PROTOCOL`: `file` by default);
- with `workspace=`, first lists the configuration as git will read it: an entry that comes
  from a file inside the working tree (not `.git/`, which the box never sees), as git names
  it or where a link leads, or from a file such a file includes, is the agent's.
  What such an entry could do that a `-c` cannot undo is refused (HostGitError): a `url.*`
  rewrite (multi-valued), any `remote.*` (a promisor flag sticks); `fsck` severities it
  weakens are set back to errors, `core.sharedRepository` to your own value; everything
  else it may set is overridden above or never read by these subcommands. Every filter
  driver any of the config defines is emptied (`read-tree --reset` runs the clean filter
  `.gitattributes` names on a file the run changed);
- is bounded: git's own memory knobs (pack windows, delta cache, big files streamed, one
  thread, packs always indexed rather than exploded), an address-space limit on the process
  and its children (`ulimit -v` in a `sh` that then execs git: no shell ever parses an
  argument), a bound on what it prints (OUTPUT: held in flowerbox's own memory, where no
  `ulimit` of git's applies; a tree of a few KiB can list gigabytes), and a timeout; past
  either its process group is killed, with a message that says which.

The environment is the caller's minus every `GIT_*` variable (a repository, config or
command of someone else's) but the identity ones, and its PATH without relative entries or
folders in a git working tree (an activated `.venv/bin` of the project): `sh` and `git` are
never the agent's.

Errors:

    HostGitError              git could not run, ran past its time, or the workspace's
                              config holds what flowerbox cannot neutralize (the message
                              names the file and the fix)
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from flower import text
from flowerbox.errors import HostGitError

__all__ = ["ALLOWED", "MEMORY", "OUTPUT", "TIMEOUT", "HostGit", "HostGitError", "empty_hooks"]

TIMEOUT = 900.0
# Listing the configuration reads a few small files: far past this, a file it includes is
# not a file (a FIFO the run left in place of a tracked, included `.gitconfig` holds git's
# read until a writer comes) and no git is run there.
CONFIG_TIMEOUT = 30.0
MEMORY = 1 << 30  # the address space of one git process (and each of its children)
OUTPUT = 128 << 20  # what one call may print, stdout and stderr, held in flowerbox's memory
# The subcommands flowerbox runs: reads, ref updates, fetch/push, notes; nothing that checks
# out, merges or prints a patch (those would consult attribute-named drivers).
ALLOWED = frozenset(
    {
        "cat-file", "check-ref-format", "clone", "commit-tree", "config", "diff", "diff-index",
        "fetch", "for-each-ref", "index-pack", "init", "ls-files", "ls-remote", "ls-tree",
        "merge-base", "mktree", "notes", "push", "read-tree", "rev-list", "rev-parse",
        "show-ref", "symbolic-ref", "update-ref", "var", "worktree",
    }
)  # fmt: skip
# Subcommands allowed only in a form that checks nothing out: one of these arguments present.
ONLY_WITH = {"clone": ("--mirror", "--bare"), "worktree": ("list",)}
# Read after every file and include: each wins over what any config says.
SETTINGS = (
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
    ("core.alternateRefsCommand", "true"),  # lists no refs (an empty value would run "")
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.pager", "cat"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("core.attributesFile", os.devnull),
    ("diff.orderFile", os.devnull),  # a FIFO or /dev/zero there held `diff` to its bounds
    ("credential.helper", ""),  # the empty value resets the list
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("fetch.writeCommitGraph", "false"),
    ("submodule.recurse", "false"),
    # memory: pack windows, the delta base cache, big files streamed, one thread
    ("core.packedGitLimit", "256m"),
    ("core.packedGitWindowSize", "32m"),
    ("core.deltaBaseCacheLimit", "32m"),
    ("core.bigFileThreshold", "64m"),
    ("pack.windowMemory", "64m"),
    ("pack.deltaCacheSize", "32m"),
    ("pack.threads", "1"),
    ("transfer.unpackLimit", "1"),  # index-pack streams a pack; unpack-objects inflates
    ("fetch.unpackLimit", "1"),
)
# Identity may come from the caller's environment; every other GIT_* variable is dropped.
KEPT_ENV = re.compile(r"GIT_(AUTHOR|COMMITTER)_(NAME|EMAIL|DATE)")
ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",  # an empty one is no askpass (and SSH_ASKPASS is not looked at)
    "GIT_PAGER": "cat",
    "GIT_EDITOR": ":",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_TRACE2": "0",
    "GIT_TRACE2_EVENT": "0",
    "GIT_TRACE2_PERF": "0",
    "GIT_PROTOCOL_FROM_USER": "0",
}
# In the user's repository, a missing object is not fetched from a promisor remote (whose
# uploadpack is a command); a repository of flowerbox's own (the broker's partial clone) may.
NO_LAZY_FETCH = {"GIT_NO_LAZY_FETCH": "1"}
DROPPED_ENV = ("SSH_ASKPASS", "EDITOR", "VISUAL", "PAGER")
# What a config file in the working tree may not set: a url rewrite is multi-valued, a
# remote's promisor flag sticks once read (git older than 2.39.4 ignores GIT_NO_LAZY_FETCH):
# no -c undoes either.
REFUSED = re.compile(r"(url|remote)\..*")
# What it may weaken and a -c sets back: fsck severities, skip lists, the checks themselves.
FSCK = re.compile(r"((fetch|receive)\.)?fsck\.[^.]+|(fetch|transfer|receive)\.fsckobjects")
# What it may set and a -c sets back to the user's own value (or git's default): the mode of
# every ref, object and index file git writes (0666 would let every user of the machine in).
YOURS = {"core.sharedrepository": "umask"}
# A filter driver: `.gitattributes`, which the box writes, names one for any path, and
# `read-tree --reset` runs its clean command on a file whose stat data changed. Every one
# the config defines, yours too (its command may lie in the working tree), is emptied.
FILTER = re.compile(r"filter\.(.+)\.[^.]+")
INCLUDE = re.compile(r"include\.path|includeif\..*\.path")  # the keys that include a file
SHOWN = 200  # characters of a command shown in an error


@dataclass(frozen=True)
class _Entry:
    """A setting git read from a file: the file (resolved), and whether the agent may have
    written it: it lies in the working tree (as git names it, or where that leads), or a
    file of the agent's includes it (a chain to the box's shadow git directory, to
    `/proc/self/cwd/...`)."""

    path: Path
    key: str
    value: str
    agents: bool


@dataclass(frozen=True)
class HostGit:
    """git on the host, hardened as the module says. `hooks` is an empty folder of
    flowerbox's own (`empty_hooks`); `protocols`, the transports a fetch may use; `env`,
    variables set last (a caller's credential header, a private HOME)."""

    hooks: Path
    protocols: tuple[str, ...] = ("file",)
    memory: int = MEMORY
    output: int = OUTPUT
    timeout: float = TIMEOUT
    env: Mapping[str, str] = field(default_factory=dict)

    def run(
        self,
        *args: str,
        workspace: Path | None = None,
        repo: Path | None = None,
        stdin: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """git `args` (optionally `-c k=v` pairs, then a subcommand of ALLOWED) in `repo`
        (a repository of flowerbox's), or in `workspace` (the user's, whose working tree
        the box wrote: its config is checked first), else in no repository.

        Raises:
            HostGitError: git could not run or timed out, the subcommand is not one
                flowerbox runs, or the workspace's config cannot be neutralized.
        """
        command = _subcommand(args)
        where: tuple[str, ...] = ()
        overrides: list[str] = []
        if workspace is not None:
            where = ("-C", str(workspace))
            overrides = self._neutralize(workspace)
        elif repo is not None:
            where = ("-C", str(repo))
        if command == "diff":
            at = args.index("diff") + 1
            args = (*args[:at], "--no-ext-diff", "--no-textconv", *args[at:])
        argv = ["git", *where, *self._settings(), *overrides, *args]
        return self._spawn(argv, stdin, theirs=workspace is not None)

    def _settings(self) -> list[str]:
        pairs = [("core.hooksPath", str(self.hooks)), *SETTINGS]
        return [part for key, value in pairs for part in ("-c", f"{key}={value}")]

    def in_tree(self, workspace: Path) -> list[Path]:
        """What your own git in `workspace` reads or runs from its working tree, which the box
        writes: config files included from there, and the hooks folder when `core.hooksPath`
        lies there (husky's `.husky/_`, a relative path in ~/.gitconfig). flowerbox's calls
        use neither; your next `git commit` does, so the run reports what changed in them."""
        top = workspace.resolve()
        entries = self._config(workspace)
        found = {entry.path for entry in entries if _in(entry.path, top)}
        hooks = [entry.value for entry in entries if entry.key == "core.hookspath"]
        if hooks and _in(where := (top / Path(hooks[-1]).expanduser()).resolve(), top):
            found.add(where)
        return sorted(found)

    def _config(self, workspace: Path) -> list[_Entry]:
        """Each setting git reads in `workspace` from a file, in the order git reads them."""
        try:
            listed = self._spawn(
                ["git", "-C", str(workspace), *self._settings(), "config", "--list",
                 "--show-origin", "-z"], None, theirs=True, timeout=CONFIG_TIMEOUT,
            )  # fmt: skip
        except _TimedOut as exc:
            seconds = f"{CONFIG_TIMEOUT:.0f}"
            raise HostGitError(
                text("hostgit.config_timeout", workspace=workspace, seconds=seconds)
            ) from exc
        if listed.returncode != 0:
            return []  # not a repository (yet): the call itself says so
        tops = (Path(os.path.abspath(workspace)), workspace.resolve())
        theirs: set[str] = set()  # files the agent's files include
        found = []
        for origin, key, value in _entries(listed.stdout):
            named = os.path.normpath(os.path.join(tops[0], origin))  # as git opened it
            path = Path(named).resolve()
            agents = named in theirs or any(_in(p, t) for p in (Path(named), path) for t in tops)
            if agents and INCLUDE.fullmatch(key):
                theirs.add(os.path.normpath(os.path.join(tops[0], _included(origin, value))))
            found.append(_Entry(path, key, value, agents))
        return found

    def _neutralize(self, workspace: Path) -> list[str]:
        """`-c` settings that undo what config the agent may have written weakens; raises
        for what none can undo."""
        out: list[str] = []
        yours: dict[str, str] = {}  # the user's own value of each key in YOURS
        filters: set[str] = set()
        for entry in self._config(workspace):
            key = entry.key
            if named := FILTER.fullmatch(key):
                filters.add(named[1])
            if key in YOURS and not entry.agents:
                yours[key] = entry.value
            if not entry.agents:
                continue
            if key in YOURS:
                out += ["-c", f"{key}={yours.get(key, YOURS[key])}"]  # last: your value wins
            if REFUSED.fullmatch(key):
                section = key.split(".")[0]
                raise HostGitError(
                    text("hostgit.refused_key", path=entry.path, key=key, section=section)
                )
            if FSCK.fullmatch(key):
                out += ["-c", f"{key}={_strict(key)}"]
        return out + _no_filters(filters)

    def _spawn(
        self, argv: list[str], stdin: str | None, *, theirs: bool, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv`, bounded (`timeout`, else the runner's); `theirs`: in the user's
        repository."""
        timeout = self.timeout if timeout is None else min(timeout, self.timeout)
        env = self._environment() | (NO_LAZY_FETCH if theirs else {})
        if shutil.which("git", path=env["PATH"]) is None:
            raise HostGitError(text("hostgit.no_git"))
        limited = ["sh", "-c", 'ulimit -v "$0" && exec "$@"', str(self.memory // 1024), *argv]
        try:
            process = subprocess.Popen(
                limited,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # its children die with it on a timeout
            )
        except OSError as exc:
            raise HostGitError(
                text("hostgit.could_not_run", command=_named(argv), problem=exc)
            ) from exc
        try:
            out, err = _collect(process, stdin, self.output, timeout)
        except _Overran as exc:
            with contextlib.suppress(ProcessLookupError):  # the group may be gone already
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            why = (
                text("hostgit.why_output", mib=self.output >> 20)
                if exc.args[0] == "output"
                else text("hostgit.why_time", seconds=f"{timeout:.0f}")
            )
            error = _TimedOut if exc.args[0] == "time" else HostGitError
            raise error(text("hostgit.overran", command=_named(argv), why=why)) from exc
        finally:
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
        return subprocess.CompletedProcess(argv, process.returncode, out, err)

    def _environment(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if (not k.startswith("GIT_") or KEPT_ENV.fullmatch(k)) and k not in DROPPED_ENV
        }
        env |= ENV
        env["PATH"] = _trusted_path(env.get("PATH", os.defpath))
        env["GIT_ALLOW_PROTOCOL"] = ":".join(self.protocols)
        env |= self.env
        return env


class _TimedOut(HostGitError):
    """git ran past its time."""


class _Overran(Exception):
    """git went past a bound: "output" or "time"."""


def _collect(
    process: subprocess.Popen[bytes], stdin: str | None, limit: int, timeout: float
) -> tuple[str, str]:
    """What `process` prints on stdout and stderr until it exits, `stdin` fed to it: at most
    `limit` bytes in all (held in flowerbox's memory, which no `ulimit` of git's bounds),
    within `timeout` seconds.

    Raises:
        _Overran: past either bound (the process still runs).
    """
    assert process.stdout is not None and process.stderr is not None
    if stdin is not None:
        threading.Thread(target=_feed, args=(process.stdin, stdin.encode()), daemon=True).start()
    held: dict[int, list[bytes]] = {process.stdout.fileno(): [], process.stderr.fileno(): []}
    deadline, total = time.monotonic() + timeout, 0
    with selectors.DefaultSelector() as pipes:
        for fd in held:
            pipes.register(fd, selectors.EVENT_READ)
        while pipes.get_map():
            if (left := deadline - time.monotonic()) <= 0:
                raise _Overran("time")
            for key, _ in pipes.select(left):
                chunk = os.read(key.fd, 1 << 16)
                total += len(chunk)
                if total > limit:
                    raise _Overran("output")
                if chunk:
                    held[key.fd].append(chunk)
                else:
                    pipes.unregister(key.fd)
    try:
        process.wait(max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired as exc:
        raise _Overran("time") from exc
    out, err = (b"".join(held[p.fileno()]) for p in (process.stdout, process.stderr))
    return out.decode(errors="surrogateescape"), err.decode(errors="surrogateescape")


def _feed(pipe: IO[bytes], data: bytes) -> None:
    """`data` to git's stdin, which git may close early (it read what it needed)."""
    with contextlib.suppress(OSError), pipe:
        pipe.write(data)


def empty_hooks(parent: Path) -> Path:
    """`parent`/no-hooks: an empty folder (0555) that core.hooksPath names; anything found
    in it is removed first (only flowerbox's own state holds it).

    Raises:
        HostGitError: it cannot be made.
    """
    folder = parent / "no-hooks"
    try:
        if folder.is_symlink():
            folder.unlink()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if any(folder.iterdir()):
            folder.chmod(0o700)
            shutil.rmtree(folder)
            folder.mkdir(mode=0o700)
        folder.chmod(0o555)
    except OSError as exc:
        raise HostGitError(text("hostgit.hooks", folder=folder, problem=exc)) from exc
    return folder


def _trusted_path(path: str) -> str:
    """`path` (a PATH) without the folders the agent may have written: a relative entry (an
    empty one is the current folder) and any folder in a git working tree (the project's
    activated `.venv/bin`, a direnv `node_modules/.bin`). `sh`, `git` and what git starts
    are looked up in the rest; git's own programs come first anyway (its exec path)."""
    kept = [e for e in path.split(os.pathsep) if os.path.isabs(e) and not _in_work_tree(e)]
    return os.pathsep.join(kept)


def _in_work_tree(folder: str) -> bool:
    where = Path(folder).resolve()
    return any(os.path.lexists(up / ".git") for up in (where, *where.parents))


def _subcommand(args: tuple[str, ...]) -> str:
    at = 0
    while at < len(args) and args[at] == "-c":
        at += 2
    command = args[at] if at < len(args) else ""
    needed = ONLY_WITH.get(command)
    if command not in ALLOWED or (needed and not set(needed) & set(args[at + 1 :])):
        raise HostGitError(text("hostgit.form", command=command))
    return command


def _entries(listed: str) -> list[tuple[str, str, str]]:
    """(origin file, key, value) of each `config --list --show-origin -z` entry read from a
    file (not the command line)."""
    parts = listed.split("\0")
    found = []
    for origin, entry in zip(parts[0::2], parts[1::2], strict=False):
        if origin.startswith("file:"):
            key, _, value = entry.partition("\n")
            found.append((origin[5:], key.lower(), value))
    return found


def _no_filters(names: set[str]) -> list[str]:
    """`-c` settings that empty each filter driver: git runs no empty command, and a
    required filter that ran none is no error once it is not required."""
    if any("=" in name for name in names):
        raise HostGitError(text("hostgit.filter_eq"))
    parts = ("clean=", "smudge=", "process=", "required=false")
    return [
        arg for name in sorted(names) for part in parts for arg in ("-c", f"filter.{name}.{part}")
    ]


def _included(origin: str, value: str) -> str:
    """The file an include in `origin` names, as git names it: `~` is the home, a relative
    path is relative to the including file's folder."""
    if value.startswith("~"):
        return os.path.expanduser(value)
    return os.path.join(os.path.dirname(origin), value)


def _in(path: Path, top: Path) -> bool:
    """Inside the working tree `top`, but not its `.git` (which the box never sees)."""
    return path.is_relative_to(top) and not path.is_relative_to(top / ".git")


def _strict(key: str) -> str:
    """The value that undoes a weakened fsck setting."""
    if key.endswith("skiplist"):
        return os.devnull
    return "true" if key.endswith("fsckobjects") else "error"


def _named(argv: list[str]) -> str:
    """The subcommand and what follows it, for a message."""
    at = next((i for i, a in enumerate(argv) if a in ALLOWED), len(argv))
    return " ".join(argv[at : at + 3])[:SHOWN]
