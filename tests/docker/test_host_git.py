"""Host git never runs the agent's code, whatever the user's configuration (issue 37, G1 and
G2; docs/threat-model.md): the repository keeps its hooks inside the working tree (husky's
`.husky/_`, a `.githooks` convention, a tracked file its config includes) or the user's
~/.gitconfig names a relative hooks path. The agent plants hooks there (and rewrites the
included file) from inside a real box through the scripted model's Bash tool, commits on the
user's branch and on a delivery branch; the host then fetches, fast-forwards, resets the
index and appends notes. No marker appears on the host, and the branches and the note
arrive. Then: a new run cannot move an earlier run's delivery branch.

Markers live in the host's /tmp (test_trust_boundary's `mark`): the box's /tmp is a tmpfs of
its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.testing import FakeAPI
from tests.docker import test_trust_boundary as boundary
from tests.docker.e2e import as_user, box_env, home_of, metas
from tests.docker.test_trust_boundary import IDENTITY, Outside, flowerbox, plant, tool_output

pytestmark = pytest.mark.docker
mark, nothing_left = boundary.mark, boundary.nothing_left  # the fixtures: a marker, no leftovers

User = tuple[str, int, int]
DELIVERY = "flower/20261201-120000-abc123"
HOOKS = (
    "reference-transaction", "post-checkout", "post-index-change", "post-merge",
    "post-commit", "post-rewrite", "pre-push", "pre-auto-gc",
)  # fmt: skip


@pytest.fixture
def global_config(host_user: User) -> Iterator[Path]:
    """The e2e user's ~/.gitconfig (in its suite home), put back as it was after the test."""
    path = home_of(host_user) / ".gitconfig"
    before = path.read_bytes() if path.exists() else None
    yield path
    if before is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(before)


def users(user: User, ws: Path, *args: str) -> str:
    """The user's git in the workspace (no hooks of the box's exist yet when it commits)."""
    done = as_user(user, ["git", "-C", str(ws), *args], cwd=ws)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def hooks_script(folder: str, mark: Path) -> str:
    """Shell lines that plant every hook the host's git could meet in `folder`."""
    return "\n".join(
        [f"mkdir -p {folder}"]
        + [
            f"printf '#!/bin/sh\\ntouch {mark}\\n' > {folder}/{name} && chmod +x {folder}/{name}"
            for name in HOOKS
        ]
    )


WORK = f"""
echo work > work.txt && git add work.txt && {IDENTITY} commit -q --no-verify -m work
git checkout -q -b {DELIVERY}
echo done > done.txt && git add done.txt && {IDENTITY} commit -q --no-verify -m delivered
git checkout -q -
echo planted
"""


def configure(variant: str, user: User, ws: Path, global_config: Path, mark: Path) -> str:
    """Set the user's configuration up as the variant has it; the attack's script."""
    if variant == "husky":
        users(user, ws, "config", "core.hooksPath", ".husky/_")
        return hooks_script(".husky/_", mark)
    if variant == "githooks":
        users(user, ws, "config", "core.hooksPath", ".githooks")
        return hooks_script(".githooks", mark)
    if variant == "global-relative":
        global_config.write_text("[core]\n\thooksPath = .githooks\n")
        return hooks_script(".githooks", mark)
    # a tracked .gitconfig the repository's config includes: the team's settings
    (ws / ".gitconfig").write_text("[core]\n\tautocrlf = false\n")
    os.chown(ws / ".gitconfig", user[1], user[2])  # the user's file, as the box sees it
    users(user, ws, "add", ".gitconfig")
    users(user, ws, "-c", "user.name=me", "-c", "user.email=me@localhost", "commit", "-q",
          "-m", "the team's git config")  # fmt: skip
    users(user, ws, "config", "include.path", "../.gitconfig")
    if variant == "include-hooks":
        return "printf '[core]\\n\\thooksPath = .agent\\n' > .gitconfig\n" + hooks_script(
            ".agent", mark
        )
    return f"printf '[core]\\n\\tfsmonitor = touch {mark}\\n' > .gitconfig"


# What the end of the run reports the agent changed where the user's own git reads or runs it.
REPORTED = {
    "husky": "created .husky/_/reference-transaction",
    "githooks": "created .githooks/reference-transaction",
    "include-hooks": "changed .gitconfig",
    "include-fsmonitor": "changed .gitconfig",
    "global-relative": "created .githooks/reference-transaction",
}


@pytest.mark.parametrize("variant", list(REPORTED))
def test_no_hook_of_the_agents_runs_in_the_hosts_git_whatever_the_users_config(
    variant: str,
    real_api: FakeAPI,
    host_user: User,
    user_workspace: Path,
    flowerbox_image: str,
    mark: Path,
    global_config: Path,
) -> None:
    ws = user_workspace
    attack = configure(variant, host_user, ws, global_config, mark)
    start = users(host_user, ws, "rev-parse", "HEAD")
    outside = Outside(host_user, mark)
    before = outside.digest()
    plant(real_api, ws, f"set -e\n{attack}\n{WORK}")
    done = flowerbox(host_user, ws, "once", "work", env=box_env(real_api, host_user))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "planted" in tool_output(real_api)
    assert not mark.exists(), "the agent's code ran in the host's git"
    [run_id] = metas(host_user, ws)
    assert users(host_user, ws, "log", "--format=%s", "-1") == "work"  # fast-forwarded
    assert users(host_user, ws, "log", "--format=%s", "-1", DELIVERY) == "delivered"
    noted = users(host_user, ws, "log", "--notes=flowerbox", "--format=%N", f"{start}..HEAD")
    assert f"flowerbox-run: {run_id}" in noted
    assert f"the run {REPORTED[variant]}: a later" in done.stderr
    assert outside.digest() == before


G2_ATTACK = f"""
set -e
git checkout -q {DELIVERY}
echo more > more.txt && git add more.txt && {IDENTITY} commit -q -m "another run's"
git checkout -q -
echo moved-it
"""


def test_a_new_run_never_moves_an_earlier_runs_delivery_branch(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    """G2: the first run delivers flower/<id> under its own name; a second, new run adds a
    commit on it (a fast-forward): the branch stays where the first run left it, and the
    second run's commit comes back under its own prefix."""
    ws = user_workspace
    env = box_env(real_api, host_user)
    plant(real_api, ws, f"set -e\n{WORK}")
    assert flowerbox(host_user, ws, "once", "work", env=env).returncode == 0
    delivered = users(host_user, ws, "rev-parse", DELIVERY)
    first = set(metas(host_user, ws))
    plant(real_api, ws, G2_ATTACK)
    done = flowerbox(host_user, ws, "once", "more", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "moved-it" in tool_output(real_api)
    [second] = set(metas(host_user, ws)) - first
    assert users(host_user, ws, "rev-parse", DELIVERY) == delivered
    moved = users(host_user, ws, "log", "--format=%s", "-1", f"flowerbox/{second}/{DELIVERY}")
    assert moved == "another run's"
