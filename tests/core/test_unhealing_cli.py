"""What will not heal stops at once (issue 30): a CLI that exits before its first API request
twice with the same error ends the step after two attempts, with one sentence that names the
cause; a CLI that dies mid-turn is still resumed, however often, as the seeds say.

On the real CLI: an invalid `--permission-mode` makes it exit 1 at start, every time, with
the reason on its stderr (as a kernel without PR_SET_CHILD_SUBREAPER made flower's reaper
raise at start, the case seen); a Bash tool that SIGKILLs its parent kills it mid-turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flower.core.agent import AgentSpec
from flower.core.events import Event
from flower.core.resilience import Resilience
from flower.core.runtime import Runtime
from flower.testing import Always, FakeAPI, Reply, Request, When, rules, text, tool

pytestmark = pytest.mark.anyio

# Eight attempts, as the seeds give a step, with backoffs short enough for a test.
FAST = Resilience(cli_retries=0, base_delay=0.01, max_delay=0.02, probe_interval=0.05)
INVALID = "argument 'bogus' is invalid"  # what the CLI says of the bad option, on stderr
# The nearest ancestor of the Bash tool that is the CLI (`claude`), SIGKILLed.
KILL_THE_CLI = (
    "p=$$; while [ \"$(cat /proc/$p/comm)\" != claude ]; do p=$(cut -d' ' -f4 /proc/$p/stat); "
    "done; kill -9 $p"
)


@pytest.fixture
def runtime(flower_env: FakeAPI, workspace: Path) -> Iterator[Runtime]:
    rt = Runtime(workspace=workspace, run_dir=workspace.parent / "runs", resilience=FAST)
    try:
        yield rt
    finally:
        rt.close()


async def test_a_cli_that_dies_at_start_twice_alike_stops_after_two_attempts(
    runtime: Runtime, flower_env: FakeAPI, capfd: pytest.CaptureFixture[str]
) -> None:
    flower_env.script = Always(text("never asked"))
    events: list[Event] = []
    spec = AgentSpec("broken", "", permission_mode="bogus")

    result = await runtime.run(spec, "go", on_event=events.append)

    assert not result.ok and result.attempts == 2
    assert result.error is not None
    assert result.error.startswith("这一步停下:Claude Code CLI 两次在第一个 API 请求之前以退出码 1")
    assert INVALID in result.error and result.error.endswith("plan.")  # the CLI's last line
    assert "\n" not in result.error  # one sentence
    assert len(result.errors) == 2
    assert [e.payload.get("attempt") for e in events if e.kind == "retry"] == [1]
    assert flower_env.requests == []  # it never got as far as the API
    assert INVALID in capfd.readouterr().err  # the CLI's stderr is still shown as before


async def test_the_sentence_is_english_in_english(
    runtime: Runtime, flower_env: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWER_LANG", "en")
    result = await runtime.run(AgentSpec("broken", "", permission_mode="bogus"), "go")
    assert result.attempts == 2 and result.error is not None
    assert result.error.startswith(
        "the step stops: the Claude Code CLI exited with exit code 1 before its first API "
        "request twice with the same error"
    )
    assert result.error.endswith("plan.") and INVALID in result.error


async def test_a_crash_mid_turn_is_still_resumed_however_alike(
    runtime: Runtime, flower_env: FakeAPI
) -> None:
    """Killed twice the same way (exit 137), but each time after an API response: both are
    resumed, the third attempt finishes the step in the same session."""

    kills: list[int] = []  # counted here: a CLI killed before it stored the call forgets it

    def crash_twice(request: Request) -> Reply:
        if len(kills) < 2:
            kills.append(request.index)
            return tool("Bash", {"command": KILL_THE_CLI}, id=f"toolu_kill_{len(kills)}")
        return text("carried on")

    flower_env.script = rules((When(kind="main"), crash_twice))
    events: list[Event] = []

    result = await runtime.run(
        AgentSpec("worker", "", allowed_tools=["Bash"]), "go", on_event=events.append
    )

    assert result.ok and result.text == "carried on"
    assert result.attempts == 3
    assert all("137" in error for error in result.errors) and len(result.errors) == 2
    assert [e.payload.get("kind") for e in events if e.payload.get("source") == "flower"] == [
        "other",
        "other",
    ]
    # Resumed in its session where the store held the reply the CLI died after; where the
    # kill beat the store's mirror, nothing answered is there to resume and the same
    # request is sent again in a new session (issue 30): either way, never stopped.
    sessions = {r.headers.get("x-claude-code-session-id") for r in flower_env.requests}
    assert result.resumed or len(sessions) > 1


async def test_a_cli_killed_before_its_session_was_stored_starts_it_anew(
    runtime: Runtime, flower_env: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed before the store held a line of its session (seen in CI: the kill came before
    the mirror's first batch), the CLI has nothing to resume ("No conversation found"): the
    step starts a new session on its own prompt, not the resume text, and is not stopped as
    a fault that will not heal."""
    lost: list[str] = []  # the killed session: until its request arrives, the only one
    keep = runtime.store.append

    async def nothing_of_the_first_session(key: Any, entries: list[Any]) -> None:
        if lost and key["session_id"] != lost[0]:  # as if the kill came before every batch
            await keep(key, entries)

    monkeypatch.setattr(runtime.store, "append", nothing_of_the_first_session)

    def crash_once(request: Request) -> Reply:
        if not lost:
            lost.append(str(request.headers.get("x-claude-code-session-id")))
            return tool("Bash", {"command": KILL_THE_CLI}, id="toolu_kill")
        return text("carried on")

    flower_env.script = rules((When(kind="main"), crash_once))

    result = await runtime.run(AgentSpec("worker", "", allowed_tools=["Bash"]), "go")

    assert result.ok and result.text == "carried on" and not result.resumed
    assert result.attempts == 2 and len(result.errors) == 1 and "137" in result.errors[0]
    main = [r for r in flower_env.requests if r.kind == "main"]
    first, again = main[0], main[-1]
    assert first.headers.get("x-claude-code-session-id") == lost[0]
    assert again.headers.get("x-claude-code-session-id") != lost[0]  # a new session
    (prompt,) = again.user_texts  # its own prompt, and nothing of the lost session
    assert prompt.endswith("\n\ngo") and again.tool_results() == []
