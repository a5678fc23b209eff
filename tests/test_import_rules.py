"""The dependency rules hold on the tree, and each one fails when broken on purpose: the
import-linter contracts in pyproject.toml (run on a copy of the packages with one bad import
planted) and the rules of tests/import_rules.py (on small files that break each)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_rules import ROOT, UNSAID, check_file, violations

LINT_IMPORTS = str(Path(sys.executable).with_name("lint-imports"))


def test_the_tree_keeps_every_rule() -> None:
    assert [str(v) for v in violations()] == []


def _copy(tmp_path: Path) -> Path:
    for package in ("flower", "flowerbox"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("module", "planted", "broken"),
    [
        (
            "flowerbox/sidecar/gateway.py",
            "from flowerbox.box import spec",
            "sidecar imports no box",
        ),
        ("flowerbox/inside/relay.py", "import flowerbox.errors", "runs only flowerbox.inside"),
        (
            "flowerbox/box/spec.py",
            "from flowerbox.runs import records",
            "cli > selftest > runs > box",
        ),
        ("flowerbox/runs/records.py", "import flowerbox.cli.app", "nothing but a command line"),
        ("flower/core/goal.py", "import flower.workflow.base", "cli > workflow > core > stores"),
        ("flowerbox/box/untrusted.py", "from flowerbox.box import spec", "no import cycle"),
    ],
)
def test_a_planted_import_breaks_its_contract(
    tmp_path: Path, module: str, planted: str, broken: str
) -> None:
    root = _copy(tmp_path)
    target = root / module
    target.write_text(f"{target.read_text()}\n{planted}  # noqa\n")
    done = _lint_imports(root)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "BROKEN" in done.stdout and broken in done.stdout.replace("\n", " ")


def test_the_untouched_copy_keeps_the_contracts(tmp_path: Path) -> None:
    """The control for the test above: the copy itself is not what breaks them."""
    done = _lint_imports(_copy(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BROKEN" not in done.stdout


def _rules_broken(root: Path, relative: str, source: str) -> list[str]:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return [violation.rule for violation in check_file(path, root)]


def test_each_ast_rule_fails_on_a_file_that_breaks_it(tmp_path: Path) -> None:
    assert _rules_broken(tmp_path, "flowerbox/inside/x.py", "import docker\n") == [
        "inside: stdlib and wire only"
    ]
    assert _rules_broken(tmp_path, "flowerbox/y.py", "from flower.core.env import Lookup\n") == [
        "flower's public API only"
    ]
    assert _rules_broken(tmp_path, "flower/z.py", "from flower.core.goal import _frozen\n") == [
        "private name"
    ]
    assert _rules_broken(tmp_path, "flower/w.py", "import flower.core.goal as g\ng._frozen\n") == [
        "private name"
    ]
    body = "def f() -> None:\n    import json\n"
    assert _rules_broken(tmp_path, "flower/v.py", body) == [UNSAID]


def test_what_the_ast_rules_allow(tmp_path: Path) -> None:
    lazy = "def f() -> None:\n    # lazy: big\n    import json\n    import csv\n"
    allowed = {
        "flowerbox/inside/a.py": "import os\nfrom flowerbox import wire\nfrom .relay import X\n",
        "flowerbox/b.py": "from flower import Runtime, __version__\nfrom flower.testing import F\n",
        "flower/c.py": lazy,
    }
    for relative, source in allowed.items():
        assert _rules_broken(tmp_path, relative, source) == [], relative
