"""The Python on docs/workflow-design.md is valid against this flower: every block compiles,
every name it imports from flower exists, and the smallest workflow runs through the page's
own test snippet on the fake API."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import pytest

from flower.testing import FakeAPI

pytestmark = pytest.mark.anyio

PAGE = Path(__file__).resolve().parents[2] / "docs" / "workflow-design.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks() -> list[str]:
    return PYTHON_BLOCK.findall(PAGE.read_text(encoding="utf-8"))


def block_with(marker: str) -> str:
    (found,) = [block for block in blocks() if marker in block]
    return found


def test_every_block_compiles_and_imports_what_exists() -> None:
    assert len(blocks()) >= 6
    for block in blocks():
        tree = ast.parse(block)  # a SyntaxError names the line
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flower"):
                module = importlib.import_module(node.module or "")
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"


async def test_the_smallest_workflow_passes_the_pages_own_test(
    flower_env: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each block as a reader copies it: the workflow saved as hello_flow.py, the test run
    alone in a namespace of its own (it imports the workflow, as the page says)."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "hello_flow.py").write_text(block_with('workflow = Workflow([Step("hello"'))
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.delitem(sys.modules, "hello_flow", raising=False)
    namespace: dict[str, object] = {"__name__": "test_hello_flow"}
    exec(block_with("async def test_hello"), namespace)
    workspace = tmp_path / "project"
    workspace.mkdir()
    await namespace["test_hello"](flower_env, workspace.resolve())  # type: ignore[operator]
    assert (workspace / "hello.txt").read_text() == "hello"
    assert flower_env.main_requests(), "the page's test ran against the fake API"
