"""docker/prepare.sh touches only what it made: its builds' leftovers go by the label our
Dockerfile sets on every image it builds, never by a global prune."""

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
    assert removals == ["docker image prune -f --filter label=dev.flower.build=flowerbox"]
    # ...and that label is on every stage our Dockerfile builds, so nothing else matches it.
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = dockerfile.count("\nFROM ")
    assert dockerfile.count('LABEL dev.flower.build="flowerbox"') == stages == 2


def test_no_script_prunes_without_a_label_filter() -> None:
    for path in SCRIPTS:
        for line in path.read_text().splitlines():
            if "prune" in line and not line.lstrip().startswith("#"):
                assert re.search(r'--filter "?label=', line), f"{path}: {line}"
