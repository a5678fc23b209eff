"""The box's git directory: a shadow of the user's, brought back as data (issue 15, C1/H3).

    kind = layout(workspace)            # "dir": shadowed; "file": mounted read-only; "none"
    shadow = make(workspace, dest, objects_in_box="/run/flowerbox-objects")   # if "dir"
    # flowerbox.box.spec mounts S at <ws>/.git rw and the user's objects read-only
    t0 = time.time()                    # then the box runs, and stops
    moved = quarantine(workspace, since=t0, run_id=run_id, start_layout=kind)  # first
    result = bring_back(shadow, run_id=run_id)     # branches -> flowerbox/<run id>/<name>
                                        # (flower's flower/<id>: its own name, never forced)
    print(*moved.lines(), *result.lines(), sep="\n")

`quarantine` comes before any other git the host runs in the workspace after a run (in a
workspace that had no `.git`, the box may have made one at the top).

The box never sees the user's git directory. It works on a *shadow gitdir* S (copies of HEAD,
config, index, refs, hooks; an empty objects/ whose alternates name the user's objects,
mounted read-only), mounted over `<workspace>/.git`, so it cannot be renamed or replaced from
inside. After the run S is hostile data: the host never runs git with S as a repository and
never reads its config, hooks or alternates. It reads S's branches as bytes (no symlink
followed in any component, regular files only, bounded, validated), copies S's objects into a
bare repository T it made itself, and fetches from T into the user's repository with
`fetch.fsckObjects`. What git the box made elsewhere in the workspace (a nested `.git`, a
worktree's `.git` file, a bare-looking folder) is renamed aside by `quarantine`, so the user's
own later `git status` finds the top repository, never the agent's config.

Left out of S, on purpose: `logs/` (reflogs: large, and nothing the box needs), `worktrees/`
(the user's linked worktrees: their paths are host paths; the box must not prune them),
`modules/` (submodule gitdirs: each would need a shadow of its own; submodules do not work in
the box), `lfs/` (large files are fetched over the network the box does not have), and the
state of an operation in progress (MERGE_HEAD, rebase-*, ...): a run starts from a quiet state.

Errors:

    GitShadowError            the workspace's git cannot be shadowed (bare, reftable, a
                              `.git` symlink, a linked gitdir) or git itself failed on the
                              host's side; the message names the value and the fix

Nothing the box wrote ever raises: a bad ref, object or name is skipped and reported in
`BroughtBack.skipped`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import os
import re
import shlex
import shutil
import stat
import struct
import subprocess
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from flower import printable, text
from flowerbox.box import state
from flowerbox.box.untrusted import open_dir, open_file
from flowerbox.errors import GitShadowError, HostGitError, UntrustedFileError

__all__ = [
    "BroughtBack",
    "GitShadowError",
    "Layout",
    "Quarantined",
    "Shadow",
    "Skipped",
    "bring_back",
    "layout",
    "make",
    "quarantine",
]

Layout = Literal["dir", "file", "none"]
PREFIX = "flowerbox"  # the user gets refs/heads/flowerbox/<run id>/<box branch>
# flower's delivery branch, flower/<flower's run id> (flower.core.worktrees): it comes back
# under its own name when that makes a new branch or fast-forwards one of flower's own
DELIVERY = re.compile(r"flower/[0-9]{8}-[0-9]{6}-[0-9a-f]{6}")
WORKER_WORKTREES = (("runs", "worktrees"), (".claude", "worktrees"))  # flower's, the CLI's
SHOWN_FILES = 10
MAX_REF_BYTES = 4096  # a loose ref or HEAD: a hash and a newline
MAX_PACKED_REFS = 64 << 20
MAX_REFS = 10_000  # branches read from S; more are skipped and reported
MAX_BROUGHT = 500  # new or moved branches brought back (each costs a few git processes)
MAX_OBJECT_BYTES = 4 << 30  # what bring_back copies out of S/objects, in total
MAX_LOOSE_OBJECT = 512 << 20  # git packs bigger files at once (core.bigFileThreshold)
CHUNK = 1 << 20  # what a loose object is inflated by, at most, at a time
PACK_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
MAX_ENTRIES = 1_000_000  # what quarantine looks at in the workspace
CTIME_SLACK = 0.1  # the kernel's file clock is coarser than time.time()
# Where git keeps an operation in progress: never fast-forward under one.
BUSY = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "rebase-apply")
# What, changed in a nested git directory, can run code or redirect git on the host.
SENSITIVE = ("config", "config.worktree", "commondir", "gitdir", "HEAD", "hooks", "objects")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}")
RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class Shadow:
    """A shadow gitdir and the user's repository as it was when the shadow was made."""

    workspace: Path
    gitdir: Path  # S: mounted read-write at <workspace>/.git
    objects: Path  # the user's objects dir: mounted read-only at objects_in_box
    objects_in_box: str
    alternates: tuple[Path, ...]  # the user's own alternates, mounted read-only where they are
    object_format: str  # "sha1" or "sha256"
    branches: dict[str, str]  # refs/heads/<name> -> sha at the start
    head_branch: str | None  # HEAD's branch at the start (None: detached)
    head_sha: str | None  # HEAD's commit at the start (None: unborn)
    index_clean: bool  # the user's index matched HEAD at the start (nothing staged)


@dataclass(frozen=True)
class Skipped:
    """Something of the box's that did not come back, and why."""

    what: str
    why: str


@dataclass(frozen=True)
class Work:
    """The run's work on a delivery branch, as the user's repository holds it now."""

    ref: str  # where it came back: its own name, or under the run's prefix
    commits: int  # since the checkout's HEAD at the start
    files: tuple[str, ...]
    apply: str  # the command that merges it into the checkout

    def lines(self) -> list[str]:
        shown = ", ".join(self.files[:SHOWN_FILES])
        more = f" and {len(self.files) - SHOWN_FILES} more" if len(self.files) > SHOWN_FILES else ""
        return [
            f"the run's work is on {self.ref}: {self.commits} commit(s), "
            f"{len(self.files)} file(s): {shown}{more}",
            f"  apply it: {self.apply}",
        ]


@dataclass(frozen=True)
class BroughtBack:
    """What bring_back did: `branches` maps each box branch to the user's ref holding it
    (`ref(name)`: the run's prefix, except for the `delivered` ones, under their own name)."""

    run_id: str
    branches: dict[str, str] = field(default_factory=dict)  # box name -> sha
    fast_forwarded: str | None = None  # the user's branch moved to the box's commit
    note: str | None = None  # why the user's branch was not moved, or its index not reset
    skipped: tuple[Skipped, ...] = ()
    delivered: tuple[str, ...] = ()  # delivery branches that came back under their own name
    work: tuple[Work, ...] = ()  # what each delivery branch holds

    def ref(self, name: str) -> str:
        return name if name in self.delivered else f"{PREFIX}/{self.run_id}/{name}"

    def lines(self) -> list[str]:
        """What the CLI prints at the end of a run: where the results are."""
        out = [line for work in self.work for line in work.lines()]
        others = sorted(n for n in self.branches if not DELIVERY.fullmatch(n))
        if others:
            shown = [
                f"{self.ref(n)} (fast-forwarded {n})" if n == self.fast_forwarded else self.ref(n)
                for n in others
            ]
            out.append(f"the run's branches: {', '.join(shown)}")
            first = self.ref(others[0])
            out.append(f"  see them with `git log {first}` (or `git branch --list '{PREFIX}/*'`)")
        elif not self.branches:
            out.append("the run made no new commits on any branch")
        if self.note:
            out.append(f"  {self.note}")
        out.extend(f"  not brought back: {s.what}: {s.why}" for s in self.skipped)
        return [printable(line, one_line=True) for line in out]


@dataclass(frozen=True)
class Quarantined:
    """What quarantine renamed aside; `complete` is False when a folder could not be read or
    renamed in, or the walk hit its cap."""

    moved: tuple[Path, ...]
    complete: bool = True

    def lines(self) -> list[str]:
        workers = [p for p in self.moved if _in_worker_worktree(p)]
        out = [
            f"git metadata the run made, renamed aside (git ignores it): {p}"
            for p in self.moved
            if p not in workers
        ]
        if workers:  # flower's own worker worktrees: expected, said once
            out.append(
                f"the workers' {len(workers)} worktree(s) left by a stopped run keep their "
                "files; their git links were set aside (what they committed is on the branches "
                "below)"
            )
        if not self.complete:
            out.append(
                "not every folder could be checked for git metadata the run made (too many "
                "entries, or one unreadable): look for new .git entries before using git there"
            )
        return [printable(line, one_line=True) for line in out]


def _in_worker_worktree(path: Path) -> bool:
    parts = path.parts
    return any(parts[i : i + 2] in WORKER_WORKTREES for i in range(len(parts) - 1))


# -- host git ---------------------------------------------------------------------------------


def _git(
    *args: str, workspace: Path | str | None = None, repo: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """git through flowerbox.hostgit: in the user's `workspace`, in a `repo` of the host's
    own (T), or in none."""
    try:
        where = Path(workspace) if workspace is not None else None
        return state.host_git().run(*args, workspace=where, repo=repo)
    except HostGitError as exc:
        raise GitShadowError(str(exc)) from exc


def _said(done: subprocess.CompletedProcess[str]) -> str:
    """git's complaint on one line, bounded (it may quote what the box wrote)."""
    return _shown(" ".join(done.stderr.split())[-300:], limit=300)


def _must(*args: str, workspace: Path | str | None = None, repo: Path | None = None) -> str:
    done = _git(*args, workspace=workspace, repo=repo)
    if done.returncode != 0:
        said = done.stderr.strip()
        raise GitShadowError(text("hostgit.failed", args=" ".join(args[:4]), said=said))
    return done.stdout


# -- make -------------------------------------------------------------------------------------


def layout(workspace: Path) -> Layout:
    """What `<workspace>/.git` is: "dir" (shadowed), "file" (a linked worktree or a
    submodule: the caller mounts it read-only and refuses worktree isolation) or "none".
    A `.git` symlink or special file raises: it cannot be shadowed safely."""
    try:
        mode = os.lstat(workspace / ".git").st_mode
    except FileNotFoundError:
        return "none"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    raise GitShadowError(
        text("gitshadow.not_dir_or_file", path=workspace / ".git"), path=workspace / ".git"
    )


def make(workspace: Path, dest: Path, *, objects_in_box: str) -> Shadow:
    """Build the shadow gitdir in `dest` (an empty or new host folder outside the workspace,
    mounted read-write at `<workspace>/.git`). Raises GitShadowError, before writing anything, when
    the workspace's git is not a plain repository at its top; on a later failure the caller
    removes `dest`."""
    git_dir = workspace / ".git"
    if layout(workspace) != "dir":
        raise GitShadowError(text("gitshadow.nothing_to_shadow", git_dir=git_dir), path=git_dir)
    _check_plain(workspace, git_dir)
    if not objects_in_box.startswith("/") or os.path.normpath(objects_in_box) != objects_in_box:
        raise GitShadowError(text("gitshadow.objects_in_box", path=repr(objects_in_box)))
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise GitShadowError(text("gitshadow.dest_not_empty", dest=dest), path=dest)
    object_format = _git("rev-parse", "--show-object-format", workspace=workspace).stdout.strip()
    objects = git_dir / "objects"
    alternates = _alternates(objects)
    _copy_metadata(git_dir, dest)
    (dest / "objects" / "info").mkdir(parents=True)
    (dest / "objects" / "pack").mkdir()
    lines = [objects_in_box, *map(str, alternates)]
    (dest / "objects" / "info" / "alternates").write_text("".join(f"{x}\n" for x in lines))
    head_branch, head_sha = _head(workspace)
    return Shadow(
        workspace=workspace,
        gitdir=dest,
        objects=objects,
        objects_in_box=objects_in_box,
        alternates=alternates,
        object_format=object_format or "sha1",
        branches=_branches(workspace),
        head_branch=head_branch,
        head_sha=head_sha,
        index_clean=_index_clean(workspace, head_sha),
    )


def _check_plain(workspace: Path, git_dir: Path) -> None:
    """A repository whose gitdir is `<workspace>/.git`, not bare, with files refs."""
    if (git_dir / "commondir").exists():
        raise GitShadowError(text("gitshadow.commondir", git_dir=git_dir), path=git_dir)
    found = _git("rev-parse", "--absolute-git-dir", "--is-bare-repository", workspace=workspace)
    if found.returncode != 0:
        said = found.stderr.strip()
        raise GitShadowError(text("gitshadow.unreadable", git_dir=git_dir, said=said), path=git_dir)
    gitdir, bare = found.stdout.splitlines()
    if bare == "true" or Path(gitdir).resolve() != git_dir.resolve():
        raise GitShadowError(
            text("gitshadow.bare", workspace=workspace, gitdir=gitdir), path=git_dir
        )
    storage = _git("config", "--get", "extensions.refStorage", workspace=workspace).stdout.strip()
    if storage and storage != "files":
        raise GitShadowError(
            text("gitshadow.ref_storage", workspace=workspace, storage=repr(storage)),
            path=git_dir,
        )


def _alternates(objects: Path) -> tuple[Path, ...]:
    """The user's own alternates (absolute, existing): the box needs them mounted too."""
    try:
        text = (objects / "info" / "alternates").read_text()
    except FileNotFoundError:
        return ()
    paths = (objects / line.strip() for line in text.splitlines() if line.strip()[:1] not in "#")
    return tuple(p.resolve() for p in paths if p.is_dir())


def _copy_metadata(git_dir: Path, dest: Path) -> None:
    """The user's own metadata (trusted: the box never wrote it), minus what is left out."""
    for name in ("HEAD", "config", "config.worktree", "index", "packed-refs", "shallow"):
        if (git_dir / name).is_file():
            shutil.copy2(git_dir / name, dest / name)
    for shared in git_dir.glob("sharedindex.*"):
        shutil.copy2(shared, dest / shared.name)
    for name in ("refs", "info", "hooks"):
        if (git_dir / name).is_dir():
            shutil.copytree(git_dir / name, dest / name, symlinks=True)
    (dest / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    (dest / "refs" / "tags").mkdir(exist_ok=True)
    description = git_dir / "description"
    (dest / "description").write_bytes(description.read_bytes() if description.is_file() else b"")


def _branches(workspace: Path) -> dict[str, str]:
    out = _must(
        "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/", workspace=workspace
    )
    pairs = (line.split(" ", 1) for line in out.splitlines())
    return {ref.removeprefix("refs/heads/"): sha for sha, ref in pairs}


def _head(workspace: Path) -> tuple[str | None, str | None]:
    symbolic = _git("symbolic-ref", "-q", "HEAD", workspace=workspace).stdout.strip()
    sha = _git("rev-parse", "-q", "--verify", "HEAD^{commit}", workspace=workspace).stdout
    return (symbolic.removeprefix("refs/heads/") or None), (sha.strip() or None)


def _index_clean(workspace: Path, head_sha: str | None) -> bool:
    """Nothing staged: the index is HEAD's tree (or empty on an unborn branch)."""
    if head_sha is None:
        return _git("ls-files", "--stage", workspace=workspace).stdout == ""
    check = ("diff-index", "--cached", "--quiet", head_sha, "--")
    return _git(*check, workspace=workspace).returncode == 0


# -- reading what the box wrote ---------------------------------------------------------------


class _TooBig(UntrustedFileError):
    """A file past the bytes left to read."""


def _read(root: Path, relative: str, limit: int) -> bytes | None:
    """A regular file the box wrote (None: missing), opened without following a link in any
    component or blocking on a FIFO, refused (UntrustedFileError) past `limit` bytes."""
    with open_file(root, relative) as fd:
        if fd is None:
            return None
        size = os.fstat(fd).st_size
        if size > limit:
            raise _TooBig(root / relative, text("untrusted.too_big", size=size, limit=limit))
        data = os.pread(fd, size + 1, 0)
    if len(data) > size:
        raise UntrustedFileError(root / relative, text("untrusted.grew"))
    return data


def _listing(root: Path, relative: str) -> list[tuple[str, bool]]:
    """(name, is a real folder) of each entry of a folder the box wrote (no link followed)."""
    with open_dir(root, relative) as fd, os.scandir(fd) as entries:
        return [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]


@dataclass
class _BoxRefs:
    """S's branches and HEAD as read (names not yet checked by git)."""

    branches: dict[str, str] = field(default_factory=dict)
    head: str | None = None  # "refs/heads/<name>" or a hash
    skipped: list[Skipped] = field(default_factory=list)


def _box_refs(gitdir: Path, hex_re: re.Pattern[str]) -> _BoxRefs:
    found = _BoxRefs()
    found.head = _box_head(gitdir, hex_re, found.skipped)
    try:
        packed = _read(gitdir, "packed-refs", MAX_PACKED_REFS)
    except OSError as exc:
        found.skipped.append(Skipped("packed-refs", str(exc)))
    else:
        _packed(packed or b"", hex_re, found)
    _loose(gitdir, "", hex_re, found)
    return found


def _box_head(gitdir: Path, hex_re: re.Pattern[str], skipped: list[Skipped]) -> str | None:
    try:
        text = (_read(gitdir, "HEAD", MAX_REF_BYTES) or b"").decode("ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        skipped.append(Skipped("HEAD", str(exc)))
        return None
    target = text.removeprefix("ref: ")
    if target != text and target.startswith("refs/heads/") and _good_name(target[11:]):
        return target
    if hex_re.fullmatch(text):
        return text
    skipped.append(Skipped("HEAD", f"neither a branch nor a hash: {_shown(text)}"))
    return None


def _packed(data: bytes, hex_re: re.Pattern[str], found: _BoxRefs) -> None:
    for raw in data.split(b"\n"):
        line = raw.decode("ascii", "replace")
        if not line or line[0] in "#^":
            continue
        sha, _, ref = line.partition(" ")
        if ref.startswith("refs/heads/"):
            _add(found, ref[11:], sha, hex_re)


def _loose(gitdir: Path, prefix: str, hex_re: re.Pattern[str], found: _BoxRefs) -> None:
    """refs/heads/<prefix>**: a loose ref overrides a packed one (it is read later)."""
    try:
        entries = _listing(gitdir, f"refs/heads/{prefix}")
    except OSError as exc:
        found.skipped.append(Skipped(f"refs/heads/{_shown(prefix)}", str(exc)))
        return
    for entry, is_dir in entries:
        name = prefix + entry
        if len(found.branches) >= MAX_REFS or name.count("/") > 20:
            found.skipped.append(Skipped(_shown(name), f"past {MAX_REFS} branches or 20 levels"))
            return
        if is_dir:
            _loose(gitdir, name + "/", hex_re, found)
            continue
        try:
            data = _read(gitdir, f"refs/heads/{name}", MAX_REF_BYTES) or b""
            _add(found, name, data.decode("ascii").strip(), hex_re)
        except (OSError, UnicodeDecodeError) as exc:
            found.skipped.append(Skipped(_shown(name), str(exc)))


def _add(found: _BoxRefs, name: str, sha: str, hex_re: re.Pattern[str]) -> None:
    """One branch, if its name and value are what git itself writes (a loose ref wins over a
    packed one: it is read later)."""
    if not _good_name(name):
        found.skipped.append(Skipped(_shown(name), "a branch name flowerbox does not accept"))
    elif not hex_re.fullmatch(sha):
        found.skipped.append(Skipped(_shown(name), f"not a commit hash: {_shown(sha)}"))
    else:
        found.branches[name] = sha


def _good_name(name: str) -> bool:
    """A strict subset of git's branch names (git check-ref-format runs on those brought
    back): no control characters, `..`, `-` or `.` leading a component, `.lock`, or HEAD."""
    parts = name.split("/")
    return (
        NAME.fullmatch(name) is not None
        and ".." not in name
        and name != "HEAD"
        and all(p and p[0] not in ".-" and not p.endswith((".lock", ".")) for p in parts)
    )


def _shown(text: str, *, limit: int = 80) -> str:
    """A box-made string, safe for a terminal (control characters escaped) and short."""
    return repr(text[:limit])[1:-1]


# -- bring_back -------------------------------------------------------------------------------


def bring_back(
    shadow: Shadow,
    *,
    run_id: str,
    max_bytes: int = MAX_OBJECT_BYTES,
    delivered_before: frozenset[str] = frozenset(),
) -> BroughtBack:
    """Bring the box's new and moved branches into the user's repository as
    `flowerbox/<run_id>/<name>` (a moved detached HEAD as `.../HEAD`), fast-forward the user's
    current branch where that is safe, then remove S. Call it after the box has stopped.

    A delivery branch (flower/<id>) comes back under its own name when that creates it, or
    fast-forwards one named in `delivered_before` (the ones this run, or a run it resumed,
    brought back: flowerbox's own records say which); never another run's (G2 of issue 37).

    S is read as data only: git never runs with S as its repository. What the box wrote that
    is not a well-formed branch or object is skipped and reported, never raised. Raises
    GitShadowError only for the host's side (a bad run id, a ref of the user's in the way,
    git failing on the user's repository); S is then kept for another try."""
    if not RUN_ID.fullmatch(run_id):
        raise GitShadowError(text("gitshadow.run_id", run_id=repr(run_id)))
    _check_prefix(shadow.workspace, run_id)
    hexlen = 64 if shadow.object_format == "sha256" else 40
    hex_re = re.compile(f"[0-9a-f]{{{hexlen}}}")
    found = _box_refs(shadow.gitdir, hex_re)
    skipped = found.skipped
    wanted = _wanted(shadow, found, skipped)
    branches: dict[str, str] = {}
    own: tuple[str, ...] = ()
    if wanted:
        with tempfile.TemporaryDirectory(prefix="flowerbox-bring-") as tmp:
            bare = Path(tmp) / "t.git"
            _make_bare(bare, shadow)
            _copy_objects(shadow.gitdir, bare, max_bytes, hexlen, skipped)
            staged = _stage_refs(bare, wanted, skipped)
            mine = (shadow.workspace, bare, staged, delivered_before)
            own = tuple(n for n in sorted(staged) if _delivered(n, *mine))
            branches = _fetch(shadow.workspace, bare, staged, run_id, own, skipped)
    forwarded, left = _fast_forward(shadow, found.head, branches, run_id)
    _remove(shadow.gitdir)
    done = BroughtBack(run_id, branches, forwarded, left, tuple(skipped), own)
    work = tuple(
        _work(shadow, done.ref(n), sha)
        for n, sha in sorted(branches.items())
        if DELIVERY.fullmatch(n)
    )
    return dataclasses.replace(done, work=work)


def _check_prefix(workspace: Path, run_id: str) -> None:
    """No ref of the user's sits where this run's branches go (a D/F conflict or a rerun)."""
    base = f"refs/heads/{PREFIX}/{run_id}"
    for ref in (f"refs/heads/{PREFIX}", base):
        if _git("show-ref", "--verify", "-q", ref, workspace=workspace).returncode == 0:
            raise GitShadowError(text("gitshadow.branch_in_way", branch=ref[11:], base=base[11:]))
    if _must("for-each-ref", "--count=1", "--format=x", base + "/", workspace=workspace):
        raise GitShadowError(text("gitshadow.brought_back", base=base[11:]))


def _wanted(shadow: Shadow, found: _BoxRefs, skipped: list[Skipped]) -> dict[str, str]:
    """New or moved branches whose names git accepts, and a detached HEAD on a commit that
    is on none of them and new to the user's repository."""
    moved = sorted(n for n, s in found.branches.items() if shadow.branches.get(n) != s)
    if len(moved) > MAX_BROUGHT:
        why = f"only the first {MAX_BROUGHT} of {len(moved)} new branches come back"
        skipped.append(Skipped(f"{len(moved) - MAX_BROUGHT} branches", why))
    wanted = {n: found.branches[n] for n in moved[:MAX_BROUGHT]}
    head = found.head or "refs/"
    if not head.startswith("refs/") and head != shadow.head_sha:
        known = ("cat-file", "-e", f"{head}^{{commit}}")
        if (
            head not in found.branches.values()
            and _git(*known, workspace=shadow.workspace).returncode != 0
        ):
            wanted["HEAD"] = head
    for name in [n for n in wanted if n != "HEAD"]:
        if _git("check-ref-format", f"refs/heads/{PREFIX}/x/{name}").returncode != 0:
            skipped.append(Skipped(name, "git check-ref-format refuses the name"))
            del wanted[name]
    return wanted


def _make_bare(bare: Path, shadow: Shadow) -> None:
    """T: a bare repository of the host's own, no hooks, whose objects fall back on the
    user's (so only S's new objects need copying)."""
    fmt = f"--object-format={shadow.object_format}"
    _must("init", "-q", "--bare", "--template=", fmt, str(bare))
    _must("config", "core.hooksPath", "/dev/null", repo=bare)
    (bare / "objects" / "info").mkdir(exist_ok=True)
    (bare / "objects" / "pack").mkdir(exist_ok=True)
    (bare / "objects" / "info" / "alternates").write_text(f"{shadow.objects.resolve()}\n")


def _copy_objects(
    gitdir: Path, bare: Path, budget: int, hexlen: int, skipped: list[Skipped]
) -> None:
    """S's objects into T, read as untrusted files, at most `budget` bytes in all: the packs
    as they are, the loose objects (checked to be git objects) into one pack of T's own,
    so T gets a few files rather than one per object. `git index-pack` then hashes every
    object and writes each index (S's indexes are never read); everything else in
    S/objects, its alternates too, is ignored."""
    packs = bare / "objects" / "pack"
    loose = _LoosePack(packs / "loose.pack", hexlen)
    for relative in _object_files(gitdir, hexlen, skipped):
        try:
            if relative.startswith("objects/pack/"):
                budget -= _copy(gitdir, relative, bare / relative, budget)
            else:
                budget -= loose.add(gitdir, relative, budget)
        except _TooBig:
            skipped.append(Skipped("objects", f"past {budget} bytes: the rest was not copied"))
            break
        except (OSError, ValueError) as exc:
            skipped.append(Skipped(relative, str(exc)))
    loose.close()
    for pack in sorted(packs.glob("*.pack")):
        done = _git("index-pack", str(pack), repo=bare)
        if done.returncode != 0:
            pack.unlink()
            skipped.append(Skipped(pack.name, f"git index-pack refused it: {_said(done)}"))


class _LoosePack:
    """A pack file of plain (undeltified) entries, one per loose object added."""

    def __init__(self, path: Path, hexlen: int) -> None:
        self.path, self.count = path, 0
        self.digest = "sha256" if hexlen == 64 else "sha1"
        self.out = path.open("wb")
        self.out.write(b"PACK" + struct.pack(">II", 2, 0))  # the count is set at close

    def add(self, root: Path, relative: str, budget: int) -> int:
        """Add the loose object `root/relative` (zlib of `<type> <size>\\0<content>`, read as
        `_read` does) as one entry, inflated and deflated a chunk at a time (a small file may
        inflate to gigabytes: the finding G3 of issue 37); returns its content's size.

        Raises:
            _TooBig: the file is larger than `budget`.
            ValueError: not a git object, or its content is larger than `budget` or
                MAX_LOOSE_OBJECT; nothing of it is left in the pack.
        """
        start = self.out.tell()
        try:
            with open_file(root, relative) as fd:
                if fd is None:
                    return 0
                if (size := os.fstat(fd).st_size) > budget:
                    too_big = text("untrusted.too_big", size=size, limit=budget)
                    raise _TooBig(root / relative, too_big)
                written = self._entry(_inflated(fd), min(budget, MAX_LOOSE_OBJECT))
        except BaseException:
            self.out.seek(start)
            self.out.truncate()
            raise
        self.count += 1
        return written

    def _entry(self, chunks: Iterator[bytes], limit: int) -> int:
        head = b""
        for chunk in chunks:  # the header is in the first chunk or two
            head += chunk
            if b"\0" in head or len(head) > 64:
                break
        header, found, rest = head.partition(b"\0")
        kind, _, size = header.partition(b" ")
        if not found or kind not in PACK_TYPES or not size.isdigit():
            raise ValueError("not a git object")
        if (declared := int(size)) > limit:
            raise ValueError(f"more than {limit} bytes inflated (its header says {declared})")
        self.out.write(_entry_header(PACK_TYPES[kind], declared))
        deflater, got = zlib.compressobj(1), 0
        for chunk in itertools.chain([rest], chunks):
            got += len(chunk)
            if got > declared:
                raise ValueError(f"not a git object: more than its header's {declared} bytes")
            self.out.write(deflater.compress(chunk))
        if got != declared:
            raise ValueError(f"not a git object: {got} bytes, not its header's {declared}")
        self.out.write(deflater.flush())
        return declared

    def close(self) -> None:
        """Set the count and append the checksum; an empty pack is removed."""
        self.out.seek(8)
        self.out.write(struct.pack(">I", self.count))
        self.out.close()
        if not self.count:
            self.path.unlink()
            return
        digest = hashlib.new(self.digest)
        with self.path.open("rb") as pack:
            while chunk := pack.read(1 << 20):
                digest.update(chunk)
        with self.path.open("ab") as pack:
            pack.write(digest.digest())


def _inflated(fd: int) -> Iterator[bytes]:
    """The zlib stream read from `fd`, inflated at most CHUNK bytes at a time.

    Raises:
        ValueError: not a zlib stream, or one cut short.
    """
    inflater = zlib.decompressobj()
    while not inflater.eof:
        data = inflater.unconsumed_tail or os.read(fd, CHUNK)
        if not data:
            raise ValueError("a zlib stream cut short")
        try:
            out = inflater.decompress(data, CHUNK)
        except zlib.error as exc:
            raise ValueError(f"not a zlib stream ({exc})") from exc
        yield out


def _entry_header(kind: int, size: int) -> bytes:
    """A pack entry's type and size: 4 bits of size, then 7 per byte, low bits first."""
    out = bytearray()
    byte, size = (kind << 4) | (size & 0x0F), size >> 4
    while size:
        out.append(byte | 0x80)
        byte, size = size & 0x7F, size >> 7
    out.append(byte)
    return bytes(out)


def _object_files(gitdir: Path, hexlen: int, skipped: list[Skipped]) -> list[str]:
    """objects/xx/<rest of the hash> and objects/pack/pack-<hash>.pack, relative to S."""
    loose = re.compile(f"[0-9a-f]{{{hexlen - 2}}}")
    pack = re.compile(f"pack-[0-9a-f]{{{hexlen}}}\\.pack")
    found: list[str] = []
    try:
        top = _listing(gitdir, "objects")
    except OSError as exc:
        skipped.append(Skipped("objects", str(exc)))
        return []
    for folder, is_dir in sorted(top):
        if not is_dir or not (re.fullmatch("[0-9a-f]{2}", folder) or folder == "pack"):
            continue
        try:
            names = [name for name, _ in _listing(gitdir, f"objects/{folder}")]
        except OSError as exc:
            skipped.append(Skipped(f"objects/{folder}", str(exc)))
            continue
        wanted = pack if folder == "pack" else loose
        found.extend(f"objects/{folder}/{n}" for n in sorted(names) if wanted.fullmatch(n))
    return found


def _copy(root: Path, relative: str, dest: Path, limit: int) -> int:
    """Copy a file the box wrote (read as `_read` does, in chunks: a pack may be large) to a
    new file of the host's; returns its size."""
    with open_file(root, relative) as fd:
        if fd is None:
            return 0
        size = os.fstat(fd).st_size
        if size > limit:
            raise _TooBig(root / relative, text("untrusted.too_big", size=size, limit=limit))
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(dest, flags, 0o444), "wb") as out:
            copied = 0
            while chunk := os.read(fd, min(1 << 20, size + 1 - copied)):
                copied += len(chunk)
                if copied > size:
                    raise UntrustedFileError(root / relative, text("untrusted.grew"))
                out.write(chunk)
    return copied


def _stage_refs(bare: Path, wanted: dict[str, str], skipped: list[Skipped]) -> dict[str, str]:
    """Each wanted branch as a ref of T (T's refs/heads/<name>; the detached HEAD as
    refs/flowerbox-head); update-ref refuses a missing object, a non-commit on a branch and a
    name that clashes with another (D/F)."""
    staged: dict[str, str] = {}
    for name, sha in sorted(wanted.items()):
        ref = "refs/flowerbox-head" if name == "HEAD" else f"refs/heads/{name}"
        done = _git("update-ref", ref, sha, repo=bare)
        if done.returncode != 0:
            skipped.append(Skipped(name, f"not a commit the box stored: {_said(done)}"))
            continue
        staged[name] = ref
    return staged


def _delivered(
    name: str, workspace: Path, bare: Path, staged: dict[str, str], before: frozenset[str]
) -> bool:
    """Fetch flower's delivery branch `name` under its own name: a new branch, or a
    fast-forward of one this run delivered `before` (a fetch without `+` never rewrites
    one); False for any other name, another run's delivery branch, or when git refuses (then
    it comes back under the run's prefix)."""
    if not DELIVERY.fullmatch(name):
        return False
    exists = _git("show-ref", "--verify", "-q", f"refs/heads/{name}", workspace=workspace)
    if exists.returncode == 0 and name not in before:
        return False
    return _fetch_specs(workspace, bare, [f"{staged[name]}:refs/heads/{name}"]) is None


def _fetch(
    workspace: Path,
    bare: Path,
    staged: dict[str, str],
    run_id: str,
    own: tuple[str, ...],
    skipped: list[Skipped],
) -> dict[str, str]:
    """Fetch T's refs (but the `own` ones, fetched already) into the user's repository with
    every object checked (fsck); when the whole fetch fails, each ref alone, so one bad
    branch does not keep the others out."""
    specs = {
        n: f"+{ref}:refs/heads/{PREFIX}/{run_id}/{n}" for n, ref in staged.items() if n not in own
    }
    if len(specs) and _fetch_specs(workspace, bare, list(specs.values())) is not None:
        for name, spec in specs.items():
            error = _fetch_specs(workspace, bare, [spec])
            if error is not None:
                skipped.append(Skipped(name, f"git fetch refused it: {error}"))
    names = {f"refs/heads/{PREFIX}/{run_id}/{n}": n for n in specs}
    names |= {f"refs/heads/{n}": n for n in own}
    out = _must(
        "for-each-ref",
        "--format=%(objectname) %(refname)",
        f"refs/heads/{PREFIX}/{run_id}/",
        *(f"refs/heads/{n}" for n in own),
        workspace=workspace,
    )
    pairs = (line.split(" ", 1) for line in out.splitlines())
    return {names[ref]: sha for sha, ref in pairs if ref in names}


def _work(shadow: Shadow, ref: str, sha: str) -> Work:
    """What a delivery branch holds over the checkout's HEAD at the start, read from the
    user's repository (its objects checked by the fetch), never from S."""
    ws = str(shadow.workspace)
    base = None
    if shadow.head_sha:
        found = _git("merge-base", shadow.head_sha, sha, workspace=ws)
        base = found.stdout.strip() if found.returncode == 0 else None
    span = f"{base}..{sha}" if base else sha
    commits = int(_must("rev-list", "--count", span, workspace=ws).strip() or 0)
    if base:
        listed = _must("diff", "--name-only", "-z", base, sha, workspace=ws)
    else:
        listed = _must("ls-tree", "-r", "--name-only", "-z", sha, workspace=ws)
    files = tuple(listed.split("\0")[:-1])
    apply = f"git -C {shlex.quote(ws)} merge {ref}"
    return Work(ref, commits, files, apply)


def _fetch_specs(workspace: Path, bare: Path, specs: list[str]) -> str | None:
    done = _git(
        "-c", "fetch.fsckObjects=true",
        "-c", "transfer.fsckObjects=true",
        "fetch", "--quiet", "--no-tags", "--no-prune", "--no-write-fetch-head",
        "--no-recurse-submodules", "--no-auto-maintenance", "--end-of-options", str(bare), *specs,
        workspace=workspace,
    )  # fmt: skip
    return None if done.returncode == 0 else _said(done)


def _fast_forward(
    shadow: Shadow, box_head: str | None, branches: dict[str, str], run_id: str
) -> tuple[str | None, str | None]:
    """Move the user's current branch B to the box's B, and the index with it (the working
    tree already holds the box's files), when B was checked out in both, only the box moved
    it, the box's B descends from it, and nothing was staged (at the start or now: moving
    HEAD under staged changes would make the next commit revert the run's work). Returns
    (the branch moved, or why it was left alone)."""
    name = shadow.head_branch
    if name is None or name not in branches:
        return None, None
    ws = str(shadow.workspace)
    old, new = shadow.head_sha, branches[name]
    why = None
    if box_head != f"refs/heads/{name}":
        why = "the box ended on another branch"
    elif _head(shadow.workspace) != (name, old):
        why = f"{name} or HEAD moved in your repository during the run"
    elif any((shadow.workspace / ".git" / busy).exists() for busy in BUSY):
        why = "a merge, rebase or cherry-pick is in progress in your repository"
    elif not (shadow.index_clean and _index_clean(shadow.workspace, old)):
        why = "your index has staged changes"
    elif old and _git("merge-base", "--is-ancestor", old, new, workspace=ws).returncode != 0:
        why = f"the box's {name} does not descend from yours"
    if why:
        return None, f"{name} not fast-forwarded: {why}; the run's is {PREFIX}/{run_id}/{name}"
    message = f"flowerbox: fast-forward to run {run_id}"
    _must(
        "update-ref", "-m", message, f"refs/heads/{name}", new, old or "0" * len(new), workspace=ws
    )
    # --reset (a one-way merge that ignores the working tree) keeps the stat data of
    # unchanged entries: the next `git status` does not re-hash every file
    done = _git("read-tree", "--reset", new, workspace=ws)
    if done.returncode != 0:
        return name, f"{name} moved, but the index was not reset ({_said(done)}): `git reset -q`"
    return name, None


def _remove(path: Path) -> None:
    """rmtree that no link the box made can redirect (shutil's fd-based walk) and that a
    folder the box made unreadable cannot stop."""
    if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover - Linux always has it
        raise GitShadowError(text("gitshadow.rmtree", path=path), path=path)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    for top, dirs, _files in os.walk(path):
        for name in dirs:
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(os.path.join(top, name)).st_mode):
                    os.chmod(os.path.join(top, name), 0o700)
    shutil.rmtree(path, ignore_errors=True)


# -- quarantine -------------------------------------------------------------------------------


def quarantine(
    workspace: Path,
    *,
    since: float,
    run_id: str,
    start_layout: Layout,
    max_entries: int = MAX_ENTRIES,
) -> Quarantined:
    """Rename aside (to `<name>.flowerbox-<run_id>`, in its own folder) the git metadata the
    box made or changed in the workspace, so no later git on the host uses it: every `.git`
    (dir, file or link) below the top whose sensitive parts (config, HEAD, hooks, commondir,
    gitdir, alternates, worktrees/ and modules/ gitdirs) changed since `since` (ctime: the box
    cannot set it back); the top `.git` when there was none at the start; and the HEAD of a
    folder that git would take for a bare repository. `since` is a time.time() taken before
    the box started. Symlinks are never followed; no `.git` is entered."""
    if not RUN_ID.fullmatch(run_id):
        raise GitShadowError(text("gitshadow.run_id", run_id=repr(run_id)))
    since -= CTIME_SLACK
    moved: list[Path] = []
    queue, seen, complete = [workspace], 0, True
    while queue and seen <= max_entries:
        folder = queue.pop()
        try:
            entries = _scan(folder)
            for target in _suspects(folder, entries, workspace, since, start_layout):
                moved.append(_aside(workspace, target, run_id))
        except OSError:
            complete = False
            continue
        seen += len(entries)
        queue.extend(
            Path(e.path) for e in entries if e.name != ".git" and e.is_dir(follow_symlinks=False)
        )
    return Quarantined(tuple(moved), complete=complete and not queue)


def _scan(folder: Path) -> list[os.DirEntry[str]]:
    """A folder's entries; one the box made unreadable (its own, so the user's) is given
    back u+rwx first: a `.git` hidden in it would still be found by git from below."""
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except PermissionError:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            raise
        os.chmod(folder, stat.S_IMODE(os.lstat(folder).st_mode) | 0o700)
        with os.scandir(folder) as entries:
            return list(entries)


def _suspects(
    folder: Path, entries: list[os.DirEntry[str]], top: Path, since: float, start: Layout
) -> list[Path]:
    names = {e.name: e for e in entries}
    found: list[Path] = []
    dotgit = names.get(".git")
    if dotgit is not None:
        if folder == top:
            if start == "none":
                found.append(Path(dotgit.path))
        elif _changed(folder, ".git", since):
            found.append(Path(dotgit.path))
    looks_bare = "HEAD" in names and ("commondir" in names or {"objects", "refs"} <= set(names))
    if looks_bare and _changed_gitdir(folder, since):
        found.append(folder / "HEAD")
    return found


def _changed(folder: Path, name: str, since: float) -> bool:
    """A `.git` made or changed in the run: a file or link by its own ctime, a folder by the
    ctimes of what in it can run code or redirect git (its own ctime moves on every commit)."""
    path = folder / name
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        return info.st_ctime >= since
    return _changed_gitdir(path, since)


def _changed_gitdir(gitdir: Path, since: float, depth: int = 0) -> bool:
    paths = [gitdir / n for n in SENSITIVE if n != "objects"]
    paths.append(gitdir / "objects" / "info" / "alternates")
    paths.extend(_children(gitdir / "hooks"))
    if any(_ctime(p) >= since for p in paths):
        return True
    nested = [*_children(gitdir / "worktrees"), *_children(gitdir / "modules")]
    return depth < 4 and any(
        _ctime(p) >= since or _changed_gitdir(p, since, depth + 1) for p in nested
    )


def _ctime(path: Path) -> float:
    try:
        return os.lstat(path).st_ctime
    except OSError:
        return float("-inf")


def _children(folder: Path) -> list[Path]:
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return []
        return [Path(e.path) for e in _scan(folder)][:1000]
    except OSError:
        return []


def _aside(top: Path, target: Path, run_id: str) -> Path:
    """Rename `target` to a free `<name>.flowerbox-<run_id>[-n]` through its parent's fd,
    each folder of the way opened without following a link."""
    with open_dir(top, target.parent.relative_to(top).as_posix()) as parent:
        for n in range(1000):
            new = f"{target.name}.flowerbox-{run_id}" + (f"-{n}" if n else "")
            try:
                os.lstat(new, dir_fd=parent)
            except FileNotFoundError:
                os.rename(target.name, new, src_dir_fd=parent, dst_dir_fd=parent)
                return target.parent / new
    raise GitShadowError(text("gitshadow.no_free_name", target=target), path=target)
