"""flower never upgrades itself (issue 21): no code of the packages installs a package, and
starting the CLI leaves nothing behind in the user's cache."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_module_of_the_packages_runs_an_installer() -> None:
    """No argv list names an installer and `install` (a hint to the user may name it)."""
    found = []
    for package in ("flower", "flowerbox"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                words = {
                    item.value
                    for item in getattr(node, "elts", [])
                    if isinstance(item, ast.Constant) and isinstance(item.value, str)
                }
                if words & {"pip", "pipx", "uv"} and words & {"install", "upgrade"}:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {sorted(words)}")
    assert found == []


def test_starting_flower_writes_no_update_stamp_and_starts_no_installer(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "flower.cli", "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "cache").exists()
