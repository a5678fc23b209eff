"""normalize() on what the real CLI yields: order, subagent tags, synthetic errors, resets."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from claude_agent_sdk import AgentDefinition

from flower.core.agent import AgentSpec, CompactPolicy, build_options
from flower.core.events import Event, context_level, normalize, summarize_input
from flower.testing import (
    Always,
    FakeAPI,
    Reply,
    Text,
    Thinking,
    Usage,
    When,
    http_error,
    rules,
    sequence,
    text,
    tool,
)
from tests.driver import drive

pytestmark = pytest.mark.anyio


def events_of(messages: list[object]) -> list[Event]:
    return [event for message in messages for event in normalize(message)]


async def test_events_in_order_with_context_on_assistant_events(
    fake_api: FakeAPI, claude_env: dict[str, str], workspace: Path
) -> None:
    usage = Usage(input_tokens=1000, cache_read_input_tokens=300, cache_creation_input_tokens=20)
    fake_api.script = sequence(
        tool("Bash", {"command": "echo listed"}, say="listing", usage=usage),
        Reply(blocks=(Thinking("so"), Text("all listed")), usage=usage),
    )
    out = await drive("go", cwd=workspace, env=claude_env, allowed_tools=["Bash"])
    events = events_of(out.messages)
    kinds = [e.kind for e in events if e.kind != "status"]
    assert kinds == ["session", "text", "tool_call", "tool_result", "thinking", "text", "result"]
    call = next(e for e in events if e.kind == "tool_call")
    assert (call.tool, call.text, str(call)) == ("Bash", "echo listed", "[Bash] echo listed")
    assert call.payload["context"] == 1320
    assert next(e for e in events if e.kind == "tool_result").text.strip() == "listed"
    result = events[-1]
    assert result.text == "all listed" and result.payload["cost_usd"] > 0
    assert result.payload["session_id"] == events[0].payload["session_id"]


async def test_subagent_lines_are_tagged(
    fake_api: FakeAPI, claude_env: dict[str, str], workspace: Path
) -> None:
    helper = AgentDefinition(description="helps", prompt="You are the helper.", tools=["Bash"])
    fake_api.script = rules(
        (
            When(kind="subagent"),
            sequence(tool("Bash", {"command": "echo sub"}), text("helper report")),
        ),
        (
            When(kind="main"),
            sequence(
                tool(
                    "Agent",
                    {
                        "description": "help",
                        "prompt": "help me",
                        "subagent_type": "helper",
                        "run_in_background": False,
                    },
                ),
                text("main done"),
            ),
        ),
    )
    out = await drive(
        "go", cwd=workspace, env=claude_env, agents={"helper": helper}, allowed_tools=["Bash"]
    )
    events = events_of(out.messages)
    agent_call = next(e for e in events if e.kind == "tool_call" and e.tool == "Agent")
    tagged = [e for e in events if e.payload.get("subagent")]
    assert tagged and all(e.payload["subagent"] == agent_call.payload["id"] for e in tagged)
    assert {e.kind for e in tagged} >= {"tool_call", "tool_result"}
    main_text = [e.text for e in events if e.kind == "text" and not e.payload.get("subagent")]
    assert "helper report" not in main_text and "main done" in main_text
    assert any(e.kind == "task" for e in events)


async def test_synthetic_api_error_is_an_error_event_never_text(
    fake_api: FakeAPI, claude_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = Always(text("never", fault=http_error(529)))
    out = await drive("go", cwd=workspace, env=claude_env)
    events = events_of(out.messages)
    assert not [e for e in events if e.kind == "text"]
    [error] = [e for e in events if e.kind == "error"]
    assert error.text.startswith("API Error: 529") and error.payload["synthetic"]
    result = events[-1]
    assert result.kind == "result" and result.text == "" and result.payload["is_error"]
    # The seed (004:14, 003:264) tells the message by its model, "<synthetic>": the CLI's
    # `error` tag is not what makes it an error: a synthetic message the CLI left untagged
    # must not become text either.
    [synthetic] = [m for m in out.assistant if m.model == "<synthetic>"]
    [untagged] = normalize(replace(synthetic, error=None))
    assert untagged.kind == "error" and untagged.text == error.text


async def test_a_hook_denial_is_a_denied_event(
    fake_api: FakeAPI, claude_env: dict[str, str], workspace: Path
) -> None:
    fake_api.script = sequence(tool("Bash", {"command": "echo DENYME"}), text("ok"))
    out = await drive("go", cwd=workspace, env=claude_env, disallowed_tools=["Bash(echo:*)"])
    denied = [e for e in events_of(out.messages) if e.kind == "denied"]
    assert denied and "Permission to use Bash" in denied[0].text


async def test_compaction_is_reported_as_reset_and_off_prevents_it(
    fake_api: FakeAPI, claude_env: dict[str, str], workspace: Path
) -> None:
    """Which variables switch the CLI's auto-compact, verified by a run (CompactPolicy)."""
    big = Usage(input_tokens=150_000)

    def script() -> object:
        steps = [
            tool("Bash", {"command": f"echo {i}"}, usage=big if i < 2 else None) for i in range(4)
        ]
        return rules(
            (When(kind="compaction"), Always(text("<summary>the story so far</summary>"))),
            (When(kind="main"), sequence(*steps, text("end"))),
        )

    async def run(mode: str, shell: dict[str, str] | None = None) -> tuple[list[str], list[Event]]:
        fake_api.reset()
        fake_api.script = script()  # type: ignore[assignment]
        spec = AgentSpec("t", "", allowed_tools=["Bash"], compact=CompactPolicy(mode, 100_000))  # type: ignore[arg-type]
        options = build_options(spec, cwd=workspace, use_plugin=False)
        # as the SDK does: the shell's environment, then the options' env over it
        env = {**(shell or {}), **options.env, **claude_env}
        out = await drive("go", cwd=workspace, env=env, allowed_tools=["Bash"])
        return [r.kind for r in fake_api.requests], events_of(out.messages)

    kinds, events = await run("auto")
    assert "compaction" in kinds
    resets = [e for e in events if e.kind == "reset"]
    assert resets and resets[0].payload["trigger"] == "auto"
    # a shell's DISABLE_AUTO_COMPACT=1 (003:27-29) does not reach the CLI: flower's switch wins
    kinds, _ = await run("auto", shell={"DISABLE_AUTO_COMPACT": "1", "DISABLE_COMPACT": "1"})
    assert "compaction" in kinds
    kinds, events = await run("off")
    assert "compaction" not in kinds and not [e for e in events if e.kind == "reset"]


def test_str_of_events() -> None:
    assert str(Event("tool_call", "ls", "Bash")) == "[Bash] ls"
    assert str(Event("text", "hello")) == "hello"
    assert str(Event("reset")) == "<reset>"


@pytest.mark.parametrize(
    ("tool_input", "summary"),
    [
        ({"command": "git status\nls"}, "git status"),
        ({"file_path": "/w/a.py", "content": "x"}, "/w/a.py"),
        ({"description": "write a note", "prompt": "p"}, "write a note"),
        ({"other": 1}, '{"other": 1}'),
    ],
)
def test_summarize_input(tool_input: dict[str, object], summary: str) -> None:
    assert summarize_input(tool_input) == summary


def test_context_level_sums_the_three_input_counts() -> None:
    usage = {"input_tokens": 5, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 11}
    assert context_level(usage) == 23
    assert context_level(None) == 0
