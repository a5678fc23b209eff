"""Runtime.run end to end on the real CLI: results, events, resume, manifest, lineage, bad input."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from claude_agent_sdk import AgentDefinition

from flower.core.agent import AgentSpec
from flower.core.events import Event
from flower.core.lineage import Lineage
from flower.core.runtime import Runtime
from flower.errors import RunDirError, WorkspaceError
from flower.testing import Always, FakeAPI, When, http_error, rules, sequence, text, tool

pytestmark = pytest.mark.anyio

WRITER = AgentSpec(
    "writer", "You write files.", allowed_tools=["Read", "Write"], permission_mode="acceptEdits"
)


@pytest.fixture
def runtime(flower_env: FakeAPI, workspace: Path) -> Iterator[Runtime]:
    rt = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        yield rt
    finally:
        rt.close()


async def test_a_step_that_writes_a_file(
    flower_env: FakeAPI, runtime: Runtime, workspace: Path
) -> None:
    target = workspace / "out.txt"
    flower_env.script = sequence(
        tool("Write", {"file_path": str(target), "content": "x"}), text("wrote out.txt")
    )
    result = await runtime.run(WRITER, "write out.txt")
    assert target.read_text() == "x"
    assert result.ok and result.error is None and result.errors == []
    assert result.step == "writer" and result.text == "wrote out.txt"
    assert result.session_id and result.num_turns == 2 and result.attempts == 1
    assert result.cost_usd > 0 and result.context > 0
    assert 0 < result.started_at <= result.ended_at
    assert not result.resumed and result.retired == []
    assert runtime.results == [result] and runtime.total_cost() == result.cost_usd


async def test_events_arrive_in_order_with_subagent_lines_tagged(
    flower_env: FakeAPI, runtime: Runtime
) -> None:
    helper = AgentDefinition(description="helps", prompt="You are the helper.", tools=["Bash"])
    flower_env.script = rules(
        (
            When(kind="subagent"),
            sequence(tool("Bash", {"command": "echo hi"}), text("sub says hi")),
        ),
        (
            When(kind="main"),
            sequence(
                tool(
                    "Agent",
                    {
                        "description": "help",
                        "prompt": "help",
                        "subagent_type": "helper",
                        "run_in_background": False,
                    },
                ),
                text("main is done"),
            ),
        ),
    )
    seen: list[Event] = []
    spec = AgentSpec("boss", "", agents={"helper": helper}, allowed_tools=["Bash"])
    result = await runtime.run(spec, "go", on_event=seen.append)
    kinds = [e.kind for e in seen if e.kind not in ("status", "task")]
    assert kinds[0] == "session" and kinds[-1] == "result"
    assert kinds.index("tool_call") < kinds.index("tool_result")
    sub = [e for e in seen if e.payload.get("subagent")]
    assert sub and "sub says hi" not in result.text
    assert result.text == "main is done" and result.ok


async def test_background_subagent_wakes_the_session_and_the_step_waits_for_it(
    flower_env: FakeAPI, runtime: Runtime
) -> None:
    helper = AgentDefinition(description="helps", prompt="You are the helper.", tools=["Bash"])
    flower_env.script = rules(
        (
            When(kind="subagent"),
            sequence(tool("Bash", {"command": "sleep 1"}), text("late report")),
        ),
        (When(kind="main", contains="<task-notification>"), Always(text("got the late report"))),
        (
            When(kind="main"),
            sequence(
                tool("Agent", {"description": "bg", "prompt": "work", "subagent_type": "helper"}),
                text("launched it"),
            ),
        ),
    )
    spec = AgentSpec("boss", "", agents={"helper": helper}, allowed_tools=["Bash"])
    result = await runtime.run(spec, "go")
    assert result.ok and result.text == "got the late report"
    assert result.num_turns == 3  # 2 in the first turn + the wake-up turn


async def test_a_synthetic_error_is_kept_out_of_the_text(
    flower_env: FakeAPI, workspace: Path
) -> None:
    flower_env.script = Always(text("never", fault=http_error(500)))
    runtime = Runtime(workspace=workspace, run_dir=workspace.parent / "runs", resilience=False)
    try:
        result = await runtime.run(AgentSpec("a", ""), "go")
    finally:
        runtime.close()
    assert not result.ok and result.text == ""
    assert result.error and result.error.startswith("API Error: 500")
    assert result.errors == [result.error]


async def test_two_steps_resume_by_session_id_and_cost_is_per_step(
    flower_env: FakeAPI, runtime: Runtime
) -> None:
    flower_env.script = rules(
        (When(kind="main", contains="second prompt"), sequence(text("second answer"))),
        (When(kind="main"), sequence(text("first answer"))),
    )
    first = await runtime.run(AgentSpec("a", ""), "first prompt", step_name="one")
    second = await runtime.run(
        AgentSpec("a", ""), "second prompt", step_name="two", resume=first.session_id
    )
    assert second.session_id == first.session_id
    shown = flower_env.main_requests()[-1]
    assert "first prompt" in shown.conversation_text and "first answer" in shown.assistant_texts
    assert second.text == "second answer"
    # Each step is charged only its own requests (one each, the second slightly larger),
    # never the session's running total.
    assert first.cost_usd <= second.cost_usd < 1.5 * first.cost_usd
    assert runtime.total_cost() == pytest.approx(first.cost_usd + second.cost_usd)


async def test_manifest_rows_and_lineage_round_trip(
    flower_env: FakeAPI, runtime: Runtime, workspace: Path
) -> None:
    flower_env.script = Always(text("fine " * 500))  # longer than the manifest keeps
    first = await runtime.run(AgentSpec("a", ""), "go", step_name="one")
    await runtime.run(AgentSpec("a", ""), "go", step_name="two")
    rows = json.loads(runtime.manifest_path.read_text())
    assert [r["step"] for r in rows] == ["one", "two"]
    assert {r["run"] for r in rows} == {runtime.run_id}
    assert rows[0]["session_id"] == first.session_id and rows[0]["ok"] is True
    # closing stamps ended_at (000:72); the row is asdict(StepResult), its text capped (003:109)
    assert 0 < rows[0]["started_at"] <= rows[0]["ended_at"] == first.ended_at
    assert len(first.text) > 2000 and rows[0]["text"] == first.text[:2000]
    Lineage(runtime.run_dir, workspace).remember("one", str(first.session_id))
    assert Lineage(runtime.run_dir, workspace).recall("one") == first.session_id


async def test_two_runtimes_share_one_manifest(flower_env: FakeAPI, workspace: Path) -> None:
    flower_env.script = Always(text("fine"))
    runs = workspace.parent / "runs"
    a, b = Runtime(workspace=workspace, run_dir=runs), Runtime(workspace=workspace, run_dir=runs)
    try:
        await a.run(AgentSpec("a", ""), "go", step_name="from-a")
        await b.run(AgentSpec("a", ""), "go", step_name="from-b")
    finally:
        a.close()
        b.close()
    rows = json.loads((runs / "manifest.json").read_text())
    assert sorted((r["run"], r["step"]) for r in rows) == sorted(
        [(a.run_id, "from-a"), (b.run_id, "from-b")]
    )


# --- bad input: a clear error, nothing half-written ---------------------------------------


def test_no_credentials_fails_at_construction_and_creates_nothing(
    flower_env: FakeAPI, monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    runs = workspace.parent / "runs"
    with pytest.raises(RuntimeError) as caught:
        Runtime(workspace=workspace, run_dir=runs)
    assert len(str(caught.value).splitlines()) == 4
    assert not runs.exists()


def test_an_empty_key_counts_as_no_key(
    flower_env: FakeAPI, monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    with pytest.raises(RuntimeError, match="ANTHROPIC_API_KEY"):
        Runtime(workspace=workspace, run_dir=workspace.parent / "runs")


@pytest.mark.english
def test_a_workspace_that_does_not_exist(flower_env: FakeAPI, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a folder"):
        Runtime(workspace=tmp_path / "absent", run_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


@pytest.mark.english
def test_a_name_that_is_not_utf8_is_refused_before_anything(
    flower_env: FakeAPI, tmp_path: Path
) -> None:
    """The CLI cannot work in such a folder and JSON records cannot hold its name: a
    permanent local fault, refused at once (it was retried with backoff, issue 21)."""
    bad = tmp_path / os.fsdecode(b"caf\xe9")
    bad.mkdir()
    with pytest.raises(WorkspaceError, match=r"caf\\xe9 has a name that is not valid UTF-8"):
        Runtime(workspace=bad, run_dir=tmp_path / "runs")
    good = tmp_path / "ws"
    good.mkdir()
    with pytest.raises(RunDirError, match="not valid UTF-8"):
        Runtime(workspace=good, run_dir=bad / "runs")
    assert sorted(p.name for p in tmp_path.iterdir()) == [bad.name, "ws"]
    assert list(bad.iterdir()) == []


@pytest.mark.english
def test_a_run_dir_that_is_a_file(flower_env: FakeAPI, workspace: Path) -> None:
    blocker = workspace.parent / "runs"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match="is a file"):
        Runtime(workspace=workspace, run_dir=blocker)
    assert blocker.read_text() == "not a folder"


def test_the_clis_compaction_line_sits_above_the_handoff_line(
    flower_env: FakeAPI, workspace: Path
) -> None:
    from flower.core.agent import CompactPolicy, HandoffPolicy
    from flower.core.mounting import CLI_COMPACT_BELOW_WINDOW

    def cli_window(**kwargs: object) -> int | None:
        runtime = Runtime(workspace=workspace, run_dir=workspace.parent / "runs", **kwargs)  # type: ignore[arg-type]
        try:
            value = runtime._session_spec(AgentSpec("a", "")).env.get(
                "CLAUDE_CODE_AUTO_COMPACT_WINDOW"
            )
        finally:
            runtime.close()
        return int(value) if value else None

    policy = HandoffPolicy(window=200_000)
    window = cli_window(handoff=policy)
    assert window == 200_000 and window - CLI_COMPACT_BELOW_WINDOW > policy.at
    tight = HandoffPolicy(window=200_000, headroom=10_000)  # hands off at 190k
    window = cli_window(handoff=tight)
    assert window is not None and window - CLI_COMPACT_BELOW_WINDOW > tight.at
    assert cli_window(handoff=False) is None
    runtime = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        own = AgentSpec("a", "", compact=CompactPolicy("off"))
        assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW" not in runtime._session_spec(own).env
    finally:
        runtime.close()


async def test_a_run_budget_caps_every_step_after_it_is_spent(
    flower_env: FakeAPI, workspace: Path
) -> None:
    flower_env.script = Always(text("fine"))
    runtime = Runtime(workspace=workspace, run_dir=workspace.parent / "runs", budget_usd=0.001)
    try:
        first = await runtime.run(AgentSpec("a", ""), "go", step_name="one")
        second = await runtime.run(AgentSpec("a", ""), "go", step_name="two")
    finally:
        runtime.close()
    assert first.cost_usd > 0.001  # the CLI checks its budget after a request: it overshoots
    assert not second.ok and second.error == "运行的预算 $0.00 已用完"  # the run's language
    assert len(flower_env.requests) == 1  # the second step never reached the API


async def test_a_cancelled_step_is_still_recorded(flower_env: FakeAPI, workspace: Path) -> None:
    import asyncio

    from flower.testing import tool

    flower_env.script = Always(
        tool("Bash", {"command": "python3 -c 'import time; time.sleep(30)'"})
    )
    runtime = Runtime(workspace=workspace, run_dir=workspace.parent / "runs")
    try:
        task = asyncio.create_task(runtime.run(AgentSpec("a", "", allowed_tools=["Bash"]), "go"))
        await asyncio.to_thread(flower_env.wait_for, lambda requests: len(requests) >= 1)
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        runtime.close()
    [row] = json.loads(runtime.manifest_path.read_text())
    assert row["error"] == Runtime.STOPPED and row["session_id"] and row["ok"] is False
