"""examples/ci/github-actions.yml as shipped (issue 36: it failed on its first run, building
the image without the version build argument). Its `ask` job's steps run in order, as written,
from a clean copy of this checkout, as an unprivileged user on this machine's engine: the
`run:` scripts verbatim (with GitHub's shell and its `${{ }}` values), the `uses:` steps done
by hand as far as this machine allows (no registry, no GitHub): a copy for each checkout, a
fresh venv for setup-python, the artifact's files looked at where upload-artifact takes them.
The model is the scripted fake API, the key the test's "real" one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from docker import DockerClient  # noqa: TID251 - the test removes the image it built
from docker.errors import ImageNotFound  # noqa: TID251

from flower.testing import FakeAPI
from flower.testing.demo import DEMO_ASK, starter_cast
from tests.docker.conftest import BASE_IMAGE, REPO
from tests.docker.e2e import REAL, as_user, user_argv

pytestmark = pytest.mark.docker

EXAMPLE = REPO / "examples" / "ci" / "github-actions.yml"
SHELL = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]  # GitHub's `bash` for run:
EXPRESSION = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")


def clean_copy(dest: Path) -> None:
    """This checkout's files as a fresh clone has them (tracked and new, never ignored: no
    .venv, no runs/), with what is in the working tree now."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


class Expressions:
    """The values of the `${{ }}` expressions the job uses, as GitHub would give them on a
    `workflow_dispatch` with the defaults; one not listed fails the test (a new expression in
    the example must be given its value here)."""

    def __init__(self, outputs: Path) -> None:
        self.outputs = outputs
        self.known = {
            "inputs.ask || 'run the test suite and fix what fails'": DEMO_ASK,
            "inputs.budget || '5'": "5",
            "secrets.ANTHROPIC_API_KEY": REAL,
        }

    def __call__(self, text: str) -> str:
        return EXPRESSION.sub(lambda m: self.value(m[1]), text)

    def value(self, expression: str) -> str:
        if (found := re.fullmatch(r"steps\.(\w+)\.outputs\.(\w+)", expression)) is not None:
            lines = self.outputs.read_text().splitlines() if self.outputs.exists() else []
            given = dict(line.split("=", 1) for line in lines if "=" in line)
            return given[found[2]]
        assert expression in self.known, f"the example uses ${{{{ {expression} }}}}: value it"
        return self.known[expression]

    def condition(self, expression: str) -> bool:
        """`if:` of a step: always() runs; `inputs.transcripts` is unticked."""
        return {"always()": True, "always() && inputs.transcripts": False}[expression]


@pytest.fixture
def image_tag(docker_client: DockerClient) -> Iterator[str]:
    """The tag the example builds (FLOWERBOX_IMAGE: never the shared flowerbox:dev); removed
    at the end."""
    tag = f"flowerbox:ci-example-{uuid.uuid4().hex[:8]}"
    yield tag
    with contextlib.suppress(ImageNotFound):
        docker_client.images.remove(tag)


@pytest.mark.timeout(1800)  # a pip install and two image builds, as on a fresh runner
def test_the_ci_example_runs_as_shipped_from_a_clean_copy(
    real_api: FakeAPI,
    host_user: tuple[str, int, int],
    base_image: str,
    image_tag: str,
) -> None:
    real_api.script = starter_cast()
    workflow: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    job = workflow["jobs"]["ask"]
    root = Path(tempfile.mkdtemp(prefix="fbx-ci-", dir="/tmp"))
    try:
        _run_job(job, root, real_api, host_user, image_tag)
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False)


def _run_job(
    job: dict[str, Any], root: Path, api: FakeAPI, user: tuple[str, int, int], tag: str
) -> None:
    values = Expressions(root / "github_output")
    venv = root / "python"
    env = {
        "PATH": f"{venv}/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(root / "home"),
        "GITHUB_WORKSPACE": str(root),
        "GITHUB_OUTPUT": str(values.outputs),
        # what this machine changes: the model, the image's name and base (no registry)
        "ANTHROPIC_BASE_URL": api.url,
        "FLOWERBOX_IMAGE": tag,
        "FLOWERBOX_BASE_IMAGE": BASE_IMAGE,
        "FLOWER_LANG": "zh",
    }
    env |= {name: values(str(value)) for name, value in job["env"].items()}
    (root / "home").mkdir()
    ran = []
    for step in job["steps"]:
        if "if" in step and not values.condition(step["if"]):
            continue
        if "uses" in step:
            _uses(step, root, user, venv)
        else:
            script = root / "step.sh"
            script.write_text(values(step["run"]))
            cwd = root / step.get("working-directory", ".")
            step_env = env | {k: values(str(v)) for k, v in step.get("env", {}).items()}
            os.chown(root, user[1], user[2])
            for path in (script, *root.rglob("*")):
                os.lchown(path, user[1], user[2])
            done = subprocess.run(
                user_argv(user, [*SHELL, str(script)], step_env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=1200,
                check=False,
            )
            assert done.returncode == 0, (
                f"{step.get('name')}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
            )
        ran.append(step.get("name") or step["uses"])
    assert ran[-1] == "Fail unless the goal was achieved", ran  # it passed: exit 0
    summary = json.loads((root / "summary.json").read_text())
    assert summary["status"] == "achieved" and summary["exit_code"] == 0
    assert 'print("hello")' in (root / "flower.patch").read_text()  # the worker's file
    assert api.saw_key(REAL)  # the key reached the API through the gateway only
    # the advice an old image gets works too: `flowerbox build` in the checkout, installed
    again = as_user(user, [f"{venv}/bin/flowerbox", "build"], cwd=root / "flowerbox", env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{tag} 已就绪" in again.stderr  # the e2e runs speak zh


def _uses(step: dict[str, Any], root: Path, user: tuple[str, int, int], venv: Path) -> None:
    """A `uses:` step, done by hand."""
    action, given = step["uses"].split("@")[0], step.get("with", {})
    if action == "actions/checkout":
        dest = root / given["path"]
        dest.mkdir()
        if given["path"] == "flowerbox":
            clean_copy(dest)
            return
        (dest / "README.md").write_text("a project\n")
        git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@localhost"]
        for command in (["git", "init", "-q"], [*git, "add", "."], [*git, "commit", "-qm", "0"]):
            subprocess.run(command, cwd=dest, check=True, capture_output=True)
    elif action == "actions/setup-python":
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True)  # world-readable
    elif action == "actions/upload-artifact":
        kept = [line for line in given["path"].split() if not line.startswith("!")]
        assert kept == ["summary.json", "flower.patch"], kept
        assert all((root / name).is_file() for name in kept), kept
    else:
        raise AssertionError(f"the example uses {action}: say here how it is done")
