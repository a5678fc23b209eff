"""The shell lines of docs/getting-started.md that a newcomer runs before anything of ours
work on a machine that has never configured git."""

from __future__ import annotations

import subprocess
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"


def test_the_git_line_works_without_a_git_identity(tmp_path: Path) -> None:
    [line] = [line for line in PAGE.read_text().splitlines() if line.startswith("git init")]
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["sh", "-c", line], cwd=project, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert (project / ".git").is_dir()
