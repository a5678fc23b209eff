"""The self-test's host-boundary checks without an engine: the box's planting code
(flowerbox.selftest.tampering.host_plants, git_redirects' hooks folder) run here in a scratch
workspace, flowerbox's own host code run against it (flowerbox.selftest.hostboundary) and judged
(flowerbox.selftest.verdicts.judge_host): every check PASSes; the same plants met by a host that
trusts the workspace (a lookup that reads ./.env, records read from runs/, links and FIFOs
followed, the user's own .git given to the box) FAIL each check; and afterwards the workspace
is as it was. The engine test (tests/docker/test_selftest.py) plants from inside a real box."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowerbox.box import state
from flowerbox.box.spec import BoxSpec
from flowerbox.errors import RunError
from flowerbox.runs.records import Run
from flowerbox.selftest import hostboundary
from flowerbox.selftest.hostboundary import Area, check_run
from flowerbox.selftest.tampering import Plants, git_redirects, hooks_plant, host_plants
from flowerbox.selftest.verdicts import HOST_CHECKS, judge_host

TOKEN = "abc123def456"
PLANTS = Plants(TOKEN)
RUN_ID = "20261201-000000-abcdef"
PORT = 9
# What a host that reads the workspace's .env would do: flower's lookup with the project's
# files (plain `flower` on the host does this, by design).
TRUSTING_LOOKUP = hostboundary.LOOKUP.replace(
    "from flowerbox.box.prepare import load_credentials",
    "from flower import load_dotenv\nfrom flower.core.env import Lookup",
).replace("    load_credentials(Path.cwd())", "    load_dotenv(lookup=Lookup.from_process())")


@dataclass
class Scene:
    ws: Path
    area: Area
    spec: BoxSpec
    shadow: Path  # stands for the box's own gitdir

    @property
    def run(self) -> Run:
        return check_run(self.spec, PLANTS)

    def args(self, workspace: Path | None = None) -> argparse.Namespace:
        return argparse.Namespace(
            workspace=str(workspace or self.ws),
            token=TOKEN,
            host_marker=self.area.marker,
            outside=str(self.area.outside),
            server=("127.0.0.1", PORT),
            run_id=RUN_ID,
        )

    def plant(self) -> str:
        """host_plants here, and the git plant in the shadow (as in a real box): the box's
        report lines, as judge_host reads them."""
        planted = host_plants(self.args())
        hooks_plant(self.shadow, TOKEN, self.area.marker)
        (self.shadow / "commondir").write_text(f"fbx-hooks-{TOKEN}\n")
        git = {"probe": "git_redirects", "git": "folder", "commondir": "planted"}
        return "\n".join([json.dumps({"probe": "host_plants", **planted}), json.dumps(git)])

    def observe(self, **observed: dict[str, Any]) -> dict[str, dict[str, Any]]:
        real = hostboundary.observe(
            self.ws,
            PLANTS,
            run=self.run,
            area=self.area,
            port=PORT,
            received=[],
            repo_changed=[],
            git=True,
        )
        return {**real, **observed}


def listing(ws: Path) -> list[str]:
    return sorted(
        str(p.relative_to(ws)) for p in ws.rglob("*") if ".git" not in p.relative_to(ws).parts
    )


@pytest.fixture
def scene(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scene]:
    home = tmp_path / "home"
    home.mkdir()
    for key, value in {
        "HOME": home,
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_STATE_HOME": tmp_path / "state",
    }.items():
        monkeypatch.setenv(key, str(value))
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "FLOWER_ENV"):
        monkeypatch.delenv(key, raising=False)
    ws = tmp_path / "ws"
    (ws / "runs").mkdir(parents=True)
    (ws / "notes.txt").write_text("mine\n")
    git = ["git", "-c", "user.name=me", "-c", "user.email=me@localhost"]
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "start"], cwd=ws, check=True)
    spec = BoxSpec(
        image="img",
        workspace=ws,
        run_dir=ws / "runs",
        home=ws / "runs" / "home",
        socket_dir=tmp_path / "s",
        secrets_dir=tmp_path / "k",
        state_dir=state.run_folder(RUN_ID),
        uid=os.getuid(),
        gid=os.getgid(),
        command=(),
        run_id=RUN_ID,
    )
    shadow = tmp_path / "shadow-git"
    shadow.mkdir()
    area = Area.make(ws, TOKEN)
    yield Scene(ws, area, spec, shadow)
    hostboundary.remove(ws, PLANTS, area, run_id=RUN_ID)


def test_flowerboxs_host_code_ignores_every_plant_and_the_workspace_is_left_as_it_was(
    scene: Scene,
) -> None:
    before = listing(scene.ws)
    output = scene.plant()
    assert (scene.ws / ".env").is_file() and (scene.ws / PLANTS.record).is_file()
    verdicts = judge_host(output, scene.observe(), forged=PLANTS.forged_id)
    assert [v.probe for v in verdicts] == list(HOST_CHECKS)
    assert [v for v in verdicts if not v.ok] == []
    assert hostboundary.remove(scene.ws, PLANTS, scene.area, run_id=RUN_ID) == []
    assert listing(scene.ws) == before
    assert not scene.area.outside.exists() and scene.area.markers() == []


@pytest.mark.english
def test_a_host_that_reads_the_workspace_dotenv_fails(scene: Scene) -> None:
    output = scene.plant()
    trusting = hostboundary.dotenv(scene.ws, PLANTS, port=PORT, script=TRUSTING_LOOKUP)
    observed = scene.observe(dotenv_redirect={**trusting, "received": [], "ran": []})
    [verdict] = [v for v in judge_host(output, observed, forged="") if v.probe == "dotenv_redirect"]
    assert not verdict.ok
    assert "took ANTHROPIC_BASE_URL, PYTHONPATH from it" in verdict.why
    assert "ANTHROPIC_BASE_URL came from ./.env" in verdict.why


def _workspace_records(ws: Path) -> list[Run]:
    """A host that keeps its records in the workspace (flowerbox before issue 15)."""
    found = []
    for meta in sorted((ws / "runs" / "flowerbox").glob("*/meta.json")):
        found.append(Run(meta.parent, json.loads(meta.read_text())))
    return found


def _find_in_workspace(ws: Path, run_id: str | None) -> Run:
    for run in _workspace_records(ws):
        if run.run_id == run_id:
            return run
    raise RunError(f"no run {run_id!r}")


def _idle_by_workspace(ws: Path) -> None:
    for run in _workspace_records(ws):
        if run.running:
            raise RunError(f"run {run.run_id} is still running in {ws}")


@pytest.mark.english
def test_a_host_that_takes_run_records_from_the_workspace_fails(scene: Scene) -> None:
    output = scene.plant()
    trusting = hostboundary.forged_record(
        scene.ws,
        PLANTS,
        listed=_workspace_records,
        find=_find_in_workspace,
        idle=_idle_by_workspace,
    )
    observed = scene.observe(forged_record={**trusting, "outside": []})
    [verdict] = [
        v
        for v in judge_host(output, observed, forged=PLANTS.forged_id)
        if v.probe == "forged_record"
    ]
    assert not verdict.ok
    assert "ps lists it; stop/resume find it; a new run is refused for it" in verdict.why


def _following_read(root: Path, relative: Any, **bounds: int) -> bytes:
    with open(root / relative, "rb") as handle:  # follows links, opens FIFOs blocking
        return handle.read(bounds["limit"])


def _following_asks(run: Run) -> list[dict[str, Any]]:
    data = json.loads(_following_read(run.workspace, run.run_dir / "asks.json", limit=1 << 20))
    return list(data)


def _following_drop(run: Run, data: dict[str, str]) -> str:
    path = run.run_dir / "inbox" / "0001.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.english
def test_a_host_that_follows_links_in_runs_fails(scene: Scene) -> None:
    output = scene.plant()
    trusting = hostboundary.linked(
        scene.run, asks=_following_asks, drop=_following_drop, read=_following_read
    )
    observed = scene.observe(linked_runs_files={**trusting, "outside": scene.area.outside_now()})
    [verdict] = [
        v for v in judge_host(output, observed, forged="") if v.probe == "linked_runs_files"
    ]
    assert not verdict.ok
    for words in (
        "reading the questions broke",
        "asks.json -> /dev/zero was read (1048576 bytes)",
        "an answer was dropped through the inbox link",
        "written in the folder outside: 0001.json",
    ):
        assert words in verdict.why, verdict.why


@pytest.mark.english
def test_a_host_that_opens_a_fifo_fails_instead_of_hanging(scene: Scene) -> None:
    output = scene.plant()
    trusting = hostboundary.fifos(scene.run, PLANTS, read=_following_read, deadline=0.3)
    observed = scene.observe(fifo_runs_files=trusting)
    [verdict] = [v for v in judge_host(output, observed, forged="") if v.probe == "fifo_runs_files"]
    assert not verdict.ok
    assert "reading the events file (a FIFO) hung" in verdict.why
    assert "reading the gateway meter (a FIFO) hung" in verdict.why
    # remove() (the fixture's) opens each FIFO once for writing: the stuck readers end.


@pytest.mark.english
def test_a_box_given_the_users_own_git_fails_the_git_check(scene: Scene) -> None:
    """git_redirects' plant where the box has the user's .git itself (users_gitdir): the
    user's next `git status` runs the box's hook and fsmonitor."""
    observation = git_redirects(scene.args())
    assert observation["commondir"] == "planted"
    assert (scene.ws / ".git" / "commondir").read_text() == f"fbx-hooks-{TOKEN}\n"
    output = json.dumps({"probe": "git_redirects", **observation})
    observed = hostboundary.git_status(scene.ws)
    observed.update(ran=scene.area.markers(), repo_changed=[".git/commondir"])
    [verdict] = [
        v
        for v in judge_host(output, {"git_hook_redirect": observed}, forged="")
        if v.probe == "git_hook_redirect"
    ]
    assert not verdict.ok
    assert "reached your repository" in verdict.why
    assert f"fbx-selftest-{TOKEN}-fsmonitor and fbx-selftest-{TOKEN}-hook" in verdict.why
    (scene.ws / ".git" / "commondir").unlink()
    hostboundary.remove_git_plant(scene.ws, TOKEN)
    assert not (scene.ws / ".git" / f"fbx-hooks-{TOKEN}").exists()
    assert (scene.ws / ".git" / "objects").is_dir()  # the plant's links were not followed


# --- the judge alone ------------------------------------------------------------------------


def plants_line(**changes: str) -> str:
    planted = dict.fromkeys(("dotenv", "record", "links", "fifos"), "planted")
    git = {"probe": "git_redirects", "git": "folder", "commondir": "planted"}
    return "\n".join([json.dumps({"probe": "host_plants", **planted, **changes}), json.dumps(git)])


@pytest.mark.english
def test_an_attack_that_was_not_planted_fails_its_check(scene: Scene) -> None:
    output = scene.plant()
    observed = scene.observe()
    cases = {
        "dotenv_redirect": ("dotenv", "yours, and writable here", "could be written in the box"),
        "forged_record": ("record", "PermissionError: denied", "not planted: PermissionError"),
        "linked_runs_files": ("links", "FileExistsError: x", "not planted: FileExistsError"),
        "fifo_runs_files": ("fifos", "OSError: no mkfifo", "not planted: OSError"),
    }
    for check, (key, plant, words) in cases.items():
        verdicts = judge_host(plants_line(**{key: plant}), observed, forged=PLANTS.forged_id)
        [verdict] = [v for v in verdicts if v.probe == check]
        assert not verdict.ok and words in verdict.why, verdict
    silent = judge_host("", observed, forged=PLANTS.forged_id)
    assert not any(v.ok for v in silent)
    assert output  # the real plants were made (and the fixture removes them)


@pytest.mark.english
def test_the_users_own_dotenv_read_only_in_the_box_passes_when_the_lookup_ignores_it(
    scene: Scene,
) -> None:
    (scene.ws / ".env").write_text("ANTHROPIC_BASE_URL=http://127.0.0.1:1/mine\n")
    area = Area.make(scene.ws, TOKEN)
    assert area.dotenv_before
    observed = {"yielded": [], "from_workspace": [], "error": "", "received": [], "ran": []}
    line = plants_line(dotenv="yours, read-only here (OSError: [Errno 30] Read-only file system)")
    [verdict] = [
        v
        for v in judge_host(line, {"dotenv_redirect": observed}, forged="")
        if v.probe == "dotenv_redirect"
    ]
    assert verdict.ok and "your own .env is here" in verdict.why
    hostboundary.remove(scene.ws, PLANTS, area, run_id=RUN_ID)
    assert (scene.ws / ".env").read_text() == "ANTHROPIC_BASE_URL=http://127.0.0.1:1/mine\n"


@pytest.mark.english
def test_outside_a_git_repository_the_git_check_is_not_a_pass() -> None:
    line = json.dumps({"probe": "git_redirects", "git": "absent"})
    observed = {"code": None, "stderr": "", "ran": [], "repo_changed": []}
    [verdict] = [
        v
        for v in judge_host(line, {"git_hook_redirect": observed}, forged="")
        if v.probe == "git_hook_redirect"
    ]
    assert not verdict.ok and "not tried" in verdict.why


def test_removing_the_plants_follows_no_link(scene: Scene, tmp_path: Path) -> None:
    """A plant replaced by a link to a folder of the user's: the link goes, the folder stays."""
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("keep\n")
    (scene.ws / PLANTS.run_dir).symlink_to(precious)
    (scene.ws / "runs" / "flowerbox").mkdir()
    (scene.ws / "runs" / "flowerbox" / PLANTS.forged_id).symlink_to(precious)
    assert hostboundary.remove(scene.ws, PLANTS, scene.area, run_id=RUN_ID) == []
    assert (precious / "keep.txt").read_text() == "keep\n"
    assert not os.path.lexists(scene.ws / PLANTS.run_dir)
    assert not (scene.ws / "runs" / "flowerbox").exists()


@pytest.mark.english
def test_a_host_side_that_does_not_report_fails(scene: Scene) -> None:
    broken = hostboundary.dotenv(scene.ws, PLANTS, port=PORT, script="raise SystemExit('gone')")
    assert broken == {"broken": "the lookup did not report: 'gone'"}
    verdicts = judge_host(plants_line(), {"dotenv_redirect": broken}, forged="")
    assert [v.ok for v in verdicts] == [False] * len(HOST_CHECKS)  # the rest: no observation
    assert "the host side did not report: the lookup did not report" in verdicts[0].why
