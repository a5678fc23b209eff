"""Where `flowerbox build` builds from (issue 36): a checkout of this flowerbox's version,
found where an installed flowerbox (not run from a checkout) is told to look; everything else
is refused with what to do, before any engine is asked."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flowerbox import __version__
from flowerbox.box.source import RUNNING_CHECKOUT, build_context, checkout_version
from flowerbox.errors import ConfigError

# What flower says in English (issue 36: what a person reads follows --lang; zh is the suite's
# default, and tests/cli/test_lang_cli.py reads the zh refusals).
pytestmark = pytest.mark.english

REPO = Path(__file__).resolve().parents[2]


def checkout(path: Path, version: str = __version__, name: str = "flowerbox") -> Path:
    path.mkdir()
    (path / "Dockerfile").write_text("FROM scratch\n")
    (path / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "{version}"\n')
    return path


def test_this_checkout_is_one_of_this_version() -> None:
    assert RUNNING_CHECKOUT == REPO  # the suite runs from an editable install
    assert checkout_version(REPO) == __version__


def test_the_path_given_then_the_current_folder(tmp_path: Path) -> None:
    given = checkout(tmp_path / "given")
    here = checkout(tmp_path / "here")
    assert build_context(given, cwd=here) == given
    assert build_context(None, cwd=here) == here
    assert build_context(None, cwd=tmp_path) == REPO  # else the one flowerbox runs from


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: checkout(p, version="0.0.1"), "is flowerbox 0.0.1, and this flowerbox is"),
        (lambda p: checkout(p, name="celery-flower"), "is not a flowerbox checkout"),
        (lambda p: p.mkdir(), "is not a flowerbox checkout"),
    ],
)
def test_another_version_or_no_checkout_is_refused(tmp_path: Path, make, said: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "c"
    make(path)
    with pytest.raises(ConfigError, match=said):
        build_context(path)


def test_an_installed_flowerbox_outside_a_checkout_says_where_to_build_from(
    tmp_path: Path,
) -> None:
    """An installed copy of the package (site-packages): no checkout beside it, so a
    `flowerbox build` outside one exits 2 saying to pass one, and no traceback."""
    site = tmp_path / "site"
    for package in ("flower", "flowerbox"):
        shutil.copytree(REPO / package, site / package, ignore=shutil.ignore_patterns("*.pyc"))
    code = "from flowerbox.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "build"],
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert "this flowerbox is installed, not run from a checkout" in said, said
    assert "run `flowerbox build PATH` with PATH a flowerbox checkout" in said
    assert "Traceback" not in done.stderr
