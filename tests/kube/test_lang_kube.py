"""Issue 36 item 5 on a cluster: `flowerbox ... --on kube` refuses a target in the language
it was asked in (exit 2), and in English under `--lang en`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RENDER = [sys.executable, "-m", "flowerbox", "kube", "render", "x"]


@pytest.mark.parametrize(
    ("flag", "said", "not_said"),
    [
        ((), "--repo 'git@git.example:a.git'：请给出 https:// 的 git URL", "pass an https://"),
        (("--lang", "en"), "--repo 'git@git.example:a.git': pass an https:// git URL", "请给出"),
    ],
)
def test_a_target_the_cluster_cannot_use_is_refused_in_the_asked_language(
    flag: tuple[str, ...], said: str, not_said: str, tmp_path: Path
) -> None:
    env = os.environ | {"FLOWER_LANG": "zh", "COLUMNS": "200"}
    done = subprocess.run(
        [*RENDER, "--repo", "git@git.example:a.git", *flag],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and not_said not in done.stderr
    assert "Traceback" not in done.stderr
