"""The harness proven on the real Claude Code CLI: tools really run, subagents are told apart,
every fault kind yields what docs/fault-behaviour.md says, usage numbers come back."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from claude_agent_sdk import AgentDefinition, SystemMessage
from claude_agent_sdk._errors import ResultError

from flower.testing import (
    Always,
    FakeAPI,
    Reply,
    Text,
    Thinking,
    Usage,
    When,
    drop,
    http_error,
    prompt_too_long,
    reset,
    rules,
    sequence,
    stream_error,
    text,
    tool,
)
from tests.driver import drive

pytestmark = pytest.mark.anyio


async def test_write_tool_really_writes(fake_api: FakeAPI, claude_env, workspace: Path) -> None:
    target = workspace / "hello.txt"
    fake_api.script = sequence(
        tool("Write", {"file_path": str(target), "content": "hi\n"}, say="writing"),
        text("done"),
    )
    out = await drive("write hello", cwd=workspace, env=claude_env, permission_mode="acceptEdits")
    assert out.error is None
    assert target.read_text() == "hi\n"
    second = fake_api.main_requests()[1]
    assert "File created successfully" in second.last_tool_results()[0].text
    assert out.result.result == "done"


async def test_bash_output_reaches_the_model(
    fake_api: FakeAPI, claude_env, workspace: Path
) -> None:
    fake_api.script = sequence(tool("Bash", {"command": "echo $((6*7))"}), text("answered"))
    out = await drive("compute", cwd=workspace, env=claude_env, allowed_tools=["Bash"])
    assert out.error is None
    result = fake_api.main_requests()[1].last_tool_results()[0]
    assert result.text.strip() == "42"
    assert not result.is_error


async def test_subagent_requests_are_told_apart(
    fake_api: FakeAPI, claude_env, workspace: Path
) -> None:
    note = workspace / "note.txt"
    scribe = AgentDefinition(
        description="Writes notes", prompt="You are the scribe. Write notes.", tools=["Write"]
    )
    fake_api.script = rules(
        (
            When(kind="subagent", system_contains="You are the scribe"),
            sequence(tool("Write", {"file_path": str(note), "content": "n"}), text("note written")),
        ),
        (
            When(kind="main"),
            sequence(
                tool(
                    "Agent",
                    {
                        "description": "write a note",
                        "prompt": "Write the note.",
                        "subagent_type": "scribe",
                        "run_in_background": False,
                    },
                ),
                text("all done"),
            ),
        ),
    )
    out = await drive(
        "delegate",
        cwd=workspace,
        env=claude_env,
        agents={"scribe": scribe},
        permission_mode="acceptEdits",
    )
    assert out.error is None
    assert note.read_text() == "n"
    [agent_id] = fake_api.agent_ids()
    sub = fake_api.subagent_requests(agent_id)
    assert len(sub) == 2 and all(r.is_subagent for r in sub)
    assert "You are the scribe" in sub[0].system_text
    assert sub[0].tool_names == ["Write"]
    main = fake_api.main_requests()
    assert all(r.agent_id is None and not r.is_subagent for r in main)
    assert "note written" in main[-1].last_tool_results()[0].text


# status, the AssistantMessage.error the SDK reports, text the model's "answer" carries
HTTP_FAULTS = [
    (http_error(401), "authentication_failed", 401, "Invalid API key"),
    (http_error(403), "authentication_failed", 403, "403"),
    (http_error(429, retry_after=1), "rate_limit", 429, "Request rejected (429)"),
    (http_error(500), "server_error", 500, "API Error: 500"),
    (http_error(529), "server_error", 529, "API Error: 529 Overloaded"),
]


@pytest.mark.parametrize(("fault", "error", "status", "says"), HTTP_FAULTS)
async def test_http_faults_end_in_result_error(
    fake_api: FakeAPI, claude_env, workspace: Path, fault, error: str, status: int, says: str
) -> None:
    fake_api.script = Always(text("unreachable", fault=fault))
    out = await drive("hi", cwd=workspace, env=claude_env)
    [synthetic] = out.assistant
    assert synthetic.error == error
    assert synthetic.model == "<synthetic>"
    assert says in out.texts[0]
    assert out.result.is_error and out.result.terminal_reason == "api_error"
    assert out.result.api_error_status == status
    assert isinstance(out.error, ResultError)
    assert len(fake_api.requests) == 1  # CLAUDE_CODE_MAX_RETRIES=0: no retry by the CLI


async def test_prompt_too_long_on_first_turn_is_terminal(
    fake_api: FakeAPI, claude_env, workspace: Path
) -> None:
    fake_api.script = Always(text("never", fault=prompt_too_long(1_050_000, 1_000_000)))
    out = await drive("hi", cwd=workspace, env=claude_env)
    assert out.assistant[0].error == "invalid_request"
    assert "Prompt is too long" in out.texts[0]
    assert out.result.terminal_reason == "prompt_too_long"
    assert isinstance(out.error, ResultError)


async def test_drop_before_any_block_falls_back_to_non_streaming(
    fake_api: FakeAPI, claude_env, workspace: Path
) -> None:
    fake_api.script = Always(text("recovered", fault=drop(0, times=1)))
    out = await drive("hi", cwd=workspace, env=claude_env)
    assert out.error is None and out.result.result == "recovered"
    assert [r.stream for r in fake_api.requests] == [True, False]


@pytest.mark.parametrize("fault", [drop(1, times=1), stream_error(1, times=1)])
async def test_cut_after_a_block_is_rerequested_with_a_nudge(
    fake_api: FakeAPI, claude_env, workspace: Path, fault
) -> None:
    fake_api.script = Always(Reply(blocks=(Text("part one"), Text("part two")), fault=fault))
    out = await drive("hi", cwd=workspace, env=claude_env)
    assert out.error is None and out.result.result == "part two"
    retry = fake_api.requests[1]
    assert "cut off mid-stream" in retry.conversation_text
    assert retry.assistant_texts[-1] == "part one"  # the partial block was kept


async def test_cut_every_time_gives_up_after_three_rerequests(
    fake_api: FakeAPI, claude_env, workspace: Path
) -> None:
    fake_api.script = Always(Reply(blocks=(Text("part one"), Text("two")), fault=drop(1)))
    out = await drive("hi", cwd=workspace, env=claude_env)
    assert len(fake_api.requests) == 4
    assert out.assistant[-1].error == "server_error"
    assert "Connection lost mid-response" in out.texts[-1]
    assert out.result.api_error_status is None
    assert isinstance(out.error, ResultError)


async def test_server_gone_is_connection_refused(
    fake_api: FakeAPI, claude_env, workspace: Path
) -> None:
    fake_api.stop()
    out = await drive("hi", cwd=workspace, env=claude_env)
    assert "ECONNREFUSED" in out.texts[-1]
    assert out.result.terminal_reason == "api_error"
    assert isinstance(out.error, ResultError)


async def test_one_blip_is_absorbed_by_the_clis_own_retry(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    fake_api.script = Always(text("fine", fault=http_error(529, times=1)))
    out = await drive("hi", cwd=workspace, env=fake_api.env(home=claude_home, retries=1))
    assert out.error is None and out.result.result == "fine"
    retries = [m for m in out.messages if isinstance(m, SystemMessage) and m.subtype == "api_retry"]
    assert [m.data["error_status"] for m in retries] == [529]
    assert [r.answered for r in fake_api.requests] == ["http 529", "text"]


async def test_usage_numbers_come_back_in_the_sdk_messages(
    fake_api: FakeAPI, claude_env, workspace: Path
) -> None:
    usage = Usage(
        input_tokens=1234,
        output_tokens=56,
        cache_read_input_tokens=700,
        cache_creation_input_tokens=80,
    )
    fake_api.script = Always(text("u", usage=usage))
    out = await drive("hi", cwd=workspace, env=claude_env)
    seen = out.assistant[0].usage or {}
    assert (seen["input_tokens"], seen["cache_read_input_tokens"]) == (1234, 700)
    assert seen["cache_creation_input_tokens"] == 80
    assert out.result.usage is not None and out.result.usage["output_tokens"] == 56
    assert out.result.total_cost_usd and out.result.total_cost_usd > 0


async def test_thinking_blocks_are_accepted(fake_api: FakeAPI, claude_env, workspace: Path) -> None:
    fake_api.script = Always(Reply(blocks=(Thinking("let me see"), Text("thought about it"))))
    out = await drive("hi", cwd=workspace, env=claude_env)
    assert out.error is None and out.result.result == "thought about it"
    assert any(type(b).__name__ == "ThinkingBlock" for m in out.assistant for b in m.content)


async def test_a_script_error_is_a_visible_400_not_a_hang(
    claude_home: Path, workspace: Path
) -> None:
    def broken(request):
        raise KeyError("no such step")

    with FakeAPI(broken) as api:
        out = await drive("hi", cwd=workspace, env=api.env(home=claude_home))
    # A plain 400 is re-sent a bounded number of times (the CLI varies the request shape),
    # then it is terminal: the error text reaches the SDK instead of a hang.
    assert "API Error: 400 fake API script error on request #" in out.texts[-1]
    assert 1 <= len(api.requests) <= 6
    assert all("no such step" in e for e in api.errors)
    assert isinstance(out.error, ResultError)


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fakeapi" / "write-file.yaml"


@pytest.fixture
def served_example(tmp_path: Path) -> Iterator[tuple[FakeAPI, Path]]:
    """The example script served by `python -m flower.testing.fakeapi` in a subprocess."""
    log = tmp_path / "requests.jsonl"
    command = [sys.executable, "-m", "flower.testing.fakeapi", "--script", str(EXAMPLE)]
    with subprocess.Popen([*command, "--log", str(log)], stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().split()[-1]
            yield FakeAPI(port=int(url.rsplit(":", 1)[1])), log
        finally:
            proc.terminate()
    assert proc.returncode == 0  # 0: the script raised on no request


async def test_cli_runs_against_the_process_mode_and_a_declarative_script(
    served_example: tuple[FakeAPI, Path], claude_home: Path, workspace: Path
) -> None:
    client_side, log = served_example
    env = client_side.env(home=claude_home)
    out = await drive("greet", cwd=workspace, env=env, permission_mode="acceptEdits")
    assert out.error is None and out.result.result == "hello.txt is written."
    assert (workspace / "hello.txt").read_text() == "hello from the fake model\n"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["answered"] for r in records] == ["text+tool_use:Write", "text"]
    assert env["ANTHROPIC_API_KEY"] not in log.read_text()


async def test_a_reset_before_any_answer_is_a_connection_error_or_a_cli_retry(
    fake_api: FakeAPI, claude_home: Path, workspace: Path
) -> None:
    fake_api.script = Always(text("fine", fault=reset(times=1)))
    out = await drive("hi", cwd=workspace, env=fake_api.env(home=claude_home, retries=0))
    assert "Connection dropped (ECONNRESET)" in out.texts[-1] and isinstance(out.error, ResultError)
    fake_api.reset()
    fake_api.script = Always(text("fine", fault=reset(times=1)))
    out = await drive("hi", cwd=workspace, env=fake_api.env(home=claude_home, retries=1))
    assert out.error is None and out.result.result == "fine"
    assert [r.answered for r in fake_api.requests] == ["reset", "text"]
