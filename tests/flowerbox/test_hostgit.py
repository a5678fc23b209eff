"""flowerbox.hostgit on plain repositories (issue 37, G1): each way a user's configuration
hands the working tree a command — a hooks path in it (husky's `.husky/_`, `.githooks`, a
relative one in ~/.gitconfig), a tracked file included from `.git/config` — and each key that
runs one. Every case runs the same git command twice: as the user's own git (the control: the
planted command runs, so the test can fail) and through HostGit (it never does)."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from flower import git_unexcluded
from flowerbox.hostgit import HostGit, HostGitError, empty_hooks
from tests.flowerbox import gitbombs

MiB = 1 << 20


@pytest.fixture(autouse=True)
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of the test's own (its ~/.gitconfig is the user's global config), no system
    config, an identity from the environment; the home's path."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for var in ("GIT_EDITOR", "EDITOR", "VISUAL", "GIT_PAGER"):
        monkeypatch.delenv(var, raising=False)
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "user")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "user@example.com")
    return home


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The user's own git: the control."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done


def repository(path: Path) -> Path:
    """A repository with one empty commit on main."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "commit", "-q", "--allow-empty", "-m", "one")
    return path


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """The user's repository: two commits on main, a file `f`."""
    ws = repository(tmp_path / "ws")
    (ws / "f").write_text("x\n")
    git(ws, "add", "f")
    git(ws, "commit", "-q", "-m", "two")
    return ws


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """Another repository to fetch from (as bring_back fetches from its own)."""
    return repository(tmp_path / "src")


@pytest.fixture
def host(tmp_path: Path) -> HostGit:
    return HostGit(hooks=empty_hooks(tmp_path / "state"))


@pytest.fixture
def mark(tmp_path: Path) -> Path:
    return tmp_path / "MARK"


def planted(mark: Path) -> str:
    """The agent's command: it appends to the marker when it runs."""
    return f"echo ran >> {mark}"


def hook(folder: Path, mark: Path) -> None:
    """Every hook flowerbox's calls could meet, planted in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    names = ("reference-transaction", "post-index-change", "post-checkout", "pre-push")
    for name in names:
        script = folder / name
        script.write_text(f"#!/bin/sh\n{planted(mark)}\n")
        script.chmod(0o755)


def include(ws: Path, text: str) -> None:
    """A tracked `.gitconfig` the repository's config includes: the agent can rewrite it."""
    (ws / ".gitconfig").write_text(text)
    git(ws, "add", ".gitconfig")
    git(ws, "commit", "-q", "-m", "the team's git config")
    git(ws, "config", "include.path", "../.gitconfig")


# -- hooks, wherever the configuration puts them ------------------------------------------------


HOOK_PLACES = ["husky", "githooks", "include", "global-relative", "default"]


def place_hooks(where: str, ws: Path, home: Path, mark: Path) -> None:
    match where:
        case "husky":
            git(ws, "config", "core.hooksPath", ".husky/_")
            hook(ws / ".husky" / "_", mark)
        case "githooks":
            git(ws, "config", "core.hooksPath", ".githooks")
            hook(ws / ".githooks", mark)
        case "include":
            include(ws, "[core]\n\thooksPath = agent-hooks\n")
            hook(ws / "agent-hooks", mark)
        case "global-relative":
            (home / ".gitconfig").write_text("[core]\n\thooksPath = .githooks\n")
            hook(ws / ".githooks", mark)
        case "default":  # the user's own .git/hooks: flowerbox's calls run none either
            hook(ws / ".git" / "hooks", mark)


@pytest.mark.parametrize("where", HOOK_PLACES)
def test_no_hook_runs_in_flowerboxs_ref_updates_fetch_notes_and_index(
    where: str, ws: Path, src: Path, host: HostGit, mark: Path, git_env: Path
) -> None:
    place_hooks(where, ws, git_env, mark)
    git(ws, "update-ref", "refs/heads/control", "HEAD")
    assert mark.exists(), "the control: the user's own git runs the planted hook"
    mark.unlink()
    calls = [
        ("update-ref", "-m", "flowerbox", "refs/heads/x", "HEAD"),
        ("fetch", "--quiet", "--no-write-fetch-head", str(src), "main:refs/heads/theirs"),
        ("-c", "user.name=f", "-c", "user.email=f@x", "notes", "--ref", "refs/notes/flowerbox",
         "append", "-m", "note", "HEAD"),
        ("read-tree", "--reset", "HEAD"),
        ("update-ref", "-d", "refs/heads/x"),
    ]  # fmt: skip
    for call in calls:
        done = host.run(*call, workspace=ws)
        assert done.returncode == 0, (call, done.stderr)
    assert not mark.exists(), "a hook ran in flowerbox's git"
    assert git(ws, "rev-parse", "theirs").stdout == git(src, "rev-parse", "main").stdout
    assert "note" in git(ws, "notes", "--ref", "refs/notes/flowerbox", "show", "HEAD").stdout


def test_the_hooks_folder_is_flowerboxs_empty_and_read_only(tmp_path: Path) -> None:
    state = tmp_path / "state"
    folder = empty_hooks(state)
    (folder.parent / "elsewhere").mkdir()
    folder.chmod(0o755)
    (folder / "reference-transaction").write_text("#!/bin/sh\n")
    assert empty_hooks(state) == folder
    assert list(folder.iterdir()) == []
    assert stat.S_IMODE(folder.stat().st_mode) == 0o555
    folder.chmod(0o755)
    folder.rmdir()
    folder.symlink_to(folder.parent / "elsewhere")
    assert not empty_hooks(state).is_symlink()


# -- each key a tracked include may set that runs a command --------------------------------------


def test_fsmonitor_never_runs(ws: Path, host: HostGit, mark: Path) -> None:
    include(ws, f"[core]\n\tfsmonitor = {planted(mark)}; false\n")
    for call in (("read-tree", "--reset", "HEAD"), ("ls-files", "--stage"),
                 ("diff-index", "--cached", "--quiet", "HEAD", "--")):  # fmt: skip
        git(ws, *call)
        assert mark.exists(), call
        mark.unlink()
        host.run(*call, workspace=ws)
        assert not mark.exists(), call


def test_the_start_of_a_later_run_runs_no_fsmonitor(ws: Path, mark: Path) -> None:
    """Before a box starts, flowerbox asks flower which run folders git does not ignore yet
    (`check-ignore` reads the index): an fsmonitor an earlier run wrote into the included
    file does not run there either."""
    include(ws, f"[core]\n\tfsmonitor = {planted(mark)}; false\n")
    git(ws, "check-ignore", "-q", "--", "runs/", check=False)
    assert mark.exists()
    mark.unlink()
    assert git_unexcluded(ws, [ws / "runs"]) == ["/runs/"]
    assert not mark.exists()


def test_an_alternate_refs_command_never_runs(
    ws: Path, src: Path, host: HostGit, mark: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", str(other))
    (ws / ".git" / "objects" / "info" / "alternates").write_text(f"{other}/.git/objects\n")
    include(ws, f"[core]\n\talternateRefsCommand = {planted(mark)}; true\n")
    git(ws, "fetch", "-q", str(src), "main:refs/heads/a")
    assert mark.exists()
    mark.unlink()
    done = host.run("fetch", "-q", str(src), "main:refs/heads/b", workspace=ws)
    assert done.returncode == 0, done.stderr
    assert not mark.exists()


def test_no_external_diff_or_textconv_runs(ws: Path, host: HostGit, mark: Path) -> None:
    (ws / ".gitattributes").write_text("* diff=evil\n")
    include(ws, f"[diff]\n\texternal = {mark.parent / 'ext'}\n[diff \"evil\"]\n"
                f"\ttextconv = sh -c '{planted(mark)}; cat \"$0\"'\n")  # fmt: skip
    (mark.parent / "ext").write_text(f"#!/bin/sh\n{planted(mark)}\n")
    (mark.parent / "ext").chmod(0o755)
    (ws / "f").write_text("y\n")
    git(ws, "commit", "-qam", "three")
    git(ws, "diff", "HEAD~1", "HEAD")
    assert mark.exists()
    mark.unlink()
    done = host.run("diff", "HEAD~1", "HEAD", workspace=ws)
    assert done.returncode == 0 and "+y" in done.stdout
    assert not mark.exists()


def test_no_editor_runs(ws: Path, host: HostGit, mark: Path) -> None:
    include(ws, f"[core]\n\teditor = {planted(mark)};\n")
    git(ws, "notes", "append", "HEAD", check=False)
    assert mark.exists()
    mark.unlink()
    host.run("notes", "append", "HEAD", workspace=ws)
    assert not mark.exists()


@pytest.mark.parametrize("transport", ["ssh", "ext"])
def test_only_the_callers_transports_are_reached(
    ws: Path, host: HostGit, mark: Path, transport: str
) -> None:
    """An ssh command of the working tree's, or the ext transport it allows, runs for the
    user's own `ls-remote`; HostGit reaches `file` alone (a caller names others)."""
    if transport == "ssh":
        include(ws, f"[core]\n\tsshCommand = {planted(mark)}; false\n")
        url = "ssh://example.invalid/x"
    else:
        include(ws, '[protocol "ext"]\n\tallow = always\n')
        url = f"ext::sh -c touch% {mark}"  # ext's own quoting: % before a space
    git(ws, "ls-remote", url, check=False)
    assert mark.exists()
    mark.unlink()
    done = host.run("ls-remote", url, workspace=ws)
    assert done.returncode != 0 and not mark.exists()


def test_trace2_from_an_included_global_file_writes_nothing(
    ws: Path, host: HostGit, git_env: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.json"
    (ws / "team.gitconfig").write_text(f"[trace2]\n\teventTarget = {trace}\n")
    (git_env / ".gitconfig").write_text(f"[include]\n\tpath = {ws / 'team.gitconfig'}\n")
    git(ws, "rev-parse", "HEAD")
    assert trace.exists()
    trace.unlink()
    host.run("rev-parse", "HEAD", workspace=ws)
    assert not trace.exists()


@pytest.mark.english
def test_a_url_rewrite_from_the_working_tree_is_refused(ws: Path, host: HostGit) -> None:
    include(ws, '[url "ext::sh -c evil "]\n\tinsteadOf = /\n')
    with pytest.raises(HostGitError, match=r"\.gitconfig sets url\..*move that setting"):
        host.run("rev-parse", "HEAD", workspace=ws)
    git(ws, "config", "--unset", "include.path")
    assert host.run("rev-parse", "HEAD", workspace=ws).returncode == 0


def test_weakened_fsck_from_the_working_tree_is_set_back(
    ws: Path, src: Path, host: HostGit
) -> None:
    tree = git(src, "rev-parse", "HEAD^{tree}").stdout.strip()
    bad = f"tree {tree}\nauthor a <a@b> 1 +99999\ncommitter a <a@b> 1 +0000\n\nbad zone\n"
    made = subprocess.run(
        ["git", "hash-object", "-t", "commit", "--literally", "-w", "--stdin"],
        cwd=src, input=bad, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    git(src, "update-ref", "refs/heads/bad", made)
    include(ws, '[fetch "fsck"]\n\tbadTimezone = ignore\n')
    fetch = ("-c", "fetch.fsckObjects=true", "fetch", "-q", str(src))
    done = host.run(*fetch, "bad:refs/heads/hardened", workspace=ws)
    assert done.returncode != 0 and "badTimezone" in done.stderr
    git(ws, *fetch, "bad:refs/heads/control")  # the control, second: the object is new to ws


def test_the_callers_git_variables_are_not_inherited(
    ws: Path, host: HostGit, mark: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook(tmp_path / "their-hooks", mark)
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.hookspath'='{tmp_path / 'their-hooks'}'")
    done = host.run("update-ref", "refs/heads/y", "HEAD", workspace=ws)
    assert done.returncode == 0, done.stderr
    assert not mark.exists()
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_CONFIG_PARAMETERS")
    assert git(ws, "rev-parse", "y").stdout == git(ws, "rev-parse", "HEAD").stdout


@pytest.mark.english
def test_only_the_subcommands_flowerbox_needs_run(ws: Path, host: HostGit) -> None:
    refused = [("status",), ("checkout", "main"), ("merge", "x"), ("commit",), ("gc",),
               ("my-alias",), ("clone", ".", "copy"), ("worktree", "add", "../w")]  # fmt: skip
    for command in refused:
        with pytest.raises(HostGitError, match=f"does not run `git {command[0]}`"):
            host.run(*command, workspace=ws)
    assert host.run("worktree", "list", workspace=ws).returncode == 0


# -- bounds ------------------------------------------------------------------------------------


def test_memory_is_bounded_for_git_and_its_children(tmp_path: Path, host: HostGit) -> None:
    """A 200-byte pack whose deltas build a 128 MiB blob: indexed under the default bound,
    refused under 64 MiB of address space."""
    bare = tmp_path / "t.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    pack = gitbombs.delta_bomb(128 * MiB)
    path = bare / "objects" / "pack" / gitbombs.pack_name(pack)
    path.write_bytes(pack)
    small = HostGit(hooks=host.hooks, memory=64 * MiB)
    assert small.run("index-pack", str(path), repo=bare).returncode != 0
    assert host.run("index-pack", str(path), repo=bare).returncode == 0


@pytest.mark.english
def test_a_git_past_its_time_is_stopped_with_its_children(
    tmp_path: Path, host: HostGit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A git that hangs (a stand-in on PATH, and a child it started): the call ends at its
    timeout, says so, and the child is gone too."""
    bin_dir, pid_file = tmp_path / "bin", tmp_path / "child.pid"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pid_file}\nwait\n")
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    slow = HostGit(hooks=host.hooks, timeout=1)
    with pytest.raises(HostGitError, match="ran past 1 s and was stopped"):
        slow.run("fetch", "x", repo=tmp_path)
    child = int(pid_file.read_text())
    for _ in range(50):
        if not Path(f"/proc/{child}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text()


@pytest.mark.parametrize("where", HOOK_PLACES)
def test_what_your_own_git_reads_from_the_working_tree_is_named(
    where: str, ws: Path, host: HostGit, mark: Path, git_env: Path
) -> None:
    """The files and the hooks folder a run's end reports changes in (boundary.watched)."""
    place_hooks(where, ws, git_env, mark)
    expected = {
        "husky": [ws / ".husky" / "_"],
        "githooks": [ws / ".githooks"],
        "include": [ws / ".gitconfig", ws / "agent-hooks"],
        "global-relative": [ws / ".githooks"],
        "default": [],  # .git/hooks: the box never sees it
    }[where]
    assert host.in_tree(ws) == sorted(p.resolve() for p in expected)
