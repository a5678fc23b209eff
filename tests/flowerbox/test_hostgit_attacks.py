"""Attacks on flowerbox.hostgit (issue 37, G1), as a hostile agent that wrote the working tree
of the user's repository (and the box's shadow git directory) would try them against the git
calls flowerbox makes after a run. Each case runs its setup through the user's own git first
(the control: the planted command runs, or the file is read), then through HostGit."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from flowerbox import hostgit
from flowerbox.hostgit import HostGit, HostGitError
from tests.flowerbox import test_hostgit as base
from tests.flowerbox.test_hostgit import git, include, planted

# test_hostgit's fixtures, registered here under the names they are used by: a home of the test's
# own, the user's repository `ws`, a HostGit `host`, the planted command's `mark`
git_env, ws, host, mark = base.git_env, base.ws, base.host, base.mark

MISSING = "1234567890abcdef1234567890abcdef12345678"  # a commit the repository lacks


@pytest.mark.english
def test_a_promisor_remote_of_the_working_tree_never_fetches(
    ws: Path, host: HostGit, mark: Path
) -> None:
    """`remote.<name>.promisor` needs no extension: any lookup of a missing object (the box
    names its detached HEAD, bring_back asks `cat-file -e` about it) lazily fetches from that
    remote, whose `uploadpack` is a command the shell runs. Refused: on a git older than
    2.39.4 GIT_NO_LAZY_FETCH is no switch, and nothing undoes the flag once read."""
    include(
        ws,
        f'[remote "lazy"]\n\tpromisor = true\n\turl = {ws}\n'
        f'\tuploadpack = "{planted(mark)}; git-upload-pack"\n',
    )
    git(ws, "cat-file", "-e", f"{MISSING}^{{commit}}", check=False)
    assert mark.exists()
    mark.unlink()
    for args in (("cat-file", "-e", f"{MISSING}^{{commit}}"), ("merge-base", "HEAD", MISSING)):
        with pytest.raises(HostGitError, match=r"\.gitconfig sets remote\.lazy\.promisor"):
            host.run(*args, workspace=ws)
        assert not mark.exists()


def test_the_lazy_fetch_is_off_whatever_config_names_the_remote(
    ws: Path, host: HostGit, mark: Path
) -> None:
    """The same remote in the repository's own config (a partial clone of the user's, its
    remote a folder the agent can write): no object is fetched lazily all the same."""
    git(ws, "config", "remote.lazy.promisor", "true")
    git(ws, "config", "remote.lazy.url", str(ws))
    git(ws, "config", "remote.lazy.uploadpack", f"{planted(mark)}; git-upload-pack")
    git(ws, "cat-file", "-e", f"{MISSING}^{{commit}}", check=False)
    assert mark.exists()
    mark.unlink()
    assert host.run("cat-file", "-e", f"{MISSING}^{{commit}}", workspace=ws).returncode != 0
    assert not mark.exists()


@pytest.mark.parametrize("entry", ["absolute", "relative"])
def test_a_git_or_sh_the_agent_put_on_your_path_never_runs(
    entry: str, ws: Path, host: HostGit, mark: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The project's virtualenv activated (`<ws>/.venv/bin` first on PATH), or a relative
    entry (`node_modules/.bin`) with flowerbox started in the workspace: the agent's `git`
    and `sh` there are what a plain lookup finds, for flowerbox's calls in your repository
    and in its own."""
    folder = ws / ("node_modules/.bin" if entry == "relative" else ".venv/bin")
    folder.mkdir(parents=True)
    for name in ("git", "sh"):
        real = shutil.which(name)
        (folder / name).write_text(f'#!/bin/sh\n{planted(mark)}\nexec {real} "$@"\n')
        (folder / name).chmod(0o755)
    shown = folder.relative_to(ws) if entry == "relative" else folder
    monkeypatch.setenv("PATH", f"{shown}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(ws)
    assert subprocess.run(["git", "rev-parse", "HEAD"], check=False).returncode == 0
    assert mark.exists()
    mark.unlink()
    assert host.run("rev-parse", "HEAD", workspace=ws).returncode == 0
    assert host.run("rev-parse", "--git-dir", repo=ws / ".git").returncode == 0
    assert not mark.exists()


def _fed(ws: Path, stdin: str, *args: str) -> str:
    """The user's own git reading `stdin`; what it printed."""
    done = subprocess.run(["git", *args], cwd=ws, input=stdin, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _tree_bomb(ws: Path, fan: int, depth: int) -> str:
    """A commit of a few KiB whose tree lists `fan`**`depth` files of long names: each level
    a tree of `fan` entries naming the same tree below."""

    def mktree(kind: str, sha: str) -> str:
        mode = "040000 tree" if kind == "tree" else "100644 blob"
        entries = "".join(f"{mode} {sha}\t{kind[0] * 100}{n}\n" for n in range(fan))
        return _fed(ws, entries, "mktree")

    tree = mktree("blob", _fed(ws, "", "hash-object", "-w", "--stdin"))
    for _ in range(depth - 1):
        tree = mktree("tree", tree)
    return git(ws, "commit-tree", tree, "-m", "bomb").stdout.strip()


@pytest.mark.english
@pytest.mark.parametrize("bomb", ["tree", "includes"])
def test_what_git_prints_is_bounded(bomb: str, ws: Path, host: HostGit) -> None:
    """git's output is held in flowerbox's memory, where no address-space limit applies: a
    box-made commit of a few KiB whose `ls-tree -r` (bring_back's list of a delivery's files)
    prints without end, or working-tree config files that include each other fourfold (the
    runner's own `config --list`). 4 and 10 MB of output here, past a bound of 1 MiB; with
    fan 1000 the tree held 22 GB in 5 s."""
    args: tuple[str, ...] = ("rev-parse", "HEAD")
    if bomb == "tree":
        args = ("ls-tree", "-r", "--name-only", "-z", _tree_bomb(ws, fan=10, depth=4))
    else:
        include(ws, "[include]\n\tpath = i0\n")
        for n in range(5):
            (ws / f"i{n}").write_text(f"[include]\n\tpath = i{n + 1}\n" * 4)
        (ws / "i5").write_text(f"[x]\n\ty = {'v' * 10_000}\n")
    assert len(git(ws, *(("config", "--list") if bomb == "includes" else args)).stdout) > 2 << 20
    small = HostGit(hooks=host.hooks, output=1 << 20)
    with pytest.raises(HostGitError, match=r"printed more than 1 MiB and was stopped"):
        small.run(*args, workspace=ws)
    assert host.run(*args, workspace=ws).returncode == 0  # the default bound is larger


REWRITE = '[url "/elsewhere/"]\n\tinsteadOf = /tmp/\n'


@pytest.mark.english
@pytest.mark.parametrize("how", ["symlink", "proc", "chain"])
def test_a_working_tree_config_is_the_agents_wherever_it_leads(
    how: str, ws: Path, host: HostGit, tmp_path: Path
) -> None:
    """The runner's origin check judged a file by where it leads: the included `.gitconfig`
    made a link to a file outside the working tree (the box's shadow git directory is one
    the agent writes), an include of `/proc/self/cwd/...` (git's cwd is the working tree,
    flowerbox's is not), or an include chain from the working tree to such a file."""
    outside = tmp_path / "box-area" / "evil.cfg"  # as ~/.local/state/flowerbox-box/<run>/git
    outside.parent.mkdir()
    outside.write_text(REWRITE)
    include(ws, "")
    (ws / ".gitconfig").unlink()
    if how == "symlink":
        (ws / ".gitconfig").symlink_to(outside)
    elif how == "proc":
        (ws / "evil.cfg").write_text(REWRITE)
        (ws / ".gitconfig").write_text("[include]\n\tpath = /proc/self/cwd/evil.cfg\n")
    else:
        (ws / ".gitconfig").write_text(f'[includeIf "gitdir:/"]\n\tpath = {outside}\n')
    assert "/elsewhere/" in git(ws, "config", "--get-regexp", r"^url\.").stdout
    with pytest.raises(HostGitError, match=r"sets url\./elsewhere/\.insteadof"):
        host.run("rev-parse", "HEAD", workspace=ws)


def test_the_working_tree_cannot_make_your_repository_world_writable(
    ws: Path, host: HostGit, tmp_path: Path
) -> None:
    """`core.sharedRepository = 0666` from the included `.gitconfig`: every ref, object and
    index file git writes is then writable by every user of the machine. flowerbox's writes
    keep your own setting (here none: your umask)."""
    include(ws, "[core]\n\tsharedRepository = 0666\n")
    git(ws, "update-ref", "refs/heads/control", "HEAD")
    assert (ws / ".git/refs/heads/control").stat().st_mode & 0o002
    assert host.run("update-ref", "refs/heads/b", "HEAD", workspace=ws).returncode == 0
    assert host.run("read-tree", "--reset", "HEAD", workspace=ws).returncode == 0
    for written in (ws / ".git/refs/heads/b", ws / ".git/index"):
        assert not written.stat().st_mode & 0o002, written
    git(ws, "config", "core.sharedRepository", "group")  # your own: kept
    assert host.run("update-ref", "refs/heads/c", "HEAD", workspace=ws).returncode == 0
    assert (ws / ".git/refs/heads/c").stat().st_mode & 0o060 == 0o060


@pytest.mark.parametrize("defined", ["include", "yours"])
def test_no_filter_runs_when_the_index_is_reset(
    defined: str, ws: Path, host: HostGit, mark: Path
) -> None:
    """bring_back's fast-forward resets the index with `read-tree --reset`, which checks
    the content of a racily clean entry (saved in the second git last wrote the index)
    through the clean filter `.gitattributes` names (the box writes it): a driver of the
    agent's (the included `.gitconfig`), or one of yours whose command lies in the working
    tree (`filter.strip.clean = ./tools/strip`, as notebook strippers are set up). None
    runs: every filter the config defines is emptied."""
    later = time.time() + 3600
    os.utime(ws / "f", (later, later))
    git(ws, "add", "f")  # racily clean from now on: its time is not before the index's
    script = ws / "tools" / "strip"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\n{planted(mark)}\ncat\n")
    script.chmod(0o755)
    driver = '[filter "strip"]\n\tclean = ./tools/strip\n\trequired = true\n'
    if defined == "include":
        include(ws, driver)
    else:
        (ws / ".git" / "config").write_text((ws / ".git" / "config").read_text() + driver)
    (ws / ".gitattributes").write_text("* filter=strip\n")
    mark.unlink(missing_ok=True)
    git(ws, "read-tree", "--reset", "HEAD", check=False)
    assert mark.exists()
    mark.unlink()
    done = host.run("read-tree", "--reset", "HEAD", workspace=ws)
    assert done.returncode == 0, done.stderr
    assert not mark.exists()


@pytest.mark.english
def test_a_fifo_in_place_of_an_included_config_holds_no_git_for_long(
    ws: Path, host: HostGit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run replaced the tracked `.gitconfig` your repository includes with a FIFO: your
    own git waits on it until a writer comes (the control, cut off), and HostGit's listing of
    the config used to hold every flowerbox git call there for its whole 900 s. It gives up
    after CONFIG_TIMEOUT, says why, and runs no git."""
    include(ws, "[user]\n\tname = the team\n")
    (ws / ".gitconfig").unlink()
    os.mkfifo(ws / ".gitconfig")
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run(["git", "-C", str(ws), "config", "--list"], capture_output=True, timeout=3)
    monkeypatch.setattr(hostgit, "CONFIG_TIMEOUT", 2.0)
    with pytest.raises(HostGitError, match=r"took over 2 s.* may be a FIFO"):
        host.run("rev-parse", "HEAD", workspace=ws)


def test_a_fifo_as_the_diff_order_file_holds_no_diff(ws: Path, host: HostGit) -> None:
    """`diff.orderFile` in the included config, naming a FIFO the run made: your own `git
    diff` waits on it (the control, cut off); flowerbox's reads no order file at all."""
    include(ws, "[diff]\n\torderFile = order\n")
    os.mkfifo(ws / "order")
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run(["git", "-C", str(ws), "diff", "HEAD~1", "HEAD"], timeout=3)
    done = host.run("diff", "--stat", "HEAD~2", "HEAD", workspace=ws)
    assert done.returncode == 0 and "2 files changed" in done.stdout
