"""The boundaries proven on the real CLI: each guard is mounted by Runtime from the spec, and
the fake API records exactly what the model was shown."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flower.core.agent import AgentSpec
from flower.core.roles import coordinator, oracle, worker
from flower.core.runtime import Runtime
from flower.core.workbench import Workbench
from flower.testing import FakeAPI, Reply, Text, When, rules, sequence, text, tool

pytestmark = pytest.mark.anyio


@pytest.fixture
def make_runtime(flower_env: FakeAPI, workspace: Path) -> Iterator[Any]:
    made: list[Runtime] = []

    def make(**kwargs: Any) -> Runtime:
        made.append(Runtime(workspace=workspace, run_dir=workspace.parent / "runs", **kwargs))
        return made[-1]

    yield make
    for runtime in made:
        runtime.close()


def git_init(path: Path) -> None:
    for command in (
        ["git", "init", "-q"],
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    ):
        subprocess.run(command, cwd=path, check=True)


def git(path: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=path, capture_output=True, text=True, check=True
    ).stdout


def delegate(subagent_type: str, prompt: str = "do the work") -> Reply:
    return tool(
        "Agent",
        {
            "description": "delegate",
            "prompt": prompt,
            "subagent_type": subagent_type,
            "run_in_background": False,
        },
    )


async def test_coordinator_is_refused_hands_on_work_while_its_worker_does_it(
    flower_env: FakeAPI, make_runtime: Any, workspace: Path
) -> None:
    coder = worker("writes code", "You are the coder.", tools=["Bash"])
    flower_env.script = rules(
        (
            When(kind="subagent"),
            # A command that writes needs approval: unattended, only the guard's allow runs it.
            sequence(
                tool("Bash", {"command": "echo from-worker > w.txt && cat w.txt"}), text("ok")
            ),
        ),
        (
            When(kind="main"),
            sequence(
                tool("Bash", {"command": "touch made-by-boss"}),
                tool("Write", {"file_path": str(workspace / "boss.txt"), "content": "x"}),
                delegate("coder"),
                text("delegated"),
            ),
        ),
    )
    spec = coordinator("协调者", "", {"coder": coder})
    result = await make_runtime().run(spec, "go")
    assert result.ok
    main = flower_env.main_requests()
    bash_refusal, write_refusal = main[1].last_tool_results()[0], main[2].last_tool_results()[0]
    for refusal, name in ((bash_refusal, "Bash"), (write_refusal, "Write")):
        assert refusal.is_error and refusal.text.startswith(f"PreToolUse:{name} hook error:")
        assert "Agent" in refusal.text  # the delegate text says how to proceed
    assert not (workspace / "made-by-boss").exists() and not (workspace / "boss.txt").exists()
    worker_result = flower_env.subagent_requests()[-1].last_tool_results()[0]
    assert worker_result.text.strip() == "from-worker" and not worker_result.is_error
    assert (workspace / "w.txt").read_text() == "from-worker\n"


async def test_glance_lets_ephemeral_commands_through_and_nothing_else(
    flower_env: FakeAPI, make_runtime: Any, workspace: Path
) -> None:
    git_init(workspace)
    (workspace / "x").write_text("keep me")
    flower_env.script = sequence(
        tool("Bash", {"command": "git status && ls"}),
        tool("Bash", {"command": "rm x"}),
        text("looked"),
    )
    spec = coordinator("协调者", "", {"coder": worker("c", "You code.")}, glance=True)
    await make_runtime().run(spec, "look around")
    main = flower_env.main_requests()
    glance, removal = main[1].last_tool_results()[0], main[2].last_tool_results()[0]
    assert not glance.is_error and "x" in glance.text.split()
    assert removal.is_error and "hook error" in removal.text
    assert (workspace / "x").read_text() == "keep me"


@pytest.mark.parametrize(
    ("allowed", "refused", "runs"),
    [(["Read"], ["Write", "Bash"], []), (["Read", "Bash"], ["Write"], ["Bash"])],
)
async def test_whitelist_guard_makes_allowed_tools_exclusive(
    flower_env: FakeAPI,
    make_runtime: Any,
    workspace: Path,
    allowed: list[str],
    refused: list[str],
    runs: list[str],
) -> None:
    calls = {
        "Write": tool("Write", {"file_path": str(workspace / "w.txt"), "content": "x"}),
        "Bash": tool("Bash", {"command": "echo ran"}),
    }
    flower_env.script = sequence(calls["Write"], calls["Bash"], text("done"))
    spec = AgentSpec("评审", "", allowed_tools=allowed, permission_mode="acceptEdits")
    await make_runtime().run(spec, "go")
    last = flower_env.main_requests()[-1]
    for name in refused:
        shown = last.result_for(calls[name].tool_ids[0])
        assert shown is not None and shown.is_error
        assert shown.text.startswith(f"PreToolUse:{name} hook error:") and "评审" in shown.text
    for name in runs:
        shown = last.result_for(calls[name].tool_ids[0])
        assert shown is not None and not shown.is_error
    assert not (workspace / "w.txt").exists()


async def test_the_oracle_is_not_even_offered_agent_write_or_bash(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    flower_env.script = sequence(text("we are on step 2"))
    await make_runtime(workbench=True).run(oracle(), "where are we?")
    offered = set(flower_env.main_requests()[0].tool_names)
    assert offered.isdisjoint({"Agent", "Write", "Edit", "Bash"})
    assert {"Read", "Glob", "Grep"} <= offered


async def test_a_big_output_becomes_a_pointer_and_the_spill_file_reads_back_whole(
    flower_env: FakeAPI, make_runtime: Any, workspace: Path
) -> None:
    workbench = Workbench(workspace)
    flower_env.script = sequence(
        # 48,893 characters once the CLI strips the last newline
        tool("Bash", {"command": "seq 1 10000"}),
        text("spilled"),
    )
    spec = AgentSpec("a", "", allowed_tools=["Read", "Bash"])
    runtime = make_runtime(workbench=workbench)
    await runtime.run(spec, "go")
    shown = flower_env.main_requests()[1].last_tool_results()[0].text
    assert shown.startswith("[输出过长（48893 字符），全文已存到 ")
    [spill] = workbench.spill.glob("*.txt")
    assert spill.read_text() == "\n".join(str(i) for i in range(1, 10001))
    assert shown.endswith("\n" + spill.read_text()[:400].rstrip())  # the CLI strips the end
    # Reading the spill file itself must come back as text, not as another pointer.
    flower_env.script = sequence(tool("Read", {"file_path": str(spill)}), text("read it"))
    await runtime.run(spec, "read the spill")
    read_back = flower_env.main_requests()[-1].last_tool_results()[0].text
    assert "全文已存到" not in read_back and "1000" in read_back
    assert list(workbench.spill.glob("*.txt")) == [spill]


async def test_index_lists_a_script_written_during_the_run(
    flower_env: FakeAPI, make_runtime: Any, workspace: Path
) -> None:
    workbench = Workbench(workspace)
    script_path = workbench.scripts / "count.py"
    flower_env.script = sequence(
        tool("Write", {"file_path": str(script_path), "content": "# desc: counts the lines\n"}),
        text("saved the script"),
    )
    spec = AgentSpec("a", "", allowed_tools=["Read", "Write"], permission_mode="acceptEdits")
    await make_runtime(workbench=workbench).run(spec, "go")
    index = workbench.index.read_text()
    assert "count.py" in index and "counts the lines" in index
    # The next session is told about it in its system prompt.
    flower_env.script = sequence(text("I see count.py"))
    await make_runtime(workbench=workbench).run(spec, "what do we have?")
    assert "counts the lines" in flower_env.main_requests()[-1].system_text


async def test_an_isolated_worker_really_works_in_a_git_worktree(
    flower_env: FakeAPI, make_runtime: Any, workspace: Path
) -> None:
    git_init(workspace)
    coder = worker("writes code", "You are the coder.", tools=["Bash"], isolate=True)
    flower_env.script = rules(
        (
            When(kind="subagent"),
            sequence(tool("Bash", {"command": "pwd && echo work > made.txt"}), text("done")),
        ),
        (When(kind="main"), sequence(delegate("coder"), text("delegated"))),
    )
    runtime = make_runtime()
    result = await runtime.run(coordinator("协调者", "", {"coder": coder}), "go")
    assert result.ok
    tree = Path(flower_env.subagent_requests()[-1].last_tool_results()[0].text.strip())
    # flower made the worktree (the CLI's WorktreeCreate hook), in the run dir, not the checkout
    assert tree.parent == workspace.parent / "runs" / "worktrees" and tree.name.startswith("agent-")
    # The worker's stop committed its work on the run's branch; the shared checkout has none.
    assert git(workspace, "show", f"flower/{runtime.run_id}:made.txt") == "work\n"
    assert not (workspace / "made.txt").exists() and not (workspace / ".claude").exists()


async def test_an_isolated_worker_outside_git_fails_before_the_cli_starts(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    coder = worker("writes code", "You are the coder.", isolate=True)
    with pytest.raises(ValueError, match="git init"):
        await make_runtime().run(coordinator("协调者", "", {"coder": coder}), "go")
    assert flower_env.requests == []


@pytest.mark.english  # click's and flower's English words
async def test_an_isolated_worker_in_a_repository_without_a_commit_fails_first(
    flower_env: FakeAPI, make_runtime: Any, workspace: Path
) -> None:
    git(workspace, "init", "-q")
    coder = worker("writes code", "You are the coder.", isolate=True)
    with pytest.raises(ValueError, match="commit once"):
        await make_runtime().run(coordinator("协调者", "", {"coder": coder}), "go")
    assert flower_env.requests == []


async def test_a_worker_with_webfetch_makes_the_session_allow_it(
    flower_env: FakeAPI, make_runtime: Any
) -> None:
    """allowed_tools is session-wide: without the merge the worker's WebFetch would wait for
    an approval nobody gives. The call must not come back as a permission refusal."""
    reader = worker("reads the web", "You are the reader.", tools=["WebFetch"])
    url = f"{flower_env.url}/docs"
    flower_env.script = rules(
        (
            When(kind="subagent", system_contains="You are the reader"),
            sequence(tool("WebFetch", {"url": url, "prompt": "summarise"}), text("read it")),
        ),
        (When(kind="subagent"), sequence(Reply(blocks=(Text("a summary"),)))),
        (When(kind="main"), sequence(delegate("reader"), text("done"))),
    )
    spec = coordinator("协调者", "", {"reader": reader})
    assert "WebFetch" in spec.allowed_tools
    await make_runtime().run(spec, "go")
    [fetch_result] = [r for req in flower_env.subagent_requests() for r in req.tool_results()][:1]
    assert "requested permissions" not in fetch_result.text
    assert "haven't granted" not in fetch_result.text
