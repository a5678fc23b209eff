"""`flower demo`: the whole go path on the built-in fake model, in a scratch git workspace.

No key is needed and none is used: the process environment points the CLI at a local fake
Messages API (flower.testing) that plays the clarifier, the judge, the coordinator and its
worker, and any real credential in the environment is removed first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from flower.cli.go import go
from flower.core.lang import current, text

CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")


def demo(
    keep: Annotated[
        bool, typer.Option("--keep/--no-keep", help="Keep the scratch workspace afterwards.")
    ] = True,
) -> None:
    """Run a whole clarify -> goal -> work -> verdict cycle offline, on a scripted model."""
    # lazy: the fake API is for `flower demo` only; `flower --help` stays fast
    from flower.testing import DEMO_ASKS, FakeAPI, starter_cast

    console = Console(highlight=False, soft_wrap=True)
    root = Path(tempfile.mkdtemp(prefix="flower-demo-"))
    workspace, home = root / "workspace", root / "home"
    home.mkdir()
    workspace.mkdir()
    _git_init(workspace)
    for name in CREDENTIALS:
        os.environ.pop(name, None)
    console.print(text("say.demo_workspace", workspace=workspace))
    with FakeAPI(starter_cast()) as api:
        os.environ.update(api.env(home=home, retries=None))
        os.environ["XDG_CONFIG_HOME"] = str(home / ".config")
        try:
            go(DEMO_ASKS[current()], workspace=workspace, run_dir=root / "runs", timeout=0.0)
        except typer.Exit as done:
            code = done.exit_code
    hello = workspace / "hello.py"
    if hello.exists():
        console.print(f"hello.py: {hello.read_text().strip()}")
    console.print(text("say.look_around", root=root))
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    raise typer.Exit(code)


def _git_init(path: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "demo", "GIT_AUTHOR_EMAIL": "demo@localhost"}
    env |= {"GIT_COMMITTER_NAME": "demo", "GIT_COMMITTER_EMAIL": "demo@localhost"}
    for command in (["git", "init", "-q"], ["git", "commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(command, cwd=path, env=env, check=True, capture_output=True)
