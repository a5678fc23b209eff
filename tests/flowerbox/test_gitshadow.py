"""flowerbox.box.gitshadow with real git on the host: the box is played by git run with the shadow
as its gitdir (`--git-dir=S --work-tree=WS`); an attack plants what an agent could write in S
or the workspace, and the test asserts that bring_back, quarantine and the user's own
`git status` / `git commit` / `git log` afterwards never run it (the marker never appears)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowerbox import hostgit
from flowerbox.box import gitshadow
from flowerbox.box.gitshadow import Shadow
from flowerbox.errors import GitShadowError
from tests.flowerbox import gitbombs

RUN = "r1"


@pytest.fixture(autouse=True)
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A git of the test's own: no user or system config, a fixed identity."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "user")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "user@example.com")


def git(cwd: Path, *args: str, check: bool = True, input: str | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout


@dataclass
class Box:
    """A workspace, its shadow, and the box's git (git run on the shadow, as in the box)."""

    ws: Path
    shadow: Shadow
    marker: Path  # what every attack would write
    outside: Path  # a folder outside the workspace the attacks aim at

    @property
    def s(self) -> Path:
        return self.shadow.gitdir

    def git(self, *args: str, check: bool = True) -> str:
        return git(self.ws, f"--git-dir={self.s}", f"--work-tree={self.ws}", *args, check=check)

    def commit(self, name: str, text: str = "x\n") -> str:
        (self.ws / name).write_text(text)
        self.git("add", name)
        self.git("commit", "-q", "-m", f"box: {name}")
        return self.git("rev-parse", "HEAD").strip()

    def back(self) -> gitshadow.BroughtBack:
        return gitshadow.bring_back(self.shadow, run_id=RUN)

    def user_is_safe(self, where: Path | None = None) -> None:
        """The user's own git afterwards works and runs nothing of the agent's; nothing
        outside the workspace changed."""
        cwd = where or self.ws
        git(cwd, "status")
        git(cwd, "commit", "-q", "--allow-empty", "-m", "user")
        git(cwd, "log", "--oneline", "-3")
        assert not self.marker.exists()
        assert sorted(p.name for p in self.outside.iterdir()) == ["secret"]
        assert (self.outside / "secret").read_text() == SECRET


SECRET = "0" * 40 + "\n"


def evil(marker: Path) -> str:
    """A shell command an attack plants: it leaves the marker when it runs."""
    return f"touch {marker}; false"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    (ws / "a.txt").write_text("a\n")
    git(ws, "add", "a.txt")
    git(ws, "commit", "-q", "-m", "one")
    git(ws, "branch", "side")
    git(ws, "tag", "v1")
    return ws


@pytest.fixture
def make_box(tmp_path: Path) -> Callable[[Path], Box]:
    def make(ws: Path) -> Box:
        outside = tmp_path / "outside"
        outside.mkdir(exist_ok=True)
        (outside / "secret").write_text(SECRET)
        dest = tmp_path / "S"  # made by make
        objects = str(ws / ".git" / "objects")  # the box's path for them, here the host's
        shadow = gitshadow.make(ws, dest, objects_in_box=objects)
        return Box(ws, shadow, tmp_path / "MARKER", outside)

    return make


@pytest.fixture
def box(repo: Path, make_box: Callable[[Path], Box]) -> Box:
    return make_box(repo)


# -- make -------------------------------------------------------------------------------------


@pytest.mark.english
def test_layout(tmp_path: Path, repo: Path) -> None:
    assert gitshadow.layout(repo) == "dir"
    assert gitshadow.layout(tmp_path) == "none"
    (tmp_path / ".git").write_text("gitdir: elsewhere\n")
    assert gitshadow.layout(tmp_path) == "file"
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".git").symlink_to(repo / ".git")
    with pytest.raises(GitShadowError, match="symlink"):
        gitshadow.layout(linked)


def test_the_shadow_shows_the_users_repository(
    tmp_path: Path, make_box: Callable[..., Box]
) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    for n in range(3):
        (origin / "f.txt").write_text(f"{n}\n")
        git(origin, "add", "f.txt")
        git(origin, "commit", "-q", "-m", f"c{n}")
    ws = tmp_path / "ws"
    git(tmp_path, "clone", "-q", "--depth", "2", f"file://{origin}", str(ws))
    git(ws, "branch", "side")
    git(ws, "tag", "-a", "-m", "t", "v1")
    (ws / "staged.txt").write_text("s\n")
    git(ws, "add", "staged.txt")
    (ws / "f.txt").write_text("changed\n")
    hook = ws / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\necho ran >> {tmp_path / 'hook-ran'}\n")
    hook.chmod(0o755)
    b = make_box(ws)

    for args in (["status", "--porcelain=v2", "--branch"], ["log", "--all", "--decorate"]):
        assert b.git(*args) == git(ws, *args)
    assert b.shadow.index_clean is False
    assert b.shadow.branches.keys() == {"main", "side"}
    assert (b.s / "shallow").is_file()
    assert not (b.s / "logs").exists()
    sha = b.commit("new.txt")
    assert (tmp_path / "hook-ran").read_text() == "ran\n"  # the user's hook runs in the box
    loose = f"objects/{sha[:2]}/{sha[2:]}"
    assert (b.s / loose).is_file()
    assert not (ws / ".git" / loose).exists()
    assert git(ws, "cat-file", "-t", sha, check=False) == ""


@pytest.mark.english
def test_make_refuses_what_it_cannot_shadow(tmp_path: Path, repo: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    bare = tmp_path / "bare"
    git(tmp_path, "init", "-q", "--bare", str(bare / ".git"))
    with pytest.raises(GitShadowError, match="bare"):
        gitshadow.make(bare, dest, objects_in_box="/objects")
    with pytest.raises(GitShadowError, match="normalized absolute"):
        gitshadow.make(repo, dest, objects_in_box="objects")
    (dest / "x").touch()
    with pytest.raises(GitShadowError, match="not empty"):
        gitshadow.make(repo, dest, objects_in_box="/objects")
    git(repo, "config", "extensions.refStorage", "reftable")
    with pytest.raises(GitShadowError, match="reftable"):
        gitshadow.make(repo, tmp_path, objects_in_box="/objects")


# -- bring_back: what a user gets ------------------------------------------------------------


def test_a_commit_on_the_current_branch_is_fast_forwarded(box: Box) -> None:
    box.commit("a.txt", "changed by the box\n")
    sha = box.commit("b.txt")
    result = box.back()
    assert result.branches == {"main": sha}
    assert result.fast_forwarded == "main"
    assert git(box.ws, "rev-parse", "main").strip() == sha
    assert git(box.ws, "rev-parse", f"flowerbox/{RUN}/main").strip() == sha
    assert git(box.ws, "status", "--porcelain") == ""
    assert not box.s.exists()
    assert result.lines()[0] == f"the run's branches: flowerbox/{RUN}/main (fast-forwarded main)"


def test_a_new_branch_comes_back_under_the_runs_prefix(box: Box) -> None:
    box.git("checkout", "-q", "-b", "feature/x")
    sha = box.commit("b.txt")
    box.git("checkout", "-q", "main")
    result = box.back()
    assert result.branches == {"feature/x": sha}
    assert result.fast_forwarded is None
    assert git(box.ws, "rev-parse", f"flowerbox/{RUN}/feature/x").strip() == sha
    assert "feature/x" not in git(box.ws, "branch", "--list", "feature/*")
    assert f"flowerbox/{RUN}/feature/x" in "\n".join(result.lines())


def test_a_branch_the_user_moved_during_the_run_is_left_alone(box: Box) -> None:
    sha = box.commit("b.txt")
    git(box.ws, "commit", "-q", "--allow-empty", "-m", "user meanwhile")
    mine = git(box.ws, "rev-parse", "main").strip()
    result = box.back()
    assert result.fast_forwarded is None
    assert result.note is not None and "moved in your repository" in result.note
    assert git(box.ws, "rev-parse", "main").strip() == mine
    assert git(box.ws, "rev-parse", f"flowerbox/{RUN}/main").strip() == sha


def test_staged_changes_keep_the_branch_and_the_index(
    repo: Path, make_box: Callable[..., Box]
) -> None:
    (repo / "mine.txt").write_text("mine\n")
    git(repo, "add", "mine.txt")
    box = make_box(repo)
    box.git("reset", "-q")  # the agent's commit without the user's staged file
    sha = box.commit("b.txt")
    index = (repo / ".git" / "index").read_bytes()
    result = box.back()
    assert result.fast_forwarded is None
    assert result.note is not None and "staged" in result.note
    assert (repo / ".git" / "index").read_bytes() == index
    assert git(repo, "rev-parse", f"flowerbox/{RUN}/main").strip() == sha
    assert "A  mine.txt" in git(repo, "status", "--porcelain")


def test_a_detached_head_commit_comes_back(box: Box) -> None:
    box.git("checkout", "-q", "--detach")
    sha = box.commit("b.txt")
    result = box.back()
    assert result.branches == {"HEAD": sha}
    assert git(box.ws, "rev-parse", f"flowerbox/{RUN}/HEAD").strip() == sha


def test_a_first_commit_in_an_empty_repository(
    tmp_path: Path, make_box: Callable[..., Box]
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    box = make_box(ws)
    sha = box.commit("first.txt")
    assert box.back().fast_forwarded == "main"
    assert git(ws, "rev-parse", "main").strip() == sha
    assert git(ws, "status", "--porcelain") == ""


def test_nothing_new_brings_nothing_back(box: Box) -> None:
    result = box.back()
    assert result.branches == {}
    assert result.lines() == ["the run made no new commits on any branch"]
    assert not box.s.exists()


def test_packed_branches_and_packs_come_back(box: Box) -> None:
    """An agent's `git gc`: its branches live in packed-refs, its objects in a pack."""
    box.git("checkout", "-q", "-b", "worker-1")
    sha = box.commit("b.txt")
    box.git("checkout", "-q", "main")
    box.git("gc", "-q")
    assert not (box.s / "refs" / "heads" / "worker-1").exists()
    assert list((box.s / "objects" / "pack").glob("*.pack"))
    assert box.back().branches == {"worker-1": sha}
    git(box.ws, "fsck", "--no-dangling")


@pytest.mark.english
def test_a_branch_of_the_users_in_the_way_refuses_before_touching_anything(box: Box) -> None:
    git(box.ws, "branch", "flowerbox")
    box.commit("b.txt")
    with pytest.raises(GitShadowError, match="in the way"):
        box.back()
    assert box.s.exists()
    with pytest.raises(GitShadowError, match="plain name"):
        gitshadow.bring_back(box.shadow, run_id="../x")


# -- bring_back: what the box may have planted in S -------------------------------------------


def config_attacks(marker: Path, included: Path) -> dict[str, str]:
    """S/config sections that would run the marker if git on the host ever used S's config
    (`included` is a config file with an fsmonitor, for include.path)."""
    cmd = evil(marker)
    return {
        "fsmonitor": f"[core]\n\tfsmonitor = {cmd}\n",
        "hooksPath": f"[core]\n\thooksPath = {included.parent}\n",
        "include": f"[include]\n\tpath = {included}\n",
        "packObjectsHook": f"[uploadpack]\n\tpackObjectsHook = {cmd}\n",
        "alternateRefsCommand": f"[core]\n\talternateRefsCommand = {cmd}\n",
        "filter": f'[filter "x"]\n\tclean = {cmd}\n\tsmudge = {cmd}\n\tprocess = {cmd}\n',
        "pager": f"[core]\n\tpager = {cmd}\n\teditor = {cmd}\n\tsshCommand = {cmd}\n",
        "uploadpack": "[uploadpack]\n\tallowAnySHA1InWant = true\n[transfer]\n\thideRefs = x\n",
    }


@pytest.mark.parametrize("attack", list(config_attacks(Path("m"), Path("i"))))
def test_the_boxs_git_config_never_runs(box: Box, attack: str, tmp_path: Path) -> None:
    sha = box.commit("b.txt")
    (box.ws / ".gitattributes").write_text("* filter=x\n")
    planted = tmp_path / "planted"  # the agent's own folder: an include and hooks
    planted.mkdir()
    (planted / "included.cfg").write_text(f"[core]\n\tfsmonitor = {evil(box.marker)}\n")
    for name in HOOKS:
        (planted / name).write_text(f"#!/bin/sh\n{evil(box.marker)}\n")
        (planted / name).chmod(0o755)
    with (box.s / "config").open("a") as config:
        config.write(config_attacks(box.marker, planted / "included.cfg")[attack])
    assert box.back().branches == {"main": sha}
    box.user_is_safe()


HOOKS = (
    "reference-transaction",
    "post-checkout",
    "post-merge",
    "pre-commit",
    "post-commit",
    "post-index-change",
    "pre-auto-gc",
    "fsmonitor-watchman",
    "post-rewrite",
    "pre-push",
)


def test_the_boxs_hooks_never_run(box: Box) -> None:
    sha = box.commit("b.txt")
    for name in HOOKS:
        hook = box.s / "hooks" / name
        hook.write_text(f"#!/bin/sh\n{evil(box.marker)}\n")
        hook.chmod(0o755)
    assert box.back().branches == {"main": sha}
    box.user_is_safe()


def test_a_commondir_redirect_is_ignored(box: Box) -> None:
    sha = box.commit("b.txt")
    agent = box.ws / "agent-common"
    git(box.ws, "init", "-q", "--bare", str(agent))
    (agent / "hooks" / "reference-transaction").write_text(f"#!/bin/sh\n{evil(box.marker)}\n")
    (agent / "hooks" / "reference-transaction").chmod(0o755)
    (box.s / "commondir").write_text(f"{agent}\n")
    assert box.back().branches == {"main": sha}
    box.user_is_safe()


def test_the_boxs_alternates_are_not_followed(box: Box, tmp_path: Path) -> None:
    """A branch whose commit lives only where S's alternates point stays out."""
    elsewhere = tmp_path / "elsewhere"
    git(tmp_path, "init", "-q", str(elsewhere))
    git(elsewhere, "commit", "-q", "--allow-empty", "-m", "not the box's")
    foreign = git(elsewhere, "rev-parse", "HEAD").strip()
    with (box.s / "objects" / "info" / "alternates").open("a") as alternates:
        alternates.write(f"{elsewhere / '.git' / 'objects'}\n")
    (box.s / "refs" / "heads" / "foreign").write_text(f"{foreign}\n")
    sha = box.commit("b.txt")
    result = box.back()
    assert result.branches == {"main": sha}
    assert [s.what for s in result.skipped] == ["foreign"]
    assert git(box.ws, "cat-file", "-e", foreign, check=False) == ""
    box.user_is_safe()


def plant_ref(box: Box, name: str, make: Callable[[Path], None]) -> None:
    path = box.s / "refs" / "heads" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    make(path)


REF_ATTACKS: dict[str, Callable[[Path, Box], None]] = {
    "symlink outside": lambda p, b: p.symlink_to(b.outside / "secret"),
    "fifo": lambda p, b: os.mkfifo(p),
    "dev zero": lambda p, b: p.symlink_to("/dev/zero"),
    "huge": lambda p, b: p.write_bytes(b"0" * 40 + b"\n" * (10 << 20)),
    "folder link": lambda p, b: p.symlink_to(b.outside, target_is_directory=True),
    "not hex": lambda p, b: p.write_text("ref: refs/heads/main\n"),
    "upper hex": lambda p, b: p.write_text("A" * 40 + "\n"),
    "short": lambda p, b: p.write_text("abc\n"),
    "binary": lambda p, b: p.write_bytes(b"\xff\xfe\x1b[2J"),
}


@pytest.mark.parametrize("attack", list(REF_ATTACKS))
def test_bad_refs_are_skipped_and_reported(box: Box, attack: str) -> None:
    sha = box.commit("b.txt")
    plant_ref(box, "bad", lambda p: REF_ATTACKS[attack](p, box))
    result = box.back()
    assert result.branches == {"main": sha}
    assert [s.what for s in result.skipped] == ["bad"]
    assert all("\x1b" not in line for line in result.lines())
    assert not box.s.exists()
    box.user_is_safe()


BAD_NAMES = ("a..b", "x\x1b[31m", "-leading", "x/-y", ".hidden", "x.lock", "HEAD", "a b", "é")


def test_bad_ref_names_are_skipped_and_reported(box: Box) -> None:
    sha = box.commit("b.txt")
    for name in BAD_NAMES:
        plant_ref(box, name, lambda p: p.write_text(f"{sha}\n"))
    with (box.s / "packed-refs").open("a") as packed:
        packed.write(f"{sha} refs/heads/packed\x07bell\n{sha} refs/heads/../../x\n")
    result = box.back()
    assert result.branches == {"main": sha}
    assert len(result.skipped) == len(BAD_NAMES) + 2
    assert all("\x1b" not in line and "\x07" not in line for line in result.lines())
    box.user_is_safe()


def test_a_head_and_refs_folder_that_are_not_plain_are_skipped(box: Box) -> None:
    box.commit("b.txt")
    (box.s / "HEAD").unlink()
    (box.s / "HEAD").symlink_to(box.outside / "secret")
    heads = box.s / "refs" / "heads"
    heads.rename(box.s / "refs" / "moved")
    heads.symlink_to(box.s / "refs" / "moved", target_is_directory=True)
    result = box.back()
    assert result.branches == {}
    assert {s.what for s in result.skipped} == {"HEAD", "refs/heads/"}
    box.user_is_safe()


def test_a_name_clash_in_the_box_skips_one(box: Box) -> None:
    """A loose `a` and a packed `a/b` cannot both be branches (git's D/F rule)."""
    sha = box.commit("b.txt")
    (box.s / "refs" / "heads" / "a").write_text(f"{sha}\n")
    with (box.s / "packed-refs").open("a") as packed:
        packed.write(f"{sha} refs/heads/a/b\n")
    result = box.back()
    assert set(result.branches) | {s.what for s in result.skipped} == {"main", "a", "a/b"}
    assert len(result.branches) == 2
    box.user_is_safe()


def test_a_branch_on_a_tree_is_skipped(box: Box) -> None:
    sha = box.commit("b.txt")
    tree = box.git("rev-parse", "HEAD^{tree}").strip()
    (box.s / "refs" / "heads" / "tree").write_text(f"{tree}\n")
    result = box.back()
    assert result.branches == {"main": sha}
    assert [s.what for s in result.skipped] == ["tree"]


def loose(box: Box, sha: str) -> Path:
    return box.s / "objects" / sha[:2] / sha[2:]


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_an_object_or_pack_that_is_not_a_file_is_not_read(box: Box, kind: str) -> None:
    good = box.commit("b.txt")
    box.git("checkout", "-q", "-b", "other")
    bad = box.commit("c.txt")
    path = loose(box, bad)
    path.unlink()
    pack = box.s / "objects" / "pack" / f"pack-{'2' * 40}.pack"
    for planted in (path, pack):
        if kind == "symlink":
            planted.symlink_to(box.outside / "secret")
        else:
            os.mkfifo(planted)
    result = box.back()
    assert result.branches == {"main": good}
    relative = {f"objects/{bad[:2]}/{bad[2:]}", f"objects/pack/{pack.name}"}
    assert {s.what for s in result.skipped} == relative | {"other"}
    box.user_is_safe()


def test_an_object_that_does_not_match_its_name_is_refused(box: Box) -> None:
    good = box.commit("b.txt")
    box.git("checkout", "-q", "-b", "other")
    bad = box.commit("c.txt")
    path = loose(box, bad)
    path.chmod(0o644)
    path.write_bytes(zlib.compress(b"commit 12\0not a commit"))
    result = box.back()
    assert result.branches == {"main": good}
    assert [s.what for s in result.skipped] == ["other"]
    assert "nonexistent object" in result.skipped[0].why
    assert git(box.ws, "cat-file", "-e", bad, check=False) == ""
    box.user_is_safe()


def test_an_object_fsck_refuses_stays_out_and_the_other_branches_come_back(box: Box) -> None:
    good = box.commit("b.txt")
    tree = box.git("rev-parse", "HEAD^{tree}").strip()
    body = f"tree {tree}\nparent {good}\n\nno author, no committer\n"
    bad = git(
        box.ws,
        f"--git-dir={box.s}",
        "hash-object", "--literally", "-t", "commit", "-w", "--stdin",
        input=body,
    ).strip()  # fmt: skip
    (box.s / "refs" / "heads" / "other").write_text(f"{bad}\n")
    result = box.back()
    assert result.branches == {"main": good}
    assert [s.what for s in result.skipped] == ["other"]
    assert "fetch refused" in result.skipped[0].why
    assert git(box.ws, "cat-file", "-e", bad, check=False) == ""
    git(box.ws, "fsck", "--no-dangling")
    box.user_is_safe()


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"junk", "not a zlib stream"),
        (zlib.compress(b"commit 99\0short"), "not a git object"),
        (zlib.compress(b"exec 5\0touch"), "not a git object"),
        (zlib.compress(b"blob 999999\0" + b"0" * 999_999), "inflated"),
    ],
)
def test_a_loose_object_that_is_not_a_git_object_is_reported(
    box: Box, data: bytes, why: str
) -> None:
    sha = box.commit("b.txt")
    (box.s / "objects" / "ab").mkdir(exist_ok=True)
    (box.s / "objects" / "ab" / ("c" * 38)).write_bytes(data)
    result = gitshadow.bring_back(box.shadow, run_id=RUN, max_bytes=500_000)
    assert result.branches == {"main": sha}
    assert [s.what for s in result.skipped] == [f"objects/ab/{'c' * 38}"]
    assert why in result.skipped[0].why


def test_a_garbage_pack_is_refused(box: Box) -> None:
    sha = box.commit("b.txt")
    (box.s / "objects" / "pack" / f"pack-{'1' * 40}.pack").write_bytes(b"PACK" + b"\0" * 100)
    result = box.back()
    assert result.branches == {"main": sha}
    assert [s.what for s in result.skipped] == [f"pack-{'1' * 40}.pack"]


def test_the_copy_is_bounded(box: Box) -> None:
    box.commit("b.txt", "x" * 100_000)
    result = gitshadow.bring_back(box.shadow, run_id=RUN, max_bytes=100)
    assert result.branches == {}
    assert any("not copied" in s.why for s in result.skipped)
    box.user_is_safe()


def test_removing_the_shadow_follows_no_link_and_survives_locked_folders(box: Box) -> None:
    box.commit("b.txt")
    (box.s / "link-out").symlink_to(box.outside, target_is_directory=True)
    locked = box.s / "refs" / "heads" / "locked"
    locked.mkdir()
    (locked / "x").write_text("y\n")
    locked.chmod(0)
    box.s.chmod(0o500)
    result = box.back()
    assert result.fast_forwarded == "main"
    assert not box.s.exists()
    box.user_is_safe()


# -- quarantine -------------------------------------------------------------------------------


@pytest.fixture
def since(box: Box) -> float:
    """The run starts now: what was there before is older than this."""
    time.sleep(2 * gitshadow.CTIME_SLACK)
    return time.time()


def quarantine(box: Box, since: float) -> tuple[Path, ...]:
    found = gitshadow.quarantine(box.ws, since=since, run_id=RUN, start_layout="dir")
    assert found.complete
    return found.moved


def test_a_new_nested_repository_is_renamed_aside(box: Box, since: float) -> None:
    nested = box.ws / "src" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    git(nested, "config", "core.fsmonitor", evil(box.marker))
    assert quarantine(box, since) == (nested / f".git.flowerbox-{RUN}",)
    box.user_is_safe(nested)
    assert git(nested, "rev-parse", "--show-toplevel").strip() == str(box.ws)


def test_a_planted_hook_in_a_users_nested_repository_is_caught(
    repo: Path, make_box: Callable[..., Box]
) -> None:
    nested = repo / "vendor"
    nested.mkdir()
    git(nested, "init", "-q")
    git(nested, "commit", "-q", "--allow-empty", "-m", "theirs")
    box = make_box(repo)
    time.sleep(2 * gitshadow.CTIME_SLACK)
    start = time.time()
    git(nested, "commit", "-q", "--allow-empty", "-m", "the agent's commit is fine")
    assert quarantine(box, start) == ()
    hook = nested / ".git" / "hooks" / "post-commit"
    hook.write_text(f"#!/bin/sh\n{evil(box.marker)}\n")
    hook.chmod(0o755)
    assert quarantine(box, start) == (nested / f".git.flowerbox-{RUN}",)
    box.user_is_safe()


def test_a_worktree_git_file_is_renamed_aside(box: Box, since: float) -> None:
    agent = box.ws / ".claude" / "agent-gitdir"
    git(box.ws, "init", "-q", "--bare", str(agent))
    git(agent, "config", "core.bare", "false")
    git(agent, "config", "core.fsmonitor", evil(box.marker))
    worktree = box.ws / ".claude" / "worktrees" / "x"
    worktree.mkdir(parents=True)
    (worktree / ".git").write_text(f"gitdir: {agent}\n")
    moved = set(quarantine(box, since))
    assert moved == {worktree / f".git.flowerbox-{RUN}", agent / f"HEAD.flowerbox-{RUN}"}
    box.user_is_safe(worktree)
    box.user_is_safe(agent)


def test_a_folder_git_would_take_for_a_bare_repository_is_defused(box: Box, since: float) -> None:
    evil_dir = box.ws / "docs" / "notes"
    evil_dir.parent.mkdir()
    git(box.ws, "init", "-q", "--bare", str(evil_dir))
    git(evil_dir, "config", "core.bare", "false")
    git(evil_dir, "config", "core.worktree", str(box.ws))
    git(evil_dir, "config", "core.fsmonitor", evil(box.marker))
    assert quarantine(box, since) == (evil_dir / f"HEAD.flowerbox-{RUN}",)
    box.user_is_safe(evil_dir)


def test_a_new_top_level_git_in_a_workspace_without_one(tmp_path: Path) -> None:
    ws = tmp_path / "plain"
    ws.mkdir()
    start = time.time()
    git(ws, "init", "-q")
    git(ws, "config", "core.fsmonitor", evil(tmp_path / "MARKER"))
    found = gitshadow.quarantine(ws, since=start, run_id=RUN, start_layout="none")
    assert found.moved == (ws / f".git.flowerbox-{RUN}",)
    assert git(ws, "rev-parse", "--is-inside-work-tree", check=False) == ""
    assert not (tmp_path / "MARKER").exists()


def test_untouched_repositories_and_the_top_are_left_alone(
    repo: Path, make_box: Callable[..., Box]
) -> None:
    nested = repo / "sub"
    nested.mkdir()
    git(nested, "init", "-q")
    (repo / "gitfile-sub").mkdir()
    (repo / "gitfile-sub" / ".git").write_text("gitdir: ../sub/.git\n")
    box = make_box(repo)
    time.sleep(2 * gitshadow.CTIME_SLACK)
    start = time.time()
    box.commit("b.txt")
    git(repo, "status")  # the host's own git on the top .git
    assert quarantine(box, start) == ()
    assert gitshadow.quarantine(repo, since=start, run_id=RUN, start_layout="file").moved == ()


def test_quarantine_never_follows_links_or_enters_a_git(
    box: Box, since: float, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    git(elsewhere, "init", "-q")  # new, but outside: through a link only
    (box.ws / "link").symlink_to(elsewhere, target_is_directory=True)
    (box.ws / "sub").mkdir()
    (box.ws / "sub" / ".git").symlink_to(elsewhere / ".git", target_is_directory=True)
    assert quarantine(box, since) == (box.ws / "sub" / f".git.flowerbox-{RUN}",)
    assert (elsewhere / ".git").is_dir()
    assert (box.ws / "sub" / f".git.flowerbox-{RUN}").is_symlink()


def test_a_planted_name_is_not_overwritten(box: Box, since: float) -> None:
    nested = box.ws / "n"
    nested.mkdir()
    (nested / f".git.flowerbox-{RUN}").write_text("planted\n")
    (nested / ".git").write_text("gitdir: /nowhere\n")
    assert quarantine(box, since) == (nested / f".git.flowerbox-{RUN}-1",)
    assert (nested / f".git.flowerbox-{RUN}").read_text() == "planted\n"


def test_a_sha256_repository(tmp_path: Path, make_box: Callable[..., Box]) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main", "--object-format=sha256")
    git(ws, "commit", "-q", "--allow-empty", "-m", "one")
    box = make_box(ws)
    sha = box.commit("b.txt")
    assert len(sha) == 64
    assert box.back().branches == {"main": sha}
    assert git(ws, "status", "--porcelain") == ""


def test_a_detached_head_on_an_old_commit_is_not_news(box: Box) -> None:
    box.git("commit", "-q", "--allow-empty", "-m", "box")
    box.git("checkout", "-q", "--detach", "HEAD~1")
    assert set(box.back().branches) == {"main"}


def test_what_is_shown_has_no_terminal_controls(box: Box, since: float) -> None:
    nested = box.ws / "x\x1b]0;title\x07"
    nested.mkdir()
    (nested / ".git").write_text("gitdir: /nowhere\n")
    found = gitshadow.quarantine(box.ws, since=since, run_id=RUN, start_layout="dir")
    assert len(found.moved) == 1
    assert all("\x1b" not in line and "\x07" not in line for line in found.lines())


def test_an_objects_folder_that_is_a_link_is_not_read(box: Box, tmp_path: Path) -> None:
    sha = box.commit("b.txt")
    folder = loose(box, sha).parent
    folder.rename(tmp_path / "moved")
    folder.symlink_to(tmp_path / "moved", target_is_directory=True)
    result = box.back()
    assert result.branches == {}
    assert [s.what for s in result.skipped] == ["main"]  # its commit was not read
    assert (tmp_path / "moved" / sha[2:]).is_file()
    box.user_is_safe()


def test_a_git_hidden_in_an_unreadable_folder_is_found(box: Box, since: float) -> None:
    hidden = box.ws / "locked"
    hidden.mkdir()
    (hidden / ".git").write_text("gitdir: /nowhere\n")
    hidden.chmod(0o100)  # cd-able, not listable: git from a folder below still finds .git
    assert quarantine(box, since) == (hidden / f".git.flowerbox-{RUN}",)


def test_a_capped_walk_says_so(box: Box, since: float) -> None:
    (box.ws / "d").mkdir()
    (box.ws / "d" / "e").mkdir()
    found = gitshadow.quarantine(box.ws, since=since, run_id=RUN, start_layout="dir", max_entries=2)
    assert not found.complete
    assert "not every folder" in found.lines()[-1]


def test_a_workspace_path_with_spaces(tmp_path: Path, make_box: Callable[..., Box]) -> None:
    ws = tmp_path / "my work space"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    git(ws, "commit", "-q", "--allow-empty", "-m", "one")
    box = make_box(ws)
    sha = box.commit("b.txt")
    assert box.back().fast_forwarded == "main"
    assert git(ws, "rev-parse", "main").strip() == sha


def test_a_flood_of_branches_is_capped(box: Box) -> None:
    sha = box.commit("b.txt")
    (box.s / "packed-refs").write_text(
        "".join(f"{sha} refs/heads/flood-{n:05}\n" for n in range(gitshadow.MAX_BROUGHT + 5))
    )
    (box.s / "refs" / "heads" / "main").unlink()  # main too lives in packed-refs now
    result = box.back()
    assert len(result.branches) == gitshadow.MAX_BROUGHT
    assert result.skipped[0].what == "5 branches"


def test_a_shallow_clone_brings_back(tmp_path: Path, make_box: Callable[..., Box]) -> None:
    origin = tmp_path / "origin"
    git(tmp_path, "init", "-q", "-b", "main", str(origin))
    for n in range(3):
        git(origin, "commit", "-q", "--allow-empty", "-m", f"c{n}")
    ws = tmp_path / "ws"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(ws))
    box = make_box(ws)
    box.git("checkout", "-q", "-b", "side", "HEAD")
    side = box.commit("s.txt")
    box.git("checkout", "-q", "main")
    sha = box.commit("b.txt")
    result = box.back()
    assert result.branches == {"main": sha, "side": side}
    assert result.fast_forwarded == "main"
    git(ws, "fsck", "--no-dangling")
    assert git(ws, "log", "--oneline", "main").count("\n") == 2


def test_the_workers_worktrees_are_said_once_and_anything_else_by_its_path(tmp_path: Path) -> None:
    worker = tmp_path / "runs" / "worktrees" / "agent-1" / ".git.flowerbox-r"  # flower's
    cli = tmp_path / ".claude" / "worktrees" / "agent-2" / ".git.flowerbox-r"  # the CLI's own
    nested = tmp_path / "src" / "worktrees" / ".git.flowerbox-r"  # a user folder of that name
    lines = gitshadow.Quarantined(moved=(worker, cli, nested)).lines()
    assert lines == [
        f"git metadata the run made, renamed aside (git ignores it): {nested}",
        "the workers' 2 worktree(s) left by a stopped run keep their files; their git links "
        "were set aside (what they committed is on the branches below)",
    ]


# -- bring_back: the run's delivery branch (flower/<run id>, flower.core.worktrees) ------------

DELIVERY = "flower/20261201-120000-abc123"


def deliver_in_box(box: Box, name: str = DELIVERY, *files: str) -> str:
    """What flower in the box does: commits on a branch of its own, the checkout left alone."""
    start = box.git("rev-parse", "HEAD").strip()
    box.git("checkout", "-q", "-b", name)
    for file in files or ("calc.py",):
        sha = box.commit(file)
    box.git("checkout", "-q", "main")
    assert box.git("rev-parse", "HEAD").strip() == start
    return sha


def test_the_runs_delivery_branch_comes_back_under_its_own_name(box: Box) -> None:
    sha = deliver_in_box(box, DELIVERY, "calc.py", "test_calc.py")
    result = box.back()
    assert result.branches == {DELIVERY: sha} and result.ref(DELIVERY) == DELIVERY
    assert git(box.ws, "rev-parse", DELIVERY).strip() == sha
    assert git(box.ws, "branch", "--list", "flowerbox/*") == ""  # no second copy
    assert git(box.ws, "status", "--porcelain") == "" and not (box.ws / "calc.py").exists()
    assert result.lines()[:2] == [
        f"the run's work is on {DELIVERY}: 2 commit(s), 2 file(s): calc.py, test_calc.py",
        f"  apply it: git -C {box.ws} merge {DELIVERY}",
    ]
    box.user_is_safe()


def test_a_woken_runs_branch_is_fast_forwarded_never_rewritten(
    repo: Path, make_box: Callable[..., Box], tmp_path: Path
) -> None:
    git(repo, "branch", DELIVERY)  # brought back by the run's earlier box
    earlier = git(repo, "rev-parse", DELIVERY).strip()
    box = make_box(repo)
    box.git("checkout", "-q", DELIVERY)
    sha = box.commit("round2.py")
    box.git("checkout", "-q", "main")
    mine = frozenset({DELIVERY})  # flowerbox's records: the run (or one it resumed) made it
    assert gitshadow.bring_back(box.shadow, run_id=RUN, delivered_before=mine).ref(DELIVERY) == (
        DELIVERY
    )
    assert git(repo, "rev-list", "--count", f"{earlier}..{DELIVERY}").strip() == "1"
    assert git(repo, "rev-parse", DELIVERY).strip() == sha


def test_a_new_run_never_moves_an_earlier_runs_delivery_branch(
    repo: Path, make_box: Callable[..., Box]
) -> None:
    """G2 of issue 37: another run's delivery branch, even by a fast-forward, stays as it was;
    the new commits come back under the run's prefix."""
    git(repo, "branch", DELIVERY)  # delivered by an earlier run
    earlier = git(repo, "rev-parse", DELIVERY).strip()
    box = make_box(repo)
    box.git("checkout", "-q", DELIVERY)
    sha = box.commit("planted.py")
    box.git("checkout", "-q", "main")
    result = gitshadow.bring_back(box.shadow, run_id=RUN, delivered_before=frozenset({"x"}))
    assert result.ref(DELIVERY) == f"flowerbox/{RUN}/{DELIVERY}" and not result.delivered
    assert git(repo, "rev-parse", DELIVERY).strip() == earlier
    assert git(repo, "rev-parse", result.ref(DELIVERY)).strip() == sha
    box.user_is_safe()


@pytest.mark.parametrize(
    "planted",
    ["the users branch of that name", "a name not of flower's making", "a forced rewrite"],
)
def test_a_planted_delivery_branch_never_moves_a_branch_of_the_users(
    repo: Path, make_box: Callable[..., Box], planted: str
) -> None:
    """The box may name any branch flower/...: only a new one, or a fast-forward of one of
    flower's own, comes back under that name; anything else keeps the run's prefix."""
    name = "flower/mine" if planted == "a name not of flower's making" else DELIVERY
    if planted == "a forced rewrite":
        git(repo, "branch", DELIVERY)
    box = make_box(repo)
    if planted == "the users branch of that name":  # made during the run, apart from the box's
        git(repo, "checkout", "-q", "-b", DELIVERY)
        git(repo, "commit", "-q", "--allow-empty", "-m", "the user's own")
        git(repo, "checkout", "-q", "main")
    mine = git(repo, "for-each-ref", "refs/heads/flower/")
    if planted == "a forced rewrite":
        box.git("branch", "-D", DELIVERY)
        box.git("checkout", "-q", "--orphan", DELIVERY)
        sha = box.commit("rewritten.py")
        box.git("checkout", "-q", "-f", "main")
    else:
        sha = deliver_in_box(box, name)
    result = box.back()
    assert result.ref(name) == f"flowerbox/{RUN}/{name}"
    assert git(repo, "rev-parse", result.ref(name)).strip() == sha
    assert git(repo, "for-each-ref", "refs/heads/flower/") == mine
    box.user_is_safe()


def test_the_delivery_line_shows_no_terminal_controls(box: Box) -> None:
    deliver_in_box(box, DELIVERY, "x\x1b]0;title\x07.py")
    assert all("\x1b" not in line and "\x07" not in line for line in box.back().lines())


def test_a_delivery_with_planted_hooks_and_worktree_links_runs_nothing_on_the_host(
    box: Box, since: float
) -> None:
    """What a hostile box leaves around its delivery: hooks in its gitdir, and a stopped
    worker's worktree whose `.git` is a link to the user's secret or a gitdir with an
    fsmonitor. The host brings the branch back and the user's git runs none of it."""
    sha = deliver_in_box(box)
    for name in HOOKS:
        hook = box.s / "hooks" / name
        hook.write_text(f"#!/bin/sh\n{evil(box.marker)}\n")
        hook.chmod(0o755)
    linked, planted = (box.ws / "runs" / "worktrees" / n for n in ("agent-1", "agent-2"))
    linked.mkdir(parents=True)
    (linked / ".git").symlink_to(box.outside / "secret")
    evil_dir = box.ws / "runs" / "evil"
    git(box.ws, "init", "-q", str(evil_dir))
    git(evil_dir, "config", "core.fsmonitor", evil(box.marker))
    planted.mkdir()
    (planted / ".git").write_text(f"gitdir: {evil_dir / '.git'}\n")
    moved = quarantine(box, since)
    assert {p.parent for p in moved} >= {linked, planted}
    result = box.back()
    assert result.branches == {DELIVERY: sha} and result.delivered == (DELIVERY,)
    box.user_is_safe()
    box.user_is_safe(planted)


# -- G3 of issue 37: objects small on disk, huge in memory --------------------------------------

MiB = 1 << 20
# bring_back in a process of its own, so its peak memory and its git children's are its own
MEASURED = """
import json, pickle, resource, sys
from flowerbox.box import gitshadow
shadow = pickle.loads(bytes.fromhex(sys.stdin.read()))
done = gitshadow.bring_back(shadow, run_id=sys.argv[1])
# SELF from VmHWM, this process's own peak: ru_maxrss carries over the spawning process's
# resident size through exec (a pytest process hundreds of MiB big late in a suite)
status = open("/proc/self/status").read()
hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
peak = {"SELF": hwm, "CHILDREN": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}
print(json.dumps({"branches": done.branches, "skipped": [s.what for s in done.skipped],
                  "peak_kib": peak}))
"""


def measured_back(box: Box) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, RUN],
        input=pickle.dumps(box.shadow).hex(),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_a_delta_bomb_pack_is_refused_within_gits_memory_bound(box: Box) -> None:
    """A 201-byte pack whose deltas make a 1.5 GiB blob: git indexing it stays under its
    address-space bound (flowerbox.hostgit.MEMORY) and fails; the run's branch still comes
    back. (Against main, git built the blob: 1.5 GiB resident.)"""
    sha = box.commit("b.txt")
    pack = gitbombs.delta_bomb(1536 * MiB)
    (box.s / "objects" / "pack" / gitbombs.pack_name(pack)).write_bytes(pack)
    done = measured_back(box)
    assert done["branches"] == {"main": sha}
    assert done["skipped"] == [gitbombs.pack_name(pack)]
    assert done["peak_kib"]["CHILDREN"] * 1024 < hostgit.MEMORY + 64 * MiB
    box.user_is_safe()


def test_a_loose_object_that_inflates_to_hundreds_of_mib_costs_the_host_little(box: Box) -> None:
    """A 400 MiB blob in a 400 KiB loose object, on the run's branch: it comes back, and
    neither flowerbox (a chunk at a time) nor git (big files streamed) holds it in memory.
    (Against main, flowerbox held it twice: 1.1 GiB for a 600 KB object.)"""
    blob, data = gitbombs.loose_bomb(400 * MiB)
    path = loose(box, blob)
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    box.git("update-index", "--add", "--cacheinfo", f"100644,{blob},big.bin")
    box.git("commit", "-q", "-m", "a big file")
    sha = box.git("rev-parse", "HEAD").strip()
    done = measured_back(box)
    assert done["branches"] == {"main": sha} and done["skipped"] == []
    assert done["peak_kib"]["SELF"] * 1024 < 200 * MiB
    assert done["peak_kib"]["CHILDREN"] * 1024 < 200 * MiB
    assert git(box.ws, "cat-file", "-s", blob).strip() == str(400 * MiB)
