"""docs/deployment.md shows the render of an example run: it is what render prints today."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from flowerbox.cli.app import app

PAGE = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
EXAMPLE = re.compile(
    r"^`(flowerbox kube render [^`]+)`\n.*?\n```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL
)


def test_the_example_render_is_current() -> None:
    found = EXAMPLE.search(PAGE.read_text(encoding="utf-8"))
    assert found is not None, "docs/deployment.md lost its example render"
    command, shown = found.groups()
    done = CliRunner().invoke(app, shlex.split(command)[1:])
    assert done.exit_code == 0, done.output
    assert done.stdout == shown, "regenerate the example in docs/deployment.md with " + command
