"""A run whose commits cannot come back when it ends keeps its git directory, and `flowerbox
deliver RUN` brings them back once the way is clear: bring_back's "kept for another try" had
no other try, and the directory went with the run (its commits with it). A real engine, as
the unprivileged e2e user; the user's own branch named `flowerbox` is what is in the way."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.testing import FakeAPI
from tests.docker.e2e import as_user, box_env, metas
from tests.docker.test_trust_boundary import IDENTITY, User, flowerbox, plant, tool_output

pytestmark = pytest.mark.docker

WORK = (
    "git checkout -q -b feature && echo work > work.txt && git add work.txt && "
    f"{IDENTITY} commit -q -m 'the work' && echo committed"
)


def test_commits_that_could_not_come_back_are_kept_and_delivered_later(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    ws, env = user_workspace, box_env(real_api, host_user)
    git = ["git", "-C", str(ws)]
    as_user(host_user, [*git, "branch", "flowerbox"], cwd=ws)  # in the way of flowerbox/RUN/*
    plant(real_api, ws, WORK)
    done = flowerbox(host_user, ws, "once", "work", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "committed" in tool_output(real_api)
    [run_id] = metas(host_user, ws)
    said = " ".join(done.stderr.split())
    assert "bring_back failed" in said and "挡住了 flowerbox/" in said
    assert f"`flowerbox deliver {run_id}` tries again" in said

    still = flowerbox(host_user, ws, "deliver", run_id, env=env)
    assert still.returncode == 2 and "提交失败" in still.stderr  # the way is not clear yet

    as_user(host_user, [*git, "branch", "-m", "flowerbox", "mine"], cwd=ws)
    delivered = flowerbox(host_user, ws, "deliver", run_id, env=env)
    assert delivered.returncode == 0, delivered.stderr[-3000:]
    branch = f"flowerbox/{run_id}/feature"
    shown = as_user(host_user, [*git, "log", "--format=%s", "-1", branch], cwd=ws)
    assert shown.stdout.strip() == "the work", shown.stderr
    again = flowerbox(host_user, ws, "deliver", run_id, env=env)
    assert again.returncode == 2 and "没有剩下可取回的" in again.stderr
