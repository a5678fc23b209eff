"""docker/prepare.sh touches only what it made: its build's leftovers go by the build id our
Dockerfile sets on every stage it builds, never by a global prune (tests/docker/
test_image_prune.py runs two real builds)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.setup.stubs import ROOT, run_script

SCRIPTS = [ROOT / "Makefile", ROOT / ".ci" / "run", *sorted((ROOT / "docker").glob("*.sh"))]


def test_prepare_removes_only_its_builds_leftovers_by_their_label(tmp_path: Path) -> None:
    run = run_script("prepare.sh", tmp_path, flags=("up", "have/flowerbox-base_bookworm"))
    assert run.code == 0, run.said
    assert run.called("docker build --network host --build-arg BASE_IMAGE=flowerbox-base:bookworm")
    removals = [
        c for c in run.calls if re.match(r"docker (image |container |system )?(prune|rmi|rm)", c)
    ]
    # this build's own id (issue 36: by the project's label alone, one user's build removed
    # another's), passed to the build that puts it on each stage
    (build,) = [c for c in run.calls if c.startswith("docker build ")]
    build_id = re.search(r"FLOWERBOX_BUILD_ID=([0-9a-f-]{36}) ", build)
    assert build_id, build
    assert removals == [f"docker image prune -f --filter label=dev.flower.build.id={build_id[1]}"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = dockerfile.count("\nFROM ")
    assert dockerfile.count('dev.flower.build.id="${FLOWERBOX_BUILD_ID}"') == stages == 2


def test_no_script_prunes_without_a_label_filter() -> None:
    for path in SCRIPTS:
        for line in path.read_text().splitlines():
            if "prune" in line and not line.lstrip().startswith("#"):
                assert re.search(r'--filter "?label=', line), f"{path}: {line}"
