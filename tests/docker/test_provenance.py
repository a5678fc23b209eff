"""Provenance on a real engine, as the e2e user: the scripted model commits from inside the
box, and after the run the host has put a note in refs/notes/flowerbox on that commit (and on
no older one) naming the run, the image, the versions, the model, the network and the cost.
Attached (the CLI writes it) and detached (the run's supervisor writes it)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from docker import DockerClient  # noqa: TID251 - the image id the note must name

from flower.testing import FakeAPI, Reply, Request, When, rules, text, tool
from tests.docker.e2e import FLOWERBOX, as_user, box_env, metas, usage_of
from tests.json_contract import parse_document

pytestmark = pytest.mark.docker

COMMIT = (
    "git -c user.name=agent -c user.email=agent@localhost commit -q --allow-empty "
    "-m 'work of the agent' && git rev-parse HEAD"
)


def note_on(user: tuple[str, int, int], ws: Path, commit: str) -> subprocess.CompletedProcess[str]:
    show = ["git", "-C", str(ws), "notes", "--ref", "refs/notes/flowerbox", "show", commit]
    return as_user(user, show, cwd=ws)


@pytest.mark.parametrize("detached", [False, True], ids=["attached", "detached"])
def test_a_commit_made_in_the_box_gets_a_note_on_the_host(
    detached: bool,
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    user_workspace: Path,
    flowerbox_image: str,
    docker_client: DockerClient,
) -> None:
    def model(request: Request) -> Reply:
        if request.tool_results():
            return text("committed")
        return tool("Bash", {"command": COMMIT})

    real_api.script = rules((When(), model))
    git = ["git", "-C", str(user_workspace)]
    start = as_user(host_user, [*git, "rev-parse", "HEAD"], cwd=user_workspace).stdout.strip()

    once = [FLOWERBOX, "once", "commit your work", *(["--detach"] if detached else [])]
    done = as_user(host_user, once, cwd=user_workspace, env=box_env(real_api, host_user))
    assert done.returncode == 0, done.stderr[-3000:]
    if detached:  # the supervisor notes the commits after the run: wait for the note
        deadline = time.monotonic() + 240
        while not real_api.requests or not real_api.requests[-1].tool_results():
            assert time.monotonic() < deadline, "the detached run never reached its commit"
            time.sleep(0.5)
    [result] = [r.text for req in real_api.requests for r in req.tool_results()]
    made = result.strip().splitlines()[-1]
    assert made != start
    note = note_on(host_user, user_workspace, made)
    deadline = time.monotonic() + 60
    while detached and note.returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.5)
        note = note_on(host_user, user_workspace, made)
    if not detached:
        assert "noted 1 commit(s)" in done.stderr
    assert note.returncode == 0, note.stderr
    fields = dict(line.split(": ", 1) for line in note.stdout.splitlines())
    [run_id] = metas(host_user, user_workspace)
    assert fields["flowerbox-run"] == run_id
    assert fields["image"] == f"{flowerbox_image} {docker_client.images.get(flowerbox_image).id}"
    usage = usage_of(host_user, user_workspace)
    assert fields["model"] == ", ".join(sorted(usage["models"])) != "none recorded"
    assert fields["cost"] == f"${usage['total_cost_usd']:.6f} ({usage['requests']} requests)"
    assert fields["network"] == "allowlist: empty (no network)" and fields["exit"] == "0"
    # The isolation the engine recorded for this run's box, in the note and in ps --json.
    hardened = f"uid {host_user[1]}:{host_user[2]}, groups none, caps none, seccomp default, "
    hardened += "no-new-privileges, network none, runtime runc, read-only root"
    assert fields["box"].startswith(hardened), fields["box"]
    listed = as_user(host_user, [FLOWERBOX, "ps", "--json"], cwd=user_workspace)
    [row] = parse_document(listed.stdout)["runs"]
    assert row["box"]["cap_drop"] == ["ALL"] and row["box"]["read_only_root"] is True
    assert fields["claude-code"] and fields["flower"]
    assert (
        note_on(host_user, user_workspace, start).returncode != 0
    )  # the commit from before the run has no note
