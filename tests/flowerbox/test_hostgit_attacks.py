"""Attacks on flowerbox.hostgit (issue 37, G1), as a hostile agent that wrote the working tree
of the user's repository (and the box's shadow git directory) would try them against the git
calls flowerbox makes after a run. Each case runs its setup through the user's own git first
(the control: the planted command runs, or the file is read), then through HostGit."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from flowerbox.hostgit import HostGit, HostGitError
from tests.flowerbox import test_hostgit as base
from tests.flowerbox.test_hostgit import git, include, planted

# test_hostgit's fixtures, registered here under the names they are used by: a home of the test's
# own, the user's repository `ws`, a HostGit `host`, the planted command's `mark`
git_env, ws, host, mark = base.git_env, base.ws, base.host, base.mark

MISSING = "1234567890abcdef1234567890abcdef12345678"  # a commit the repository lacks


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
